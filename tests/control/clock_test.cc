// hiodsfs/clock.h (src/control/clock.cc): the controller's clocks.
#include <catch2/catch.hpp>

#include "control/manual_clock.h"
#include "hiodsfs/clock.h"

using namespace hiodsfs;

TEST_CASE("clocks: manual clock moves only when told, system clock is monotonic") {
    ManualClock clock(5);
    CHECK(clock.now_ns() == 5);
    clock.advance_ns(10);
    CHECK(clock.now_ns() == 15);
    clock.set_ns(1000);
    CHECK(clock.now_ns() == 1000);

    Clock* sys = Clock::system();
    REQUIRE(sys == Clock::system());
    const std::uint64_t a = sys->now_ns();
    const std::uint64_t b = sys->now_ns();
    CHECK(a > 0);
    CHECK(b >= a);
}
