// IntervalThread (engine/interval_thread.h) alone: the body runs every
// interval, at once when woken, never under the class's lock, and not
// after stop. The deadlines only end a wait that would otherwise hang.
#include "engine/interval_thread.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

using namespace hiodsfs;
using namespace std::chrono_literals;

namespace {

// Long enough that a run within a test's deadline was not the interval's.
constexpr auto kNever = std::chrono::hours(1);

// Polls until done() holds, at most a generous while.
template <typename F>
bool eventually(F done) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

}  // namespace

TEST_CASE("interval thread: the body runs every interval", "[interval-thread]") {
    std::atomic<int> runs{0};
    IntervalThread t;
    t.start("test-interval", 1ms, [&] { runs.fetch_add(1); });
    CHECK(eventually([&] { return runs.load() >= 3; }));
    t.stop();
}

TEST_CASE("interval thread: a wake runs the body at once", "[interval-thread]") {
    std::atomic<int> runs{0};
    IntervalThread t;
    t.start("test-interval", kNever, [&] { runs.fetch_add(1); });
    t.wake();
    CHECK(eventually([&] { return runs.load() == 1; }));
    t.wake();
    CHECK(eventually([&] { return runs.load() == 2; }));
    t.stop();
    CHECK(runs.load() == 2);
}

TEST_CASE("interval thread: wakes during a run make one more run", "[interval-thread]") {
    std::mutex gate;
    std::unique_lock<std::mutex> held(gate);
    std::atomic<int> started{0}, runs{0};
    IntervalThread t;
    t.start("test-interval", kNever, [&] {
        started.fetch_add(1);
        std::lock_guard<std::mutex> l(gate);  // the first run waits for the test
        runs.fetch_add(1);
    });
    t.wake();
    REQUIRE(eventually([&] { return started.load() == 1; }));
    // The body runs without the class's lock: wake does not wait for it.
    t.wake();
    t.wake();
    t.wake();
    held.unlock();
    CHECK(eventually([&] { return runs.load() == 2; }));
    t.stop();
    CHECK(runs.load() == 2);
}

TEST_CASE("interval thread: stop ends the wait for the interval", "[interval-thread]") {
    std::atomic<int> runs{0};
    IntervalThread t;
    t.start("test-interval", kNever, [&] { runs.fetch_add(1); });
    t.stop();  // would wait an hour if stop did not wake the thread
    CHECK(runs.load() == 0);
    t.wake();  // after stop: nothing runs, nothing breaks
    CHECK(runs.load() == 0);
}

TEST_CASE("interval thread: no run begins after request_stop", "[interval-thread]") {
    std::mutex gate;
    std::unique_lock<std::mutex> held(gate);
    std::atomic<int> started{0};
    IntervalThread t;
    t.start("test-interval", kNever, [&] {
        started.fetch_add(1);
        std::lock_guard<std::mutex> l(gate);
    });
    t.wake();
    REQUIRE(eventually([&] { return started.load() == 1; }));
    t.wake();  // would run again after this run, but for the stop
    t.request_stop();
    held.unlock();
    t.join();
    CHECK(started.load() == 1);
}

TEST_CASE("interval thread: stop without start, and twice", "[interval-thread]") {
    IntervalThread never_started;
    never_started.stop();
    std::atomic<int> runs{0};
    IntervalThread t;
    t.start("test-interval", kNever, [&] { runs.fetch_add(1); });
    t.stop();
    t.stop();
    CHECK(runs.load() == 0);
}
