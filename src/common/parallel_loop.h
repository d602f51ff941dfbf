// ParallelLoop: runs body(0 .. n-1) on the calling thread and on helper
// threads that sleep while there is nothing to do. The caller claims
// indices too, so it never waits for work no one has started; helpers
// join whichever loop is oldest. A large write's chunks are fingerprinted
// this way: TBB's workers spin after each parallel call, which on a small
// machine takes CPU the FUSE threads and the segment flusher need.
// Thread-safety: run() may be called from several threads at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hiodsfs {

class ParallelLoop {
public:
    // helpers == 0: run() is a plain loop on the caller.
    explicit ParallelLoop(unsigned helpers);
    ~ParallelLoop();
    ParallelLoop(const ParallelLoop&) = delete;
    ParallelLoop& operator=(const ParallelLoop&) = delete;

    // Calls body(i) once for each i < n, in no particular order or thread,
    // and returns when every call has returned. body must not throw.
    void run(std::size_t n, const std::function<void(std::size_t)>& body);

    // One helper per core beyond the caller's.
    static unsigned default_helpers();

private:
    struct Loop;
    void helper_main();
    static std::size_t work(Loop& loop);

    std::mutex mu_;
    std::condition_variable work_cv_;  // a loop was queued, or stop_
    std::deque<Loop*> queued_;         // loops with indices not yet claimed
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace hiodsfs
