#include "common/parallel_loop.h"

#include <algorithm>
#include <memory>

#include "common/thread_name.h"
#include "common/thread_priority.h"

namespace hiodsfs {

namespace {
// Set in Loop::published once no index beyond the count comes.
constexpr std::size_t kClosed = std::size_t{1} << (sizeof(std::size_t) * 8 - 1);
}  // namespace

struct ParallelLoop::Loop {
    const std::function<void(std::size_t)>* body = nullptr;
    // The owner's nice value: helpers work at it, so that background work
    // stays background on whichever thread runs it.
    int nice = thread_nice();
    // Indices below the count may be claimed; kClosed when it is final. A
    // helper that caught up sleeps on it until it changes.
    std::atomic<std::size_t> published{0};
    std::atomic<std::size_t> next{0};
    // Under mu_: calls finished, and helpers still working on this loop
    // (the caller's frame holds it, so it must outlive their last access).
    std::size_t done = 0;
    unsigned helpers = 0;
    std::condition_variable finished;
};

ParallelLoop::ParallelLoop(unsigned helpers) {
    threads_.reserve(helpers);
    for (unsigned i = 0; i < helpers; ++i)
        threads_.emplace_back([this] {
            name_this_thread("digest");
            helper_main();
        });
}

ParallelLoop::~ParallelLoop() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
}

unsigned ParallelLoop::default_helpers() {
    const unsigned cores = std::thread::hardware_concurrency();
    return cores > 1 ? cores - 1 : 0;
}

// Claims and runs published indices until the loop is closed and claimed
// out, sleeping while its owner has published nothing new.
std::size_t ParallelLoop::work(Loop& loop) {
    std::size_t calls = 0;
    for (;;) {
        const std::size_t p = loop.published.load(std::memory_order_acquire);
        std::size_t i = loop.next.load(std::memory_order_relaxed);
        if (i < (p & ~kClosed)) {
            if (!loop.next.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) continue;
            (*loop.body)(i);
            ++calls;
            continue;
        }
        if (p & kClosed) return calls;
        loop.published.wait(p, std::memory_order_acquire);
    }
}

// A loop goes behind those of its priority and ahead of nicer ones: a
// helper busy with background work takes up a write's next.
void ParallelLoop::enqueue(Loop& loop) {
    {
        std::lock_guard<std::mutex> l(mu_);
        auto at = std::find_if(queued_.begin(), queued_.end(), [&](const Loop* q) { return q->nice > loop.nice; });
        queued_.insert(at, &loop);
    }
    work_cv_.notify_all();
}

// Closes the loop, runs what no one claimed, and waits for the helpers.
void ParallelLoop::finish(Loop& loop) {
    loop.published.fetch_or(kClosed, std::memory_order_acq_rel);
    loop.published.notify_all();
    const std::size_t mine = work(loop);
    const std::size_t n = loop.published.load(std::memory_order_relaxed) & ~kClosed;
    std::unique_lock<std::mutex> l(mu_);
    // Every index is claimed now: no helper may pick the loop up again.
    if (auto it = std::find(queued_.begin(), queued_.end(), &loop); it != queued_.end()) queued_.erase(it);
    loop.done += mine;
    loop.finished.wait(l, [&] { return loop.done == n && loop.helpers == 0; });
}

void ParallelLoop::run(std::size_t n, const std::function<void(std::size_t)>& body) {
    if (threads_.empty() || n < 2) {
        for (std::size_t i = 0; i < n; ++i) body(i);
        return;
    }
    Loop loop;
    loop.body = &body;
    loop.published.store(n | kClosed, std::memory_order_relaxed);
    enqueue(loop);
    finish(loop);
}

void ParallelLoop::helper_main() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        work_cv_.wait(l, [&] { return stop_ || !queued_.empty(); });
        if (stop_) return;
        Loop& loop = *queued_.front();
        ++loop.helpers;
        l.unlock();
        set_thread_nice(loop.nice);
        const std::size_t calls = work(loop);
        l.lock();
        // Claimed out: the next helper to wake goes to the loop after it
        // (which may have been queued ahead of it meanwhile).
        if (auto it = std::find(queued_.begin(), queued_.end(), &loop); it != queued_.end()) queued_.erase(it);
        loop.done += calls;
        --loop.helpers;
        // Notified under the lock: the caller cannot return, and take the
        // loop with it, before this helper is done with it. (done reaches
        // the final count only once the loop is closed and claimed out.)
        if (loop.helpers == 0) loop.finished.notify_one();
    }
}

ParallelLoop::Open::Open(ParallelLoop& pool, std::function<void(std::size_t)> body)
    : pool_(pool), body_(std::move(body)) {
    if (!pool_.has_helpers()) return;
    loop_ = std::make_unique<Loop>();
    loop_->body = &body_;
    pool_.enqueue(*loop_);
}

ParallelLoop::Open::~Open() { finish(); }

void ParallelLoop::Open::publish(std::size_t n) {
    if (n <= published_) return;
    published_ = n;
    if (!loop_) return;
    loop_->published.store(n, std::memory_order_release);
    loop_->published.notify_all();
}

void ParallelLoop::Open::finish() {
    if (finished_) return;
    finished_ = true;
    if (loop_) {
        pool_.finish(*loop_);
    } else {
        for (std::size_t i = 0; i < published_; ++i) body_(i);
    }
}

}  // namespace hiodsfs
