#include <algorithm>

#include "control/background_throttle.h"

namespace hiodsfs {

namespace {

double clamp01(double v) { return std::clamp(v, 0.0, 1.0); }

// Half or more of the requests held: a load that sends each one the moment
// the last came back (a saturating one). Reads that do pause the pass.
constexpr double kSaturatingHeld = 0.5;

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
                                  const IntervalSample* reads, bool over_limit) {
    if (!(dt_s > 0)) dt_s = static_cast<double>(cfg_.interval_ms) / 1e3;
    const bool switched_back =
        have_mode_ && prev_mode_ == WriteMode::kDeferred && mode == WriteMode::kInline;
    if (switched_back) {
        // The foreground now pays for inline deduplication: the operating point
        // learned in deferred mode is stale, so restart paused and ramp.
        speed_ = 0.0;
        integral_ = 0.0;
        prev_stressed_ = false;
        slow_ramp_ = true;
    }
    prev_mode_ = mode;
    have_mode_ = true;
    idle_ = false;

    if (over_limit && mode == WriteMode::kDeferred) {
        // The backlog may not grow without bound: the pass takes what it
        // needs from the foreground, as the kernel's dirty-page balancing
        // does. The integral is kept for when it is back under the limit.
        speed_ = 1.0;
        prev_stressed_ = false;
        regime_ = "backlog over its limit";
        return speed_;
    }
    const bool reads_busy =
        reads != nullptr &&
        (cfg_.spare_capacity ? !foreground_idle(*reads, cfg_) && reads->held_fraction() >= kSaturatingHeld
                             : under_stress(*reads, cfg_));
    if (reads_busy) {
        // Pause, and ramp up from nothing once the reads calm down or stop;
        // the integral stays the writes' operating point.
        speed_ = 0.0;
        prev_stressed_ = false;
        regime_ = cfg_.spare_capacity ? "reads saturating" : "reads under stress";
        return speed_;
    }
    if (foreground_idle(s, cfg_) && (reads == nullptr || foreground_idle(*reads, cfg_))) {
        // Nothing to protect. The integral is kept, so a returning foreground
        // starts from the last operating point instead of from full speed.
        speed_ = 1.0;
        prev_stressed_ = false;
        regime_ = "foreground idle";
        idle_ = true;
        slow_ramp_ = false;
        return speed_;
    }

    if (cfg_.spare_capacity) return update_spare(s, reads, dt_s, switched_back);
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
    return pid(e, dt_s, switched_back, stressed && has_goal(cfg_));
}

double BackgroundThrottle::update_spare(const IntervalSample& s, const IntervalSample* reads, double dt_s,
                                        bool switched_back) {
    // Reads are foreground too: the pass's disk and CPU use come out of theirs.
    const double h = std::max(s.held_fraction(), reads != nullptr ? reads->held_fraction() : 0.0);
    const bool held = h >= cfg_.held_ratio;
    if (held && has_goal(cfg_)) {
        // Requests wait on the daemon and a goal is set: the dissertation's
        // rule, the pass may take what the goal leaves.
        const double e = goal_error(s, cfg_);
        regime_ = e < 0 ? "goal missed" : "goal met";
        return pid(e, dt_s, switched_back, true);
    }
    // Paced to the set point: below it the foreground has capacity to
    // spare, and what the pass takes shows as more requests held.
    // Held requests are the foreground losing: the pass backs off at three
    // times the pace it speeds up (a saturating load, over half held, that
    // finds it at full speed has it paused within two intervals).
    regime_ = held ? "foreground held" : "spare capacity";
    const double e = (cfg_.held_ratio - h) / cfg_.held_ratio;
    // Under half the set point held, most of the capacity is spare: the
    // pass climbs at four times the ramp, so a short lull after a
    // saturating stretch is not spent climbing from nothing. Not while the
    // ramp after a switch back to inline runs: its slow climb is what
    // keeps HIODS's burst away.
    const double ramp = e >= 0.5 && !slow_ramp_ ? 4 * cfg_.ramp_per_s : cfg_.ramp_per_s;
    return pid(e < 0 ? 3 * e : e, dt_s, switched_back, false, -3.0, ramp);
}

double BackgroundThrottle::pid(double e, double dt_s, bool switched_back, bool measured, double lowest,
                               double ramp_per_s) {
    if (ramp_per_s <= 0) ramp_per_s = cfg_.ramp_per_s;
    e = std::clamp(e, lowest, 1.0);
    // Derivative only between two measured errors; a forced +1 (or the
    // held share's error) is not the goal's measurement and would kick.
    const double d =
        (cfg_.kd > 0 && measured && prev_stressed_) ? cfg_.kd * (e - prev_error_) / dt_s : 0.0;
    prev_error_ = e;
    prev_stressed_ = measured;

    // Increases are rate-limited while the foreground is active; decreases
    // are not (protecting the foreground is urgent, draining the backlog is not).
    const double hi = std::min(1.0, speed_ + ramp_per_s * dt_s);
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
    if (speed_ >= 1.0) slow_ramp_ = false;  // the ramp after a switch back is done
    return speed_;
}

double BackgroundThrottle::speed() const { return speed_; }

const char* BackgroundThrottle::regime() const { return regime_; }

double BackgroundThrottle::integral() const { return integral_; }

}  // namespace hiodsfs
