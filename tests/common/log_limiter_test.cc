// The daemon's log of errors it answers: the same line again within the
// window is counted, not written, and the count goes with the next line.
#include <catch2/catch.hpp>

#include "common/log_limiter.h"

using namespace hiodsfs;
using namespace std::chrono_literals;

TEST_CASE("log limiter: repeats of a line within the window are held back and counted", "[common][log]") {
    LogLimiter limiter(10s);
    const LogLimiter::Clock::time_point t0{};
    std::uint64_t held = 99;
    REQUIRE(limiter.admit("fsync: EIO", t0 + 1s, &held));
    CHECK(held == 0);
    // A retry loop: a line a second for five seconds, none written.
    for (int i = 2; i <= 6; ++i) CHECK_FALSE(limiter.admit("fsync: EIO", t0 + i * 1s, &held));
    // Another line is written at once, with the count of the held ones.
    REQUIRE(limiter.admit("read: EIO", t0 + 7s, &held));
    CHECK(held == 5);
    // The first line again: not a repeat of the last one written.
    REQUIRE(limiter.admit("fsync: EIO", t0 + 8s, &held));
    CHECK(held == 0);
    CHECK_FALSE(limiter.admit("fsync: EIO", t0 + 9s, &held));
    // The window is measured from the line written: after it, written again.
    CHECK_FALSE(limiter.admit("fsync: EIO", t0 + 17s, &held));
    REQUIRE(limiter.admit("fsync: EIO", t0 + 18s, &held));
    CHECK(held == 2);
}
