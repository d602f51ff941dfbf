// PollBudget (src/fuse/poll_budget.cc): the request reader polls while the
// machine's CPU pressure leaves a core to spare, stops when a window shows
// tasks waiting for a CPU, tries again after a pause that doubles while the
// pressure stays, and polls as told where no pressure can be read. The
// clock and the stall time are the test's.
#include "fuse/poll_budget.h"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "fuse/reader_gate.h"
#include "../skip.h"

using namespace hiodsfs::fuse;
using namespace std::chrono_literals;

namespace {

// A stall counter the test moves: stall_us is "some total".
struct FakePressure {
    std::uint64_t stall_us = 0;
    bool readable = true;
    PollBudget::StallSource source() {
        return [this](std::uint64_t* out) {
            if (!readable) return false;
            *out = stall_us;
            return true;
        };
    }
};

// One window of `window` with `stalled` of it under pressure.
void pass_window(PollBudget& b, FakePressure& p, PollBudget::Clock::time_point& now, std::chrono::microseconds stalled,
                 std::chrono::milliseconds window = PollBudget::kWindow) {
    now += window;
    p.stall_us += static_cast<std::uint64_t>(stalled.count());
    b.update(now);
}

}  // namespace

TEST_CASE("polling stops under CPU pressure and is tried again after a pause that doubles",
          "[fuse][poll_budget]") {
    FakePressure p;
    PollBudget b(p.source());
    auto now = PollBudget::Clock::time_point{} + 1h;
    b.update(now);  // the first look only starts a window
    CHECK(b.may_poll());
    pass_window(b, p, now, 1ms);  // 1 % of the window: a core to spare
    CHECK(b.may_poll());
    pass_window(b, p, now, 20ms);  // 20 %: tasks wait for a CPU
    CHECK_FALSE(b.may_poll());
    CHECK(b.pauses() == 1);
    // Within the first pause (200 ms) it stays off whatever the pressure.
    pass_window(b, p, now, 0ms);
    CHECK_FALSE(b.may_poll());
    pass_window(b, p, now, 0ms);
    CHECK(b.may_poll());  // tried again
    // Pressure again: off for twice as long.
    pass_window(b, p, now, 50ms);
    CHECK_FALSE(b.may_poll());
    CHECK(b.pauses() == 2);
    for (int i = 0; i < 3; ++i) {
        pass_window(b, p, now, 0ms);
        CHECK_FALSE(b.may_poll());
    }
    pass_window(b, p, now, 0ms);  // 400 ms later
    CHECK(b.may_poll());
    // A quiet window while polling resets the pause to the first.
    pass_window(b, p, now, 0ms);
    pass_window(b, p, now, 30ms);
    CHECK_FALSE(b.may_poll());
    pass_window(b, p, now, 0ms);
    pass_window(b, p, now, 0ms);
    CHECK(b.may_poll());
}

TEST_CASE("the pause grows to its longest and no further", "[fuse][poll_budget]") {
    FakePressure p;
    PollBudget b(p.source());
    auto now = PollBudget::Clock::time_point{} + 1h;
    b.update(now);
    std::chrono::milliseconds off{0};
    // Always under pressure: measure each pause.
    for (int round = 0; round < 10; ++round) {
        pass_window(b, p, now, 100ms);
        REQUIRE_FALSE(b.may_poll());
        off = 0ms;
        while (!b.may_poll()) {
            pass_window(b, p, now, 100ms);
            off += PollBudget::kWindow;
        }
    }
    CHECK(off == PollBudget::kLongestPause);
}

TEST_CASE("looks more often than a window apart change nothing", "[fuse][poll_budget]") {
    FakePressure p;
    PollBudget b(p.source());
    auto now = PollBudget::Clock::time_point{} + 1h;
    b.update(now);
    // Pressure that lands between looks a few ms apart is judged over the
    // whole window, not over the last few ms.
    for (int i = 0; i < 99; ++i) {
        now += 1ms;
        if (i == 50) p.stall_us += 3000;  // 3 % of the window
        b.update(now);
    }
    now += 1ms;
    b.update(now);
    CHECK(b.may_poll());
}

TEST_CASE("without a pressure to read the reader polls as told", "[fuse][poll_budget]") {
    FakePressure p;
    p.readable = false;
    PollBudget b(p.source());
    auto now = PollBudget::Clock::time_point{} + 1h;
    for (int i = 0; i < 5; ++i) {
        now += PollBudget::kWindow;
        b.update(now);
        CHECK(b.may_poll());
    }
    CHECK(b.pauses() == 0);
}

TEST_CASE("the kernel's CPU pressure reads as a growing total", "[fuse][poll_budget]") {
    if (!std::ifstream("/proc/pressure/cpu")) SKIP_TEST("no /proc/pressure/cpu on this kernel");
    auto source = PollBudget::cpu_pressure();
    std::uint64_t a = 0, b = 0;
    REQUIRE(source(&a));
    REQUIRE(source(&b));
    CHECK(b >= a);
}

TEST_CASE("a gate under CPU pressure stops polling", "[fuse][poll_budget]") {
    // (Without the budget every one of the 1000 enters below would poll.)
    // Every microsecond of the test's time is stalled: a machine with no
    // core to spare.
    const auto start = std::chrono::steady_clock::now();
    auto busy = [start](std::uint64_t* out) {
        *out = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
        return true;
    };
    ReaderGate gate(100us, 2ms, busy);
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) == 0);
    // A reader that enters and leaves with nothing to read, until the
    // budget has looked at a full window (deadline: not a timing claim).
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (gate.poll_pauses() == 0 && std::chrono::steady_clock::now() < deadline) {
        gate.enter(fds[0]);
        gate.leave(false);
    }
    REQUIRE(gate.poll_pauses() >= 1);
    // Paused: readers no longer poll (the pause may end meanwhile on a
    // busy machine, and then ends again a window later, so "most").
    const std::uint64_t before = gate.polls();
    for (int i = 0; i < 1000; ++i) {
        gate.enter(fds[0]);
        gate.leave(false);
    }
    CHECK(gate.polls() - before < 500);
    ::close(fds[0]);
    ::close(fds[1]);
}
