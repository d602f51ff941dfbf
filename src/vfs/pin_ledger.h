// PinLedger: how many pins the Vfs holds on each inode (kernel lookup
// counts plus open handles). It keeps the engine's pins balanced (a forget
// never gives back more than was taken) and lets the Vfs return every pin
// at unmount, where the kernel sends no forgets.
// Thread-safety: every method may be called from any thread; sharded by
// inode so lookups and forgets on different inodes rarely contend.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hiodsfs/types.h"

namespace hiodsfs::vfs {

class PinLedger {
public:
    void add(InodeId ino, std::uint64_t n) {
        Shard& s = shard(ino);
        std::lock_guard lock(s.mu);
        s.counts[ino] += n;
    }

    // Takes up to n pins off ino; returns how many were held and taken.
    std::uint64_t take(InodeId ino, std::uint64_t n) {
        Shard& s = shard(ino);
        std::lock_guard lock(s.mu);
        auto it = s.counts.find(ino);
        if (it == s.counts.end()) return 0;
        std::uint64_t taken = std::min(n, it->second);
        it->second -= taken;
        if (it->second == 0) s.counts.erase(it);
        return taken;
    }

    std::uint64_t count(InodeId ino) const {
        const Shard& s = shard(ino);
        std::lock_guard lock(s.mu);
        auto it = s.counts.find(ino);
        return it == s.counts.end() ? 0 : it->second;
    }

    std::size_t inodes() const {
        std::size_t n = 0;
        for (const Shard& s : shards_) {
            std::lock_guard lock(s.mu);
            n += s.counts.size();
        }
        return n;
    }

    // Empties the ledger and returns what it held.
    std::vector<std::pair<InodeId, std::uint64_t>> take_all() {
        std::vector<std::pair<InodeId, std::uint64_t>> all;
        for (Shard& s : shards_) {
            std::lock_guard lock(s.mu);
            all.insert(all.end(), s.counts.begin(), s.counts.end());
            s.counts.clear();
        }
        return all;
    }

private:
    static constexpr std::size_t kShards = 16;
    struct Shard {
        mutable std::mutex mu;
        std::unordered_map<InodeId, std::uint64_t> counts;
    };
    Shard& shard(InodeId ino) { return shards_[ino % kShards]; }
    const Shard& shard(InodeId ino) const { return shards_[ino % kShards]; }

    std::array<Shard, kShards> shards_;
};

}  // namespace hiodsfs::vfs
