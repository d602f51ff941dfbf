// IntervalThread (interval_thread.h): the engine's periodic threads.
#include "engine/interval_thread.h"

#include "common/thread_name.h"

namespace hiodsfs {

void IntervalThread::start(const char* name, std::chrono::milliseconds interval,
                           std::function<void()> body) {
    thread_ = std::thread([this, name, interval, body = std::move(body)] {
        name_this_thread(name);
        loop(interval, body);
    });
}

void IntervalThread::wake() {
    {
        std::lock_guard<std::mutex> l(mu_);
        woken_ = true;
    }
    cv_.notify_all();
}

void IntervalThread::request_stop() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
}

void IntervalThread::join() {
    if (thread_.joinable()) thread_.join();
}

void IntervalThread::loop(std::chrono::milliseconds interval, const std::function<void()>& body) {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
        cv_.wait_for(l, interval, [this] { return stop_ || woken_; });
        if (stop_) break;
        woken_ = false;
        l.unlock();
        body();
        l.lock();
    }
}

}  // namespace hiodsfs
