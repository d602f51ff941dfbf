// ManualClock: a Clock that moves only when told to, with which tests
// replay synthetic load traces exactly. Internal to the control layer and
// its tests: no program that links libhiodsfs needs it.
// Thread-safety: its setters are atomic and may race with readers.
#pragma once

#include <atomic>
#include <cstdint>

#include "hiodsfs/clock.h"

namespace hiodsfs {

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
