#include <algorithm>

#include "control/background_throttle.h"

namespace hiodsfs {

namespace {

double clamp01(double v) { return std::clamp(v, 0.0, 1.0); }

// Normalised error of the goal that is missed the most: (rate - goal) / goal,
// clamped to [-1, 1] so one wild interval cannot slam the integral.
double goal_error(const IntervalSample& s, const ControlConfig& cfg) {
    double e = 1.0;
    if (cfg.target_ops > 0) e = std::min(e, (s.ops_per_s() - cfg.target_ops) / cfg.target_ops);
    if (cfg.target_bytes_per_s > 0) {
        e = std::min(e, (s.bytes_per_s() - cfg.target_bytes_per_s) / cfg.target_bytes_per_s);
    }
    return std::clamp(e, -1.0, 1.0);
}

}  // namespace

BackgroundThrottle::BackgroundThrottle(const ControlConfig& cfg) : cfg_(cfg) {}

double BackgroundThrottle::update(const IntervalSample& s, WriteMode mode, double dt_s,
                                  const IntervalSample* reads) {
    if (!(dt_s > 0)) dt_s = static_cast<double>(cfg_.interval_ms) / 1e3;
    const bool switched_back =
        have_mode_ && prev_mode_ == WriteMode::kDeferred && mode == WriteMode::kInline;
    if (switched_back) {
        // The foreground now pays for inline deduplication: the operating point
        // learned in deferred mode is stale, so restart paused and ramp.
        speed_ = 0.0;
        integral_ = 0.0;
        prev_stressed_ = false;
    }
    prev_mode_ = mode;
    have_mode_ = true;

    if (reads != nullptr && under_stress(*reads, cfg_)) {
        // Pause, and ramp up from nothing once the reads calm down or stop;
        // the integral stays the writes' operating point.
        speed_ = 0.0;
        prev_stressed_ = false;
        regime_ = "reads under stress";
        return speed_;
    }
    if (foreground_idle(s, cfg_) && (reads == nullptr || foreground_idle(*reads, cfg_))) {
        // Nothing to protect. The integral is kept, so a returning foreground
        // starts from the last operating point instead of from full speed.
        speed_ = 1.0;
        prev_stressed_ = false;
        regime_ = "foreground idle";
        return speed_;
    }

    const bool stressed = under_stress(s, cfg_);
    if (stressed && !has_goal(cfg_)) {
        // Without a goal a foreground under stress wants all it can get:
        // pause, and ramp up from nothing once it calms down or stops.
        speed_ = 0.0;
        integral_ = 0.0;
        prev_stressed_ = false;
        regime_ = "no goal, foreground under stress";
        return speed_;
    }
    // Not under stress, the foreground gets what it asks for: treat it as
    // comfortably above the goal.
    double e = 1.0;
    if (!has_goal(cfg_)) {
        regime_ = "no goal";
    } else if (!stressed) {
        regime_ = "foreground not under stress";
    } else {
        e = goal_error(s, cfg_);
        regime_ = e < 0 ? "goal missed" : "goal met";
    }
    // Derivative only between two measured errors; the forced +1 of an
    // unstressed interval is not a measurement and would kick.
    const double d = (cfg_.kd > 0 && stressed && prev_stressed_ && has_goal(cfg_))
                         ? cfg_.kd * (e - prev_error_) / dt_s
                         : 0.0;
    prev_error_ = e;
    prev_stressed_ = stressed;

    // Increases are rate-limited while the foreground is active; decreases
    // are not (protecting the foreground is urgent, draining the backlog is not).
    const double hi = std::min(1.0, speed_ + cfg_.ramp_per_s * dt_s);
    const double p = cfg_.kp * e;
    double candidate = clamp01(integral_ + cfg_.ki * e * dt_s);
    // Anti-windup by clamping: a positive error integrates only as far as the
    // upper limit (1, or the ramp) lets the output through; at the lower end
    // the [0, 1] bound leaves at most kp of slack, which is harmless.
    if (e > 0) candidate = std::min(candidate, std::max(integral_, hi - p - d));
    integral_ = candidate;
    const double out = p + integral_ + d;
    if (switched_back) {
        regime_ = "switched back to inline, ramp restarted";
    } else if (out > hi && hi < 1.0) {
        regime_ = "ramping up";
    }
    speed_ = std::clamp(out, 0.0, hi);
    return speed_;
}

double BackgroundThrottle::speed() const { return speed_; }

const char* BackgroundThrottle::regime() const { return regime_; }

double BackgroundThrottle::integral() const { return integral_; }

}  // namespace hiodsfs
