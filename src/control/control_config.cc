// ControlConfig validation.
#include <cerrno>
#include <cmath>
#include <sstream>

#include "hiodsfs/control.h"

namespace hiodsfs {

const char* to_string(WriteMode mode) {
    return mode == WriteMode::kDeferred ? "deferred" : "inline";
}

namespace {

Status bad(const char* name, const char* expected, double got) {
    std::ostringstream msg;
    msg << "control: " << name << " must be " << expected << ", got " << got;
    return Status::error(EINVAL, msg.str());
}

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

Status ControlConfig::validate() const {
    if (!finite_nonneg(target_ops)) {
        return bad("target_ops", "a finite number >= 0 (write ops/s; 0 = no goal)", target_ops);
    }
    if (!finite_nonneg(target_bytes_per_s)) {
        return bad("target_bytes_per_s", "a finite number >= 0 (bytes/s; 0 = no goal)",
                   target_bytes_per_s);
    }
    // Below 10 ms an interval holds too few requests to measure a rate;
    // above a minute the controller reacts too late to matter.
    if (interval_ms < 10 || interval_ms > 60'000) {
        return bad("interval_ms", "between 10 and 60000", static_cast<double>(interval_ms));
    }
    if (stress_gap_us == 0 || stress_gap_us > interval_ms * 1000) {
        return bad("stress_gap_us", "between 1 and interval_ms * 1000",
                   static_cast<double>(stress_gap_us));
    }
    if (!(stress_ratio > 0 && stress_ratio <= 1)) {
        return bad("stress_ratio", "in (0, 1]", stress_ratio);
    }
    if (recency_ms == 0) return bad("recency_ms", "at least 1", 0);
    if (switch_after < 1 || switch_after > 1000) {
        return bad("switch_after", "between 1 and 1000 intervals", switch_after);
    }
    if (!finite_nonneg(kp)) return bad("kp", "a finite number >= 0", kp);
    if (!finite_nonneg(ki)) return bad("ki", "a finite number >= 0", ki);
    if (!finite_nonneg(kd)) return bad("kd", "a finite number >= 0", kd);
    if (kp == 0 && ki == 0) {
        return Status::error(EINVAL,
                             "control: kp and ki are both 0, so the throttle would never move; "
                             "set at least one (defaults kp=0.1, ki=0.4)");
    }
    if (!(std::isfinite(ramp_per_s) && ramp_per_s > 0)) {
        return bad("ramp_per_s", "a finite number > 0 (speed per second; 1 = no ramp)", ramp_per_s);
    }
    if (!(capacity_margin >= 0 && capacity_margin < 1)) {
        return bad("capacity_margin", "in [0, 1)", capacity_margin);
    }
    if (held_gap_us == 0 || held_gap_us > interval_ms * 1000) {
        return bad("held_gap_us", "between 1 and interval_ms * 1000", static_cast<double>(held_gap_us));
    }
    if (!(held_ratio > 0 && held_ratio < 0.5)) return bad("held_ratio", "in (0, 0.5)", held_ratio);
    return Status::ok();
}

}  // namespace hiodsfs
