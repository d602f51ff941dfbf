#include "fuse/reader_gate.h"

#include <poll.h>

#include <algorithm>
#include <ctime>
#include <utility>

namespace hiodsfs::fuse {
namespace {

// How seldom a deputy looks while no request comes.
constexpr std::chrono::microseconds kIdleLook = std::chrono::seconds(1);

void unlock_mutex(void* mu) { pthread_mutex_unlock(static_cast<pthread_mutex_t*>(mu)); }

timespec monotonic_after(std::chrono::microseconds d) {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    const long long ns = t.tv_nsec + static_cast<long long>(d.count()) * 1000;
    t.tv_sec += static_cast<time_t>(ns / 1000000000);
    t.tv_nsec = static_cast<long>(ns % 1000000000);
    return t;
}

}  // namespace

ReaderGate::ReaderGate(std::chrono::microseconds poll, std::chrono::microseconds watch,
                       PollBudget::StallSource pressure)
    : poll_(poll), watch_(watch), deputy_wait_(watch), budget_(std::move(pressure)) {
    pthread_mutex_init(&mu_, nullptr);
    // The pthread calls, not std::condition_variable: libfuse ends its
    // workers with pthread_cancel, and a cancelled std::condition_variable
    // wait terminates the process.
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cv_, &attr);
    pthread_cond_init(&deputy_cv_, &attr);
    pthread_condattr_destroy(&attr);
}

ReaderGate::~ReaderGate() {
    pthread_cond_destroy(&deputy_cv_);
    pthread_cond_destroy(&cv_);
    pthread_mutex_destroy(&mu_);
}

bool ReaderGate::ready(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

void ReaderGate::enter(int fd) {
    pthread_mutex_lock(&mu_);
    pthread_cleanup_push(unlock_mutex, &mu_);
    bool deputy = false;
    ++waiting_;
    while (reading_ && !open_) {
        if (!deputy_) deputy_ = deputy = true;
        if (!deputy) {
            pthread_cond_wait(&cv_, &mu_);
            continue;
        }
        const std::uint64_t seen = reads_;
        const timespec until = monotonic_after(deputy_wait_);
        pthread_cond_timedwait(&deputy_cv_, &mu_, &until);
        looks_.fetch_add(1, std::memory_order_relaxed);
        if (!reading_) {
            takeovers_.fetch_add(1, std::memory_order_relaxed);
            deputy_wait_ = watch_;
        } else {
            // No request since the last look: the reader waits in read, idle.
            deputy_wait_ = reads_ != seen ? watch_ : std::min<std::chrono::microseconds>(2 * deputy_wait_, kIdleLook);
        }
    }
    --waiting_;
    if (deputy) {
        // Another waiting thread looks from now on.
        deputy_ = false;
        pthread_cond_signal(&cv_);
    }
    reading_ = true;
    if (poll_.count() > 0) budget_.update(PollBudget::Clock::now());
    pthread_cleanup_pop(1);
    if (poll_.count() <= 0 || !budget_.may_poll()) return;
    polls_.fetch_add(1, std::memory_order_relaxed);
    const auto until = std::chrono::steady_clock::now() + poll_;
    while (!ready(fd) && std::chrono::steady_clock::now() < until) {
    }
}

void ReaderGate::leave(bool more) {
    pthread_mutex_lock(&mu_);
    reading_ = false;
    ++reads_;
    const bool others = waiting_ > (deputy_ ? 1 : 0);
    if (more && others) pthread_cond_signal(&cv_);
    // The deputy reads the waiting requests if no one else waits, and
    // looks at once after idleness, when it may sleep for a second.
    if ((more && !others) || deputy_wait_ > watch_) pthread_cond_signal(&deputy_cv_);
    pthread_mutex_unlock(&mu_);
}

int ReaderGate::waiting() const {
    pthread_mutex_lock(&mu_);
    const int n = waiting_;
    pthread_mutex_unlock(&mu_);
    return n;
}

void ReaderGate::open() {
    pthread_mutex_lock(&mu_);
    open_ = true;
    pthread_cond_broadcast(&cv_);
    pthread_cond_broadcast(&deputy_cv_);
    pthread_mutex_unlock(&mu_);
}

}  // namespace hiodsfs::fuse
