// SpaceAdmission (space_admission.h): the ENOSPC admission of write
// requests and the pass's sweeps.
#include "engine/space_admission.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

namespace hiodsfs {

Status SpaceAdmission::check(std::uint64_t len, std::uint64_t keep, bool admitted) {
    if (reserve_ == 0 || !statvfs_) return Status::ok();
    // Far from the reserve, the last statvfs less what was asked for since
    // answers without a system call per write request; it is refreshed at
    // least every second, and on every request once within kSpaceSlack.
    constexpr std::uint64_t kSpaceSlack = 64ull << 20;
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    const std::uint64_t known = known_avail_.load(std::memory_order_relaxed);
    const std::uint64_t since = asked_since_.fetch_add(len, std::memory_order_relaxed) + len;
    if (now - known_at_.load(std::memory_order_relaxed) < std::int64_t{1'000'000'000} &&
        known > since && known - since > keep && known - since - keep >= kSpaceSlack)
        return Status::ok();
    struct statvfs v {};
    if (!statvfs_(&v)) return Status::ok();  // let the write say
    std::uint64_t avail = std::uint64_t{v.f_bavail} * v.f_frsize;
    known_avail_.store(avail, std::memory_order_relaxed);
    std::uint64_t pending = admitted_.load(std::memory_order_relaxed);
    if (admitted) pending -= std::min(pending, len);
    avail -= std::min(avail, pending);
    asked_since_.store(0, std::memory_order_relaxed);
    known_at_.store(now, std::memory_order_relaxed);
    if (avail < keep || avail - keep < len)
        return Status::error(ENOSPC, "the store's file system is full (" +
                                         std::to_string(reserve_ >> 20) +
                                         " MiB kept for metadata and reclaim)");
    return Status::ok();
}

Status SpaceAdmission::admit_write(std::uint64_t len, std::optional<Admission>* out) {
    Status st = admit(len, out);
    if (st || st.err() != ENOSPC || !reclaim_) return st;
    // Waits while reclaim makes progress (segment bytes on disk shrink, or a
    // deleted file is purged), at most kGiveUp without any and kMaxWait in all.
    constexpr auto kPoll = std::chrono::milliseconds(50);
    constexpr auto kGiveUp = std::chrono::milliseconds(2500);  // the reclaimer polls every second
    constexpr auto kMaxWait = std::chrono::seconds(20);
    room_waiters_.fetch_add(1);
    struct Leave {
        std::atomic<int>& n;
        ~Leave() { n.fetch_sub(1); }
    } leave{room_waiters_};
    const auto start = std::chrono::steady_clock::now();
    auto last_progress = start;
    std::uint64_t disk = reclaim_->disk_bytes();
    std::uint64_t purged = reclaim_->files_freed();
    while (!st && st.err() == ENOSPC) {
        reclaim_->wake();
        std::this_thread::sleep_for(kPoll);
        const auto now = std::chrono::steady_clock::now();
        const std::uint64_t d = reclaim_->disk_bytes(), p = reclaim_->files_freed();
        if (d < disk || p > purged) last_progress = now;
        disk = std::min(disk, d);
        purged = std::max(purged, p);
        known_at_.store(0, std::memory_order_relaxed);  // a fresh statvfs
        st = check(len, reserve_, true);
        if (now - last_progress > kGiveUp || now - start > kMaxWait) break;
    }
    return st;
}

}  // namespace hiodsfs
