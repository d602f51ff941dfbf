// ModeController: the load monitors, the policy and the throttle tied
// together; the engine's control loop ticks it every interval.
// Thread-safety: as the class says.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/background_throttle.h"
#include "control/interval_sample.h"
#include "control/load_monitor.h"
#include "control/mode_policy.h"
#include "hiodsfs/clock.h"
#include "hiodsfs/control.h"

namespace hiodsfs {

struct ControlEvent {
    std::uint64_t time_ns = 0;
    enum class Kind : std::uint8_t { kModeSwitch, kThrottle } kind = Kind::kModeSwitch;
    WriteMode mode = WriteMode::kInline;
    double ops_per_s = 0, bytes_per_s = 0, speed = 0;
    std::uint64_t backlog_records = 0, backlog_bytes = 0;
    std::string reason;
};

// Ties it together. Fixed settings (inline-only or deferred-only) never
// switch; hybrid asks the policy every tick.
// Thread-safety: mode(), background_speed(), mode_since_ns() are lock-free
// atomic reads for any thread; monitor() is safe for concurrent writers (see
// LoadMonitor); tick() is called by one controller thread (concurrent calls
// are serialised); events()/samples() copy under a mutex and may be called
// from any thread.
class ModeController {
public:
    enum class Setting { kInline, kDeferred, kHybrid };
    // policy may be null for fixed settings; a hybrid controller given null
    // uses kDefaultPolicy. cfg should have passed validate().
    ModeController(Clock* clock, const ControlConfig& cfg, Setting setting,
                   std::unique_ptr<ModePolicy> policy);
    ModeController(const ModeController&) = delete;
    ModeController& operator=(const ModeController&) = delete;

    LoadMonitor& monitor();
    // Read requests, counted apart so that they never enter the write-rate
    // figures the policy and the goal use; the throttle looks at both.
    LoadMonitor& read_monitor();
    WriteMode mode() const;           // atomic read, called on every write
    double background_speed() const;  // atomic read
    // Why the throttle set that speed at the last tick ("start" before it).
    const char* throttle_regime() const;
    // Called every interval by the engine's controller thread with the
    // backlog figures; takes a sample, runs policy and throttle, records
    // events. Returns the sample. backlog_limit (0: none) bounds the
    // backlog: past it hybrid writes inline (and stays so until the backlog
    // is under 90 % of it), and a pass under a deferred mode runs at full
    // speed, taking capacity from the foreground.
    IntervalSample tick(std::uint64_t backlog_records, std::uint64_t backlog_bytes,
                        std::uint64_t background_bytes, std::uint64_t backlog_limit = 0);
    // The last events (at most kMaxEvents) and samples (at most kMaxSamples),
    // oldest first, for hiodsfs-stat.
    std::vector<ControlEvent> events() const;
    std::vector<IntervalSample> samples() const;
    std::uint64_t mode_since_ns() const;
    // The backlog passed backlog_limit at a tick and is not yet back under
    // 90 % of it (atomic read): the pass may then take the foreground's CPU.
    bool over_limit() const;

    // Additions.
    Setting setting() const;
    const char* policy_name() const;  // "" for fixed settings
    static constexpr std::size_t kMaxEvents = 256;
    static constexpr std::size_t kMaxSamples = 3600;  // an hour at 1 s
    // A throttle event is recorded when the speed moved more than this since
    // the last one, so the event ring shows trends rather than every tick.
    static constexpr double kThrottleEventStep = 0.1;
    // With the spare-capacity throttle, a foreground idle at the last tick
    // that has sent this many requests since is back: the pass pauses until
    // the next tick measures what it leaves (a single stray write does not).
    static constexpr std::uint64_t kReturningRequests = 16;

private:
    void record_event(ControlEvent ev);
    bool foreground_returning() const;

    const ControlConfig cfg_;
    const Setting setting_;
    std::unique_ptr<ModePolicy> policy_;
    LoadMonitor monitor_;
    LoadMonitor read_monitor_;
    BackgroundThrottle throttle_;
    std::atomic<WriteMode> mode_;
    std::atomic<double> speed_;
    std::atomic<const char*> regime_{"start"};
    std::atomic<bool> idle_at_tick_{false};  // the last tick found the foreground idle
    std::atomic<std::uint64_t> mode_since_ns_;
    std::mutex tick_mu_;  // serialises tick(); guards policy_, throttle_, last_event_speed_
    double last_event_speed_ = 1.0;
    // The backlog passed its limit and is not yet under 90 % of it.
    std::atomic<bool> over_limit_{false};
    mutable std::mutex history_mu_;  // guards events_, samples_
    std::deque<ControlEvent> events_;
    std::deque<IntervalSample> samples_;
};
const char* to_string(ModeController::Setting setting);

}  // namespace hiodsfs
