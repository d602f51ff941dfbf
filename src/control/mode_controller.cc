#include <cmath>
#include <cstdio>

#include "control/mode_controller.h"

namespace hiodsfs {

namespace {

WriteMode initial_mode(ModeController::Setting setting) {
    return setting == ModeController::Setting::kDeferred ? WriteMode::kDeferred
                                                         : WriteMode::kInline;
}

}  // namespace

ModeController::ModeController(Clock* clock, const ControlConfig& cfg, Setting setting,
                               std::unique_ptr<ModePolicy> policy)
    : cfg_(cfg),
      setting_(setting),
      policy_(std::move(policy)),
      monitor_(clock, cfg),
      read_monitor_(clock, cfg),
      throttle_(cfg),
      mode_(initial_mode(setting)),
      speed_(1.0),
      mode_since_ns_(clock->now_ns()) {
    if (setting_ == Setting::kHybrid && policy_ == nullptr) {
        policy_ = make_policy(kDefaultPolicy, cfg_, nullptr);
    }
    if (setting_ != Setting::kHybrid) policy_.reset();  // fixed settings never ask
}

LoadMonitor& ModeController::monitor() { return monitor_; }

LoadMonitor& ModeController::read_monitor() { return read_monitor_; }

WriteMode ModeController::mode() const { return mode_.load(std::memory_order_relaxed); }

double ModeController::background_speed() const {
    // The speed for an idle foreground is 1, and the next tick would find a
    // returning one with the pass at full speed for up to an interval: a
    // saturating load that starts then loses what the pass takes meanwhile.
    if (foreground_returning()) return 0.0;
    return speed_.load(std::memory_order_relaxed);
}

bool ModeController::foreground_returning() const {
    return idle_at_tick_.load(std::memory_order_relaxed) &&
           monitor_.arrivals_since_sample() + read_monitor_.arrivals_since_sample() >= kReturningRequests;
}

const char* ModeController::throttle_regime() const {
    return foreground_returning() ? "foreground returning" : regime_.load(std::memory_order_relaxed);
}
std::uint64_t ModeController::mode_since_ns() const {
    return mode_since_ns_.load(std::memory_order_relaxed);
}

bool ModeController::over_limit() const { return over_limit_.load(std::memory_order_relaxed); }

ModeController::Setting ModeController::setting() const { return setting_; }

const char* ModeController::policy_name() const { return policy_ ? policy_->name() : ""; }

IntervalSample ModeController::tick(std::uint64_t backlog_records, std::uint64_t backlog_bytes,
                                    std::uint64_t background_bytes, std::uint64_t backlog_limit) {
    std::lock_guard<std::mutex> lock(tick_mu_);
    IntervalSample s = monitor_.take_sample();
    const IntervalSample reads = read_monitor_.take_sample();
    s.backlog_records = backlog_records;
    s.backlog_bytes = backlog_bytes;
    s.background_bytes = background_bytes;

    const WriteMode current = mode();
    WriteMode next = current;
    std::string reason;
    if (policy_ != nullptr) next = policy_->decide(s, current, &reason);
    if (backlog_limit == 0 || backlog_bytes <= backlog_limit / 10 * 9) over_limit_ = false;
    if (backlog_limit != 0 && backlog_bytes > backlog_limit) over_limit_ = true;
    if (over_limit_ && setting_ == Setting::kHybrid && next == WriteMode::kDeferred) {
        // The backlog is bounded: inline adds nothing to it, and the pass
        // drains it beside.
        next = WriteMode::kInline;
        if (current == WriteMode::kDeferred) {
            char text[160];
            std::snprintf(text, sizeof text, "backlog %.1f MiB over its limit of %.1f MiB: writing inline",
                          static_cast<double>(backlog_bytes) / 1048576.0,
                          static_cast<double>(backlog_limit) / 1048576.0);
            reason = text;
        }
    }
    if (next != current) {
        mode_.store(next, std::memory_order_relaxed);
        mode_since_ns_.store(s.end_ns, std::memory_order_relaxed);
        ControlEvent ev;
        ev.time_ns = s.end_ns;
        ev.kind = ControlEvent::Kind::kModeSwitch;
        ev.mode = next;
        ev.reason = std::string(policy_->name()) + ": " +
                    (reason.empty() ? std::string("switched to ") + to_string(next) : reason);
        ev.ops_per_s = s.ops_per_s();
        ev.bytes_per_s = s.bytes_per_s();
        ev.speed = speed_.load(std::memory_order_relaxed);
        ev.backlog_records = backlog_records;
        ev.backlog_bytes = backlog_bytes;
        record_event(std::move(ev));
    }

    const double before = last_event_speed_;
    const double speed = throttle_.update(s, next, s.seconds(), &reads, over_limit_);
    speed_.store(speed, std::memory_order_relaxed);
    regime_.store(throttle_.regime(), std::memory_order_relaxed);
    idle_at_tick_.store(cfg_.spare_capacity && throttle_.found_idle(), std::memory_order_relaxed);
    if (std::fabs(speed - before) > kThrottleEventStep) {
        char text[128];
        std::snprintf(text, sizeof text, "%s: background speed %.2f -> %.2f", throttle_.regime(),
                      before, speed);
        ControlEvent ev;
        ev.time_ns = s.end_ns;
        ev.kind = ControlEvent::Kind::kThrottle;
        ev.mode = next;
        ev.reason = text;
        ev.ops_per_s = s.ops_per_s();
        ev.bytes_per_s = s.bytes_per_s();
        ev.speed = speed;
        ev.backlog_records = backlog_records;
        ev.backlog_bytes = backlog_bytes;
        record_event(std::move(ev));
        last_event_speed_ = speed;
    }

    {
        std::lock_guard<std::mutex> history(history_mu_);
        samples_.push_back(s);
        while (samples_.size() > kMaxSamples) samples_.pop_front();
    }
    return s;
}

void ModeController::record_event(ControlEvent ev) {
    std::lock_guard<std::mutex> history(history_mu_);
    events_.push_back(std::move(ev));
    while (events_.size() > kMaxEvents) events_.pop_front();
}

std::vector<ControlEvent> ModeController::events() const {
    std::lock_guard<std::mutex> history(history_mu_);
    return {events_.begin(), events_.end()};
}

std::vector<IntervalSample> ModeController::samples() const {
    std::lock_guard<std::mutex> history(history_mu_);
    return {samples_.begin(), samples_.end()};
}

const char* to_string(ModeController::Setting setting) {
    switch (setting) {
        case ModeController::Setting::kInline:
            return "inline";
        case ModeController::Setting::kDeferred:
            return "deferred";
        case ModeController::Setting::kHybrid:
            return "hybrid";
    }
    return "hybrid";
}

}  // namespace hiodsfs
