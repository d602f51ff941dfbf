// PacedWorker: wake() starts an idle worker at once, never lost however it
// races the worker going idle; a worker resting between steps at a low
// speed keeps its pace however often it is woken.
#include <pthread.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "dedup/paced_worker.h"

using namespace hiodsfs;
using namespace std::chrono_literals;

namespace {

// Waits up to `limit` for pred.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(100us);
    }
    return true;
}

}  // namespace

TEST_CASE("a woken idle worker steps at once, and no wake is lost", "[dedup][paced]") {
    std::atomic<int> calls{0};
    // Nothing to do, ever: only wake() (the idle poll is an hour) brings it back.
    PacedWorker w("test-worker", [&](bool* did_work) {
        *did_work = false;
        calls.fetch_add(1);
        return Status::ok();
    }, [] { return 1.0; }, std::chrono::hours(1));
    w.start();
    REQUIRE(eventually([&] { return calls.load() >= 1; }, 5s));
    for (int i = 0; i < 300; ++i) {
        const int before = calls.load();
        w.wake();
        INFO("wake " << i);
        REQUIRE(eventually([&] { return calls.load() > before; }, 5s));
    }
    w.stop();
}

TEST_CASE("wakes do not cut a resting worker's rest short", "[dedup][paced]") {
    std::atomic<int> calls{0};
    // Each step takes 10 ms at speed 0.1: 90 ms of rest after it.
    PacedWorker w("test-worker", [&](bool* did_work) {
        std::this_thread::sleep_for(10ms);
        *did_work = true;
        calls.fetch_add(1);
        return Status::ok();
    }, [] { return 0.1; }, std::chrono::hours(1));
    w.start();
    const auto began = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - began < 500ms) {
        w.wake();
        std::this_thread::sleep_for(50us);
    }
    w.stop();
    // At most 6 steps of 100 ms fit in 500 ms; a worker woken out of its
    // rest would have stepped every few ms.
    CHECK(calls.load() >= 1);
    CHECK(calls.load() <= 7);
}

TEST_CASE("a worker's thread carries the name it was given", "[dedup][paced]") {
    std::atomic<bool> stepped{false};
    std::string seen;
    PacedWorker w("a-name-longer-than-fifteen", [&](bool* did_work) {
        if (!stepped.load()) {
            char name[16] = {};
            (void)::pthread_getname_np(::pthread_self(), name, sizeof name);
            seen = name;
            stepped.store(true);
        }
        *did_work = false;
        return Status::ok();
    }, [] { return 1.0; }, std::chrono::hours(1));
    w.start();
    REQUIRE(eventually([&] { return stepped.load(); }, 5s));
    w.stop();
    // Linux keeps 15 bytes of a thread's name: the rest is cut, not refused.
    CHECK(seen == "a-name-longer-t");
}
