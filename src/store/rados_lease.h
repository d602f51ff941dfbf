// RadosLease: the lease of the store's lock as its holder counts it, and
// when it may still write. The lease runs from when the last good renewal
// was sent at the latest (the OSD starts it on receipt). An operation may
// take up to the timeout before the client gives it up, so one may start
// only while it would still end before the lease does: from `lease -
// timeout` after the last good renewal, the holder writes nothing, whether
// or not its renewer has noticed yet. Renewals go every quarter lease; one
// that failed is tried again a second later, as long as it could still end
// in time.
// Thread-safety: may_start() and held_until() from any thread; renewed()
// and next_renewal() from the renewing thread.
#pragma once

#include <atomic>
#include <chrono>

namespace hiodsfs {

class RadosLease {
public:
    using Clock = std::chrono::steady_clock;
    // A failed renewal is tried again this much later.
    static constexpr std::chrono::seconds kRetry{1};

    RadosLease(std::chrono::seconds lease, std::chrono::seconds timeout)
        : lease_(lease), timeout_(timeout) {}

    std::chrono::seconds lease() const { return lease_; }
    // The lock was taken or renewed by a request sent at `sent`.
    void renewed(Clock::time_point sent) {
        until_.store((sent + lease_).time_since_epoch().count());
    }
    Clock::time_point held_until() const {
        return Clock::time_point(Clock::duration(until_.load()));
    }
    // The last moment an operation may start: it ends (lands or is given
    // up) before the lease does.
    Clock::time_point last_start() const { return held_until() - timeout_; }
    bool may_start(Clock::time_point now) const { return now < last_start(); }
    // When the renewer tries next: a quarter lease after the last good
    // renewal was sent, or, after a failure at `now`, a retry a second
    // later; never past the last start (where, if it is still failing,
    // the holder gives the lease up).
    Clock::time_point next_renewal(Clock::time_point now, bool failed) const;

private:
    std::chrono::seconds lease_, timeout_;
    std::atomic<Clock::duration::rep> until_{0};
};

}  // namespace hiodsfs
