// PacedWorker: one background thread that repeats a bounded step at the
// throttle's speed. Speed 1 runs flat out, speed s < 1 rests t(1/s - 1)
// after a step that took t, speed below 0.02 pauses. A step that found
// nothing to do sleeps until wake() or the idle poll; a failed step is
// retried after a pause. The dedup pass and the reclaimer both run on it.
// Each step runs at the nice value set_nice() gives (common/thread_priority.h).
// Thread-safety: every public member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "hiodsfs/status.h"

namespace hiodsfs {

class PacedWorker {
public:
    // step does one bounded piece of work; *did_work is false when there
    // was nothing to do. speed() returns the throttle's speed in [0, 1].
    // name: the thread's (common/thread_name.h), a string literal.
    PacedWorker(const char* name, std::function<Status(bool* did_work)> step, std::function<double()> speed,
                std::chrono::milliseconds idle_poll);
    ~PacedWorker();  // stops
    PacedWorker(const PacedWorker&) = delete;
    PacedWorker& operator=(const PacedWorker&) = delete;

    // Before start(): each step runs at the nice value nice() returns then
    // (without it, at the thread's own).
    void set_nice(std::function<int()> nice);
    void start();
    void stop();
    // New work exists: run soon.
    void wake();
    // Steps that did work since construction.
    std::uint64_t steps() const;
    // The last error a step returned (ok if none).
    Status last_error() const;

private:
    void run();

    const char* name_;
    std::function<Status(bool*)> step_;
    std::function<double()> speed_;
    std::function<int()> nice_;
    std::chrono::milliseconds idle_poll_;
    std::thread worker_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool woken_ = false;
    // Waiting for work (not resting between steps): only then does wake()
    // signal. Woken in its rest, the worker would only go back to sleep, and
    // every write request wakes it: a context switch per request for nothing.
    bool idle_ = false;
    std::uint64_t steps_ = 0;
    Status last_error_;
};

}  // namespace hiodsfs
