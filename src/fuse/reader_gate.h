// ReaderGate: which request thread reads /dev/fuse next (request_poll=).
//
// A copier such as rsync or tar sends one request at a time and waits for
// each reply, so every request finds the request threads asleep in read(2)
// and costs a wake-up, which on a virtual machine is most of a request's
// time. With the gate one thread at a time is the reader: it polls for the
// next request for a moment before it sleeps, and the others wait in the
// gate, where the kernel does not wake them for each request. A serial
// stream is then read by the thread that answered the request before it,
// without a wake-up. Parallel requests still get threads: a reader that
// finds more requests waiting after its own wakes another thread, and a
// waiting thread (the deputy) looks every `watch` and reads in place of a
// reader busy with a long request, so a request that waits for another
// (a kernel call back into the file system) is never stuck behind it.
// While no request comes the deputy looks less and less often (up to once
// a second), and the first request after that wakes it. The reader polls
// only while the machine's CPU pressure says a core is to spare
// (PollBudget): a copier that needs every core keeps them.
// Thread-safety: every method may be called from any thread; a thread
// cancelled inside enter() leaves the gate usable (libfuse cancels its
// workers at exit).
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "fuse/poll_budget.h"

namespace hiodsfs::fuse {

class ReaderGate {
public:
    // pressure: where PollBudget reads the CPU stall time (tests pass
    // their own).
    ReaderGate(std::chrono::microseconds poll, std::chrono::microseconds watch,
               PollBudget::StallSource pressure = PollBudget::cpu_pressure());
    ~ReaderGate();
    ReaderGate(const ReaderGate&) = delete;
    ReaderGate& operator=(const ReaderGate&) = delete;

    // Before a read of fd: returns once this thread is the reader, after
    // polling fd for up to the poll time (at once when a request is there).
    void enter(int fd);
    // After the read: this thread is no longer the reader; more: requests
    // are waiting beyond the one it read, so another thread is woken.
    void leave(bool more);
    // From now on every thread reads without waiting (the session ends).
    void open();

    // Whether a request is waiting on fd now.
    static bool ready(int fd);
    // Threads waiting at the gate now.
    int waiting() const;
    // Times a deputy read in place of a reader busy with its request.
    std::uint64_t takeovers() const { return takeovers_.load(std::memory_order_relaxed); }
    // Times a deputy woke to look.
    std::uint64_t looks() const { return looks_.load(std::memory_order_relaxed); }
    // Times polling stopped for CPU pressure (PollBudget), and times a
    // reader polled.
    std::uint64_t poll_pauses() const { return budget_.pauses(); }
    std::uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }

private:
    const std::chrono::microseconds poll_;
    const std::chrono::microseconds watch_;
    mutable pthread_mutex_t mu_;
    pthread_cond_t cv_;         // threads waiting to read
    pthread_cond_t deputy_cv_;  // the deputy
    bool reading_ = false;  // a thread is the reader (polling or in read)
    bool deputy_ = false;   // a waiting thread looks every watch_
    bool open_ = false;
    int waiting_ = 0;
    std::uint64_t reads_ = 0;              // requests read so far
    std::chrono::microseconds deputy_wait_;  // watch_, longer while idle
    PollBudget budget_;  // updated under mu_
    std::atomic<std::uint64_t> takeovers_{0};
    std::atomic<std::uint64_t> looks_{0};
    std::atomic<std::uint64_t> polls_{0};
};

}  // namespace hiodsfs::fuse
