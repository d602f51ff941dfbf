#include "common/parallel_loop.h"

#include <algorithm>
#include <atomic>

namespace hiodsfs {

struct ParallelLoop::Loop {
    std::size_t n = 0;
    const std::function<void(std::size_t)>* body = nullptr;
    std::atomic<std::size_t> next{0};
    // Under mu_: calls finished, and helpers still working on this loop
    // (the caller's frame holds it, so it must outlive their last access).
    std::size_t done = 0;
    unsigned helpers = 0;
    std::condition_variable finished;
};

ParallelLoop::ParallelLoop(unsigned helpers) {
    threads_.reserve(helpers);
    for (unsigned i = 0; i < helpers; ++i) threads_.emplace_back([this] { helper_main(); });
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

std::size_t ParallelLoop::work(Loop& loop) {
    std::size_t calls = 0;
    for (std::size_t i; (i = loop.next.fetch_add(1, std::memory_order_relaxed)) < loop.n; ++calls) (*loop.body)(i);
    return calls;
}

void ParallelLoop::run(std::size_t n, const std::function<void(std::size_t)>& body) {
    if (threads_.empty() || n < 2) {
        for (std::size_t i = 0; i < n; ++i) body(i);
        return;
    }
    Loop loop;
    loop.n = n;
    loop.body = &body;
    {
        std::lock_guard<std::mutex> l(mu_);
        queued_.push_back(&loop);
    }
    work_cv_.notify_all();
    const std::size_t mine = work(loop);
    std::unique_lock<std::mutex> l(mu_);
    // Every index is claimed now: no helper may pick the loop up again.
    if (auto it = std::find(queued_.begin(), queued_.end(), &loop); it != queued_.end()) queued_.erase(it);
    loop.done += mine;
    loop.finished.wait(l, [&] { return loop.done == loop.n && loop.helpers == 0; });
}

void ParallelLoop::helper_main() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        work_cv_.wait(l, [&] { return stop_ || !queued_.empty(); });
        if (stop_) return;
        Loop& loop = *queued_.front();
        ++loop.helpers;
        l.unlock();
        const std::size_t calls = work(loop);
        l.lock();
        // Claimed out: the next helper to wake goes to the loop after it.
        if (!queued_.empty() && queued_.front() == &loop) queued_.pop_front();
        loop.done += calls;
        --loop.helpers;
        // Notified under the lock: the caller cannot return, and take the
        // loop with it, before this helper is done with it.
        if (loop.done == loop.n && loop.helpers == 0) loop.finished.notify_one();
    }
}

}  // namespace hiodsfs
