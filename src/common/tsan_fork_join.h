// ForkJoin: tells ThreadSanitizer about the ordering a TBB parallel call
// gives. TBB hands tasks to its worker threads inside libtbb, which is not
// instrumented, so TSan sees neither that what the calling thread wrote
// before the call happens before the tasks run, nor that the tasks' writes
// happen before the call returns, and reports both as races. Outside a TSan
// build it adds nothing but the call through wrap().
//
//   ForkJoin fj;
//   fj.fork();
//   tbb::parallel_for(first, last, fj.wrap(body));
//   fj.join();
//
// The wrapper reads its own captures before it can acquire: tests/tsan.supp
// suppresses races whose access is in this file, and only those.
// Thread-safety: fork(), wrap() and join() on the calling thread; the
// wrapped body on any.
#pragma once

#include <utility>

#if defined(__SANITIZE_THREAD__)
#define HIODSFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HIODSFS_TSAN 1
#endif
#endif

#ifdef HIODSFS_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace hiodsfs {

class ForkJoin {
public:
    // Before the parallel call: what this thread wrote so far is visible to
    // every task.
    void fork() { release(&fork_); }
    // After it: what every task wrote is visible to this thread.
    void join() { acquire(&join_); }

    // The task body for the parallel call; body must outlive it.
    template <class Body>
    auto wrap(const Body& body) {
        // One parameter: TBB tells bodies that take a feeder by their arity.
        return [this, &body](auto&& arg) {
            acquire(&fork_);
            body(std::forward<decltype(arg)>(arg));
            release(&join_);
        };
    }

private:
#ifdef HIODSFS_TSAN
    static void release(char* a) { __tsan_release(a); }
    static void acquire(char* a) { __tsan_acquire(a); }
#else
    static void release(char*) {}
    static void acquire(char*) {}
#endif
    char fork_ = 0, join_ = 0;  // only their addresses are used
};

}  // namespace hiodsfs
