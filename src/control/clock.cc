#include "hiodsfs/clock.h"
#include "control/manual_clock.h"

#include <time.h>

namespace hiodsfs {

namespace {

class SystemClock final : public Clock {
public:
    std::uint64_t now_ns() override {
        timespec ts{};
        // CLOCK_MONOTONIC cannot fail with a valid pointer; no error path.
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
               static_cast<std::uint64_t>(ts.tv_nsec);
    }
};

}  // namespace

Clock* Clock::system() {
    // Stateless, so one shared instance serves every caller; a function-local
    // static is initialised exactly once even with concurrent first calls.
    static SystemClock clock;
    return &clock;
}

ManualClock::ManualClock(std::uint64_t start_ns) : now_ns_(start_ns) {}

std::uint64_t ManualClock::now_ns() { return now_ns_.load(std::memory_order_acquire); }

void ManualClock::advance_ns(std::uint64_t delta_ns) {
    now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
}

void ManualClock::set_ns(std::uint64_t now_ns) { now_ns_.store(now_ns, std::memory_order_release); }

}  // namespace hiodsfs
