// SpaceAdmission: whether the store's file system can take a write request
// or a sweep of the background pass on top of the reserve SpaceBudget keeps
// for metadata and reclaim (docs/architecture.md "A full disk"). Bytes of
// requests admitted and not yet written count against the room, so that
// requests queued on one stream, all admitted before the first writes, do
// not pass the reserve together.
//
// Thread-safe: its state is atomic; admit_write may sleep, a bounded time,
// while reclaim frees space.
#pragma once

#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "hiodsfs/status.h"

namespace hiodsfs {

// A request's bytes, counted as being written until this goes.
struct Admission {
    std::atomic<std::uint64_t>& bytes;
    std::uint64_t len;
    Admission(std::atomic<std::uint64_t>& b, std::uint64_t n) : bytes(b), len(n) {}
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;
    ~Admission() { bytes.fetch_sub(len, std::memory_order_relaxed); }
};

class SpaceAdmission {
public:
    // The store's file system's figures (StoreDir::statvfs).
    using Statvfs = std::function<Status(struct statvfs*)>;
    // What a write waiting for room watches of reclaim (admit_write).
    struct Reclaim {
        std::function<void()> wake;                  // let the reclaimer run now
        std::function<std::uint64_t()> disk_bytes;   // segment bytes on disk
        std::function<std::uint64_t()> files_freed;  // deleted files freed so far
    };

    // Until started, and with a reserve of 0, everything is admitted.
    void start(std::uint64_t reserve, Statvfs statvfs) {
        reserve_ = reserve;
        statvfs_ = std::move(statvfs);
    }
    // Once the reclaimer runs: admit_write waits for it on a full disk.
    void set_reclaim(Reclaim reclaim) { reclaim_ = std::move(reclaim); }
    std::uint64_t reserve() const { return reserve_; }

    // ENOSPC when the store's file system cannot take len on top of `keep`
    // free bytes (file data and the pass keep the reserve) and of what
    // admitted requests are still writing (admitted: len is one of them).
    Status check(std::uint64_t len) { return check(len, reserve_); }
    Status check(std::uint64_t len, std::uint64_t keep, bool admitted = false);
    // check for a request of len bytes that counts as being written until
    // *out goes. The pass's sweeps (background) yield to a write waiting
    // for room.
    Status admit(std::uint64_t len, std::optional<Admission>* out, bool background = false) {
        admitted_.fetch_add(len, std::memory_order_relaxed);
        out->emplace(admitted_, len);
        if (background && room_waiters_.load(std::memory_order_relaxed) > 0)
            return Status::error(ENOSPC, "a write is waiting for room");
        return check(len, reserve_, true);
    }
    // admit for a foreground write: on a full disk it first waits, a bounded
    // time, while reclaim gives space back (deletes being purged, segments
    // the pass or a delete left dead), the way a file system flushes its
    // pending frees before it answers ENOSPC. Meanwhile the pass yields.
    Status admit_write(std::uint64_t len, std::optional<Admission>* out);

private:
    std::uint64_t reserve_ = 0;  // bytes (EngineOptions::space_reserve)
    Statvfs statvfs_;
    std::optional<Reclaim> reclaim_;
    // check's view: free bytes at the last statvfs (steady-clock time), and
    // bytes asked for since.
    std::atomic<std::uint64_t> known_avail_{0}, asked_since_{0};
    std::atomic<std::int64_t> known_at_{0};
    // Bytes of write requests and pass sweeps that passed check and are
    // not yet written.
    std::atomic<std::uint64_t> admitted_{0};
    std::atomic<int> room_waiters_{0};
};

}  // namespace hiodsfs
