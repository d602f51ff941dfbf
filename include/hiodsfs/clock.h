// Clock: the time source of the mode controller. Production code uses
// Clock::system() (CLOCK_MONOTONIC, so NTP steps never look like load
// changes); tests use ManualClock (control/manual_clock.h) to replay
// synthetic load traces exactly.
// Thread-safety: now_ns() may be called from any thread.
#pragma once

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

}  // namespace hiodsfs
