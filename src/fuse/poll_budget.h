// PollBudget: whether the request reader may poll for the next request now
// (ReaderGate, request_poll=), from the machine's CPU pressure.
//
// Polling takes a core while it waits. On a machine with a core to spare
// that is free, and a serial copier (tar -x) gains the wake-up it saves; on
// one whose cores the copier needs itself (rsync's three processes on two
// cores) the poll takes them away. Which it is shows in the kernel's CPU
// pressure (/proc/pressure/cpu, "some": the time some task was runnable
// and waited for a CPU). The budget looks at it every window: polling
// stops once a window's pressure passes a share of the window, stays off
// for a while, then is tried again; each try that finds pressure again
// doubles the while, up to a few seconds, and a window without pressure
// resets it. Without /proc/pressure (an older kernel, psi=0) the reader
// polls as told.
// Thread-safety: may_poll() from any thread; update() from one thread at a
// time (ReaderGate calls it under its mutex).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace hiodsfs::fuse {

class PollBudget {
public:
    using Clock = std::chrono::steady_clock;
    // Reads the cumulative CPU stall time ("some total", microseconds);
    // false if it cannot.
    using StallSource = std::function<bool(std::uint64_t* total_us)>;

    // The kernel's /proc/pressure/cpu, or a source that always fails where
    // it cannot be read.
    static StallSource cpu_pressure();

    // Polling stops in a window whose stall time is over busy_share of it.
    static constexpr std::chrono::milliseconds kWindow{100};
    static constexpr double kBusyShare = 0.05;
    static constexpr std::chrono::milliseconds kFirstPause{200};
    static constexpr std::chrono::milliseconds kLongestPause{5000};

    explicit PollBudget(StallSource source);

    bool may_poll() const { return polling_.load(std::memory_order_relaxed); }
    // Looks at the pressure when a window has passed since the last look.
    void update(Clock::time_point now);

    // Windows in which polling was stopped, for status and tests.
    std::uint64_t pauses() const { return pauses_.load(std::memory_order_relaxed); }

private:
    StallSource source_;
    bool have_source_ = true;
    std::atomic<bool> polling_{true};
    Clock::time_point window_start_{};
    std::uint64_t window_stall_ = 0;
    Clock::time_point paused_until_{};
    std::chrono::milliseconds pause_{kFirstPause};
    std::atomic<std::uint64_t> pauses_{0};
};

}  // namespace hiodsfs::fuse
