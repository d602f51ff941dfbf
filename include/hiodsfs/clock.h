// Clock: the time source of the mode controller. Production code uses
// Clock::system() (CLOCK_MONOTONIC, so NTP steps never look like load
// changes); tests use ManualClock to replay synthetic load traces exactly.
// Thread-safety: now_ns() may be called from any thread; ManualClock's
// setters are atomic and may race with readers.
#pragma once

#include <atomic>
#include <cstdint>

namespace hiodsfs {

class Clock {
public:
    virtual ~Clock() = default;
    // Nanoseconds since an arbitrary fixed origin; never goes backwards.
    virtual std::uint64_t now_ns() = 0;
    // The process-wide CLOCK_MONOTONIC clock (never null, never freed).
    static Clock* system();
};

// A clock that moves only when told to.
class ManualClock final : public Clock {
public:
    explicit ManualClock(std::uint64_t start_ns = 0);
    std::uint64_t now_ns() override;
    void advance_ns(std::uint64_t delta_ns);
    // Tests set absolute times; setting an earlier time is the caller's
    // business (the monitor tolerates it, see LoadMonitor).
    void set_ns(std::uint64_t now_ns);

private:
    std::atomic<std::uint64_t> now_ns_;
};

}  // namespace hiodsfs
