// ParallelLoop: every index once, from several callers at once, a caller
// never waits for work that no thread has started, and helpers work at the
// owner's priority.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/parallel_loop.h"
#include "common/thread_priority.h"

using namespace hiodsfs;

TEST_CASE("a parallel loop calls its body once for every index", "[parallel-loop]") {
    for (unsigned helpers : {0u, 1u, 3u}) {
        ParallelLoop pool(helpers);
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{1000}}) {
            std::vector<std::atomic<int>> calls(n);
            pool.run(n, [&](std::size_t i) { calls[i].fetch_add(1); });
            for (std::size_t i = 0; i < n; ++i) {
                INFO("helpers " << helpers << ", n " << n << ", index " << i);
                REQUIRE(calls[i].load() == 1);
            }
        }
    }
}

TEST_CASE("parallel loops from several threads at once each see all their indices", "[parallel-loop]") {
    ParallelLoop pool(1);
    std::vector<std::thread> callers;
    std::atomic<int> wrong{0};
    for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&, c] {
            for (int round = 0; round < 200; ++round) {
                const std::size_t n = 2 + static_cast<std::size_t>((c * 31 + round) % 64);
                std::vector<std::atomic<int>> calls(n);
                pool.run(n, [&](std::size_t i) { calls[i].fetch_add(1); });
                for (auto& k : calls)
                    if (k.load() != 1) wrong.fetch_add(1);
            }
        });
    }
    for (auto& t : callers) t.join();
    CHECK(wrong.load() == 0);
}

TEST_CASE("a caller finishes its loop itself while every helper is busy elsewhere", "[parallel-loop]") {
    ParallelLoop pool(1);
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> blocked{0};
    // Both of this loop's calls block: one on its caller, one on the helper.
    std::thread stuck([&] {
        pool.run(2, [&](std::size_t) {
            blocked.fetch_add(1);
            released.wait();
        });
    });
    while (blocked.load() < 2) std::this_thread::yield();
    std::atomic<int> calls{0};
    auto other = std::async(std::launch::async, [&] { pool.run(100, [&](std::size_t) { calls.fetch_add(1); }); });
    const bool finished = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    release.set_value();
    stuck.join();
    other.wait();
    CHECK(finished);
    CHECK(calls.load() == 100);
}

TEST_CASE("an open loop runs every index its owner publishes, once, while more are published",
          "[parallel-loop]") {
    for (unsigned helpers : {0u, 1u, 3u}) {
        ParallelLoop pool(helpers);
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{500}}) {
            INFO("helpers " << helpers << ", n " << n);
            std::vector<std::atomic<int>> calls(n);
            std::vector<int> seen(n, 0);  // what each call saw of its slot
            std::vector<int> slots(n, 0);
            std::atomic<int> while_open{0};
            bool finished = false;
            {
                ParallelLoop::Open loop(pool, [&](std::size_t i) {
                    seen[i] = slots[i];  // written before i was published
                    calls[i].fetch_add(1);
                    if (!finished) while_open.fetch_add(1);
                });
                for (std::size_t i = 0; i < n; ++i) {
                    slots[i] = static_cast<int>(i) + 1;
                    loop.publish(i + 1);
                }
                // With helpers, published indices run before finish().
                const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (helpers > 0 && n > 0 && while_open.load() == 0 && std::chrono::steady_clock::now() < give_up)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                loop.finish();
                finished = true;
                loop.finish();  // a second finish does nothing
            }
            for (std::size_t i = 0; i < n; ++i) {
                INFO("index " << i);
                REQUIRE(calls[i].load() == 1);
                REQUIRE(seen[i] == static_cast<int>(i) + 1);
            }
            if (helpers > 0 && n > 0) CHECK(while_open.load() > 0);
        }
    }
}

TEST_CASE("open loops and plain loops share the helpers without waiting on each other",
          "[parallel-loop]") {
    ParallelLoop pool(1);
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&, c] {
            for (int round = 0; round < 100; ++round) {
                const std::size_t n = 1 + static_cast<std::size_t>((c * 17 + round) % 40);
                std::vector<std::atomic<int>> calls(n);
                if ((c + round) % 2 == 0) {
                    pool.run(n, [&](std::size_t i) { calls[i].fetch_add(1); });
                } else {
                    ParallelLoop::Open loop(pool, [&](std::size_t i) { calls[i].fetch_add(1); });
                    for (std::size_t i = 0; i < n; ++i) loop.publish(i + 1);
                    // Destroyed without finish(): the destructor finishes it.
                }
                for (auto& k : calls)
                    if (k.load() != 1) wrong.fetch_add(1);
            }
        });
    }
    for (auto& t : callers) t.join();
    CHECK(wrong.load() == 0);
}

TEST_CASE("a helper waiting in an open loop that publishes nothing lets its owner finish",
          "[parallel-loop]") {
    ParallelLoop pool(2);
    std::atomic<int> calls{0};
    {
        ParallelLoop::Open loop(pool, [&](std::size_t) { calls.fetch_add(1); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the helpers join and sleep
        auto done = std::async(std::launch::async, [&] { loop.finish(); });
        REQUIRE(done.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    }
    CHECK(calls.load() == 0);
    // The pool still works afterwards.
    pool.run(10, [&](std::size_t) { calls.fetch_add(1); });
    CHECK(calls.load() == 10);
}

// Each index waits until both threads have one, so the helper surely runs
// some; each notes the nice value the kernel gives the thread running it.
TEST_CASE("a helper works at the nice value of the loop's owner", "[parallel-loop]") {
    ParallelLoop pool(1);
    auto nice_seen = [&](int owner_nice) {
        std::mutex mu;
        std::condition_variable both;
        std::set<std::thread::id> threads;
        std::set<int> nice;
        std::thread owner([&] {
            set_thread_nice(owner_nice);
            pool.run(2, [&](std::size_t) {
                std::unique_lock<std::mutex> l(mu);
                threads.insert(std::this_thread::get_id());
                errno = 0;
                nice.insert(::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid))));
                both.notify_all();
                both.wait(l, [&] { return threads.size() == 2; });
            });
        });
        owner.join();
        return nice;
    };
    CHECK(nice_seen(19) == std::set<int>{19});
    if (::geteuid() == 0) CHECK(nice_seen(0) == std::set<int>{0});  // the helper back at 0
}
