#include "dedup/paced_worker.h"

#include <algorithm>

#include "common/thread_name.h"
#include "common/thread_priority.h"

namespace hiodsfs {
namespace {
constexpr auto kPausedPoll = std::chrono::milliseconds(200);
constexpr auto kErrorBackoff = std::chrono::milliseconds(1000);
constexpr auto kMaxRest = std::chrono::milliseconds(2000);
constexpr double kMinSpeed = 0.02;  // below this the worker counts as paused
}  // namespace

PacedWorker::PacedWorker(const char* name, std::function<Status(bool*)> step, std::function<double()> speed,
                         std::chrono::milliseconds idle_poll)
    : name_(name), step_(std::move(step)), speed_(std::move(speed)), idle_poll_(idle_poll) {}

PacedWorker::~PacedWorker() { stop(); }

void PacedWorker::set_nice(std::function<int()> nice) {
    std::lock_guard<std::mutex> l(mu_);
    nice_ = std::move(nice);
}

void PacedWorker::start() {
    std::lock_guard<std::mutex> l(mu_);
    if (worker_.joinable()) return;
    stop_ = false;
    worker_ = std::thread([this] {
        name_this_thread(name_);
        run();
    });
}

void PacedWorker::stop() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

void PacedWorker::wake() {
    bool idle = false;
    {
        std::lock_guard<std::mutex> l(mu_);
        woken_ = true;
        idle = idle_;
    }
    if (idle) cv_.notify_all();
}

std::uint64_t PacedWorker::steps() const {
    std::lock_guard<std::mutex> l(mu_);
    return steps_;
}

Status PacedWorker::last_error() const {
    std::lock_guard<std::mutex> l(mu_);
    return last_error_;
}

void PacedWorker::run() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
        const double speed = speed_();
        if (speed < kMinSpeed) {
            cv_.wait_for(l, kPausedPoll, [this] { return stop_; });
            continue;
        }
        woken_ = false;
        l.unlock();
        if (nice_) set_thread_nice(nice_());
        bool did_work = false;
        const auto began = std::chrono::steady_clock::now();
        Status st = step_(&did_work);
        const auto took = std::chrono::steady_clock::now() - began;
        l.lock();
        if (!st) {
            last_error_ = st;
            cv_.wait_for(l, kErrorBackoff, [this] { return stop_; });
            continue;
        }
        if (!did_work) {
            idle_ = true;
            cv_.wait_for(l, idle_poll_, [this] { return stop_ || woken_; });
            idle_ = false;
            continue;
        }
        ++steps_;
        if (speed < 1.0) {
            // A step that took t runs at speed s if followed by t(1/s - 1) of rest.
            auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(took * (1.0 / speed - 1.0));
            cv_.wait_for(l, std::min<std::chrono::milliseconds>(rest, kMaxRest), [this] { return stop_; });
        }
    }
}

}  // namespace hiodsfs
