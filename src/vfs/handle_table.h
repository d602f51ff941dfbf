// HandleTable: the open file and directory handles the kernel holds, keyed
// by the fh number handed out at open/opendir. Entries are shared_ptrs so a
// request that found a handle can finish with it while release runs.
// Thread-safety: every method may be called from any thread; the table is
// sharded so that concurrent reads and writes on different handles do not
// contend on one lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace hiodsfs::vfs {

template <typename Handle>
class HandleTable {
public:
    // Returns the new handle's number (never 0).
    std::uint64_t insert(std::shared_ptr<Handle> handle) {
        std::uint64_t fh = next_.fetch_add(1, std::memory_order_relaxed);
        Shard& s = shard(fh);
        std::lock_guard lock(s.mu);
        s.map.emplace(fh, std::move(handle));
        return fh;
    }

    // nullptr if fh is not open.
    std::shared_ptr<Handle> get(std::uint64_t fh) const {
        const Shard& s = shard(fh);
        std::lock_guard lock(s.mu);
        auto it = s.map.find(fh);
        return it == s.map.end() ? nullptr : it->second;
    }

    // Removes fh and returns what it held (nullptr if it was not open).
    std::shared_ptr<Handle> remove(std::uint64_t fh) {
        Shard& s = shard(fh);
        std::lock_guard lock(s.mu);
        auto it = s.map.find(fh);
        if (it == s.map.end()) return nullptr;
        std::shared_ptr<Handle> h = std::move(it->second);
        s.map.erase(it);
        return h;
    }

    std::size_t size() const {
        std::size_t n = 0;
        for (const Shard& s : shards_) {
            std::lock_guard lock(s.mu);
            n += s.map.size();
        }
        return n;
    }

private:
    static constexpr std::size_t kShards = 16;
    struct Shard {
        mutable std::mutex mu;
        std::unordered_map<std::uint64_t, std::shared_ptr<Handle>> map;
    };
    Shard& shard(std::uint64_t fh) { return shards_[fh % kShards]; }
    const Shard& shard(std::uint64_t fh) const { return shards_[fh % kShards]; }

    std::atomic<std::uint64_t> next_{1};
    std::array<Shard, kShards> shards_;
};

}  // namespace hiodsfs::vfs
