// ParallelLoop: runs body(0 .. n-1) on the calling thread and on helper
// threads that sleep while there is nothing to do. The caller claims
// indices too, so it never waits for work no one has started; helpers
// join whichever loop is oldest. A large write's chunks are fingerprinted
// this way: TBB's workers spin after each parallel call, which on a small
// machine takes CPU the FUSE threads and the segment flusher need.
//
// An Open loop's indices arrive while it runs: a chunker publishes each
// chunk it cuts, and a helper hashes it while the caller goes on cutting.
// Thread-safety: run() and Open may be used from several threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hiodsfs {

class ParallelLoop {
    struct Loop;

public:
    // helpers == 0: run() is a plain loop on the caller.
    explicit ParallelLoop(unsigned helpers);
    ~ParallelLoop();
    ParallelLoop(const ParallelLoop&) = delete;
    ParallelLoop& operator=(const ParallelLoop&) = delete;

    // Calls body(i) once for each i < n, in no particular order or thread,
    // and returns when every call has returned. body must not throw.
    void run(std::size_t n, const std::function<void(std::size_t)>& body);

    // A loop over indices published one after another by its owner, who
    // calls finish() before reading what the calls produced. Helpers run
    // published indices meanwhile; finish() runs the rest on the caller and
    // returns once every published index's call has returned. The owner
    // must not start another loop on this pool before finish().
    class Open {
    public:
        Open(ParallelLoop& pool, std::function<void(std::size_t)> body);
        ~Open();  // finish()es if the owner did not
        Open(const Open&) = delete;
        Open& operator=(const Open&) = delete;
        void publish(std::size_t n);  // indices below n may run now (n only grows)
        void finish();

    private:
        ParallelLoop& pool_;
        std::function<void(std::size_t)> body_;
        std::unique_ptr<Loop> loop_;  // null without helpers: finish() runs all
        std::size_t published_ = 0;
        bool finished_ = false;
    };

    bool has_helpers() const { return !threads_.empty(); }

    // One helper per core beyond the caller's.
    static unsigned default_helpers();

private:
    void helper_main();
    void enqueue(Loop& loop);
    void finish(Loop& loop);
    static std::size_t work(Loop& loop);

    std::mutex mu_;
    std::condition_variable work_cv_;  // a loop was queued, or stop_
    std::deque<Loop*> queued_;         // loops with indices not yet claimed
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace hiodsfs
