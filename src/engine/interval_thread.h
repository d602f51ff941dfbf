// IntervalThread: a thread that runs its body every interval, or at once
// when woken, until stopped. The engine's committer (woken when the open
// group is full) and its control loop are two of them.
//
// Thread-safe: wake and stop from any thread. The body runs on the thread
// alone and never under the class's lock, so a waker that holds a lock the
// body takes (the committer's waker holds the metadata lock) cannot
// deadlock with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace hiodsfs {

class IntervalThread {
public:
    IntervalThread() = default;
    IntervalThread(const IntervalThread&) = delete;
    IntervalThread& operator=(const IntervalThread&) = delete;
    ~IntervalThread() { stop(); }

    // Starts the thread, named `name` (common/thread_name.h); the body
    // first runs an interval after this, or when woken.
    void start(const char* name, std::chrono::milliseconds interval, std::function<void()> body);
    // The body runs at once, or once the run under way returns; several
    // wakes meanwhile make one run.
    void wake();
    // No run begins after this; join waits for the one under way.
    void request_stop();
    void join();
    void stop() {
        request_stop();
        join();
    }

private:
    void loop(std::chrono::milliseconds interval, const std::function<void()>& body);

    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;   // under mu_
    bool woken_ = false;  // under mu_
    std::thread thread_;
};

}  // namespace hiodsfs
