#include "fuse/poll_budget.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hiodsfs::fuse {

PollBudget::StallSource PollBudget::cpu_pressure() {
    return [](std::uint64_t* total_us) {
        // "some avg10=0.00 avg60=0.00 avg300=0.00 total=123\n"; read whole
        // each time (the file is regenerated on every read).
        const int fd = ::open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        char buf[256];
        const ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (n <= 0) return false;
        buf[n] = '\0';
        if (std::strncmp(buf, "some ", 5) != 0) return false;
        const char* total = std::strstr(buf, "total=");
        const char* line_end = std::strchr(buf, '\n');
        if (total == nullptr || (line_end != nullptr && total > line_end)) return false;
        char* end = nullptr;
        const unsigned long long v = std::strtoull(total + 6, &end, 10);
        if (end == total + 6) return false;
        *total_us = v;
        return true;
    };
}

PollBudget::PollBudget(StallSource source) : source_(std::move(source)) {}

void PollBudget::update(Clock::time_point now) {
    if (!have_source_) return;
    if (window_start_ != Clock::time_point{} && now - window_start_ < kWindow) return;
    std::uint64_t stall = 0;
    if (!source_(&stall)) {
        have_source_ = false;  // no pressure to go by: poll as told
        polling_.store(true, std::memory_order_relaxed);
        return;
    }
    const bool first = window_start_ == Clock::time_point{};
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now - window_start_);
    const std::uint64_t stalled = stall >= window_stall_ ? stall - window_stall_ : 0;
    window_start_ = now;
    window_stall_ = stall;
    if (first) return;
    const bool busy = static_cast<double>(stalled) > kBusyShare * static_cast<double>(elapsed.count());
    if (polling_.load(std::memory_order_relaxed)) {
        if (!busy) {
            pause_ = kFirstPause;
            return;
        }
        polling_.store(false, std::memory_order_relaxed);
        pauses_.fetch_add(1, std::memory_order_relaxed);
        paused_until_ = now + pause_;
        // The next try that finds pressure again pauses longer.
        pause_ = std::min(2 * pause_, kLongestPause);
        return;
    }
    if (now >= paused_until_) polling_.store(true, std::memory_order_relaxed);
}

}  // namespace hiodsfs::fuse
