// IntervalSample figures and the shared stress and goal tests used by
// policies and throttle alike.
#include "control/interval_sample.h"

namespace hiodsfs {

double IntervalSample::seconds() const {
    return end_ns > start_ns ? static_cast<double>(end_ns - start_ns) / 1e9 : 0.0;
}

double IntervalSample::ops_per_s() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>(ops) / s : 0.0;
}

double IntervalSample::bytes_per_s() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>(bytes) / s : 0.0;
}

double IntervalSample::stress_fraction() const {
    const std::uint64_t base = arrivals != 0 ? arrivals : ops;
    if (base == 0) return 0.0;
    const double f = static_cast<double>(stressed) / static_cast<double>(base);
    return f > 1.0 ? 1.0 : f;
}

double IntervalSample::held_fraction() const {
    if (arrivals == 0) return 0.0;
    const double f = static_cast<double>(held) / static_cast<double>(arrivals);
    return f > 1.0 ? 1.0 : f;
}

bool foreground_idle(const IntervalSample& s, const ControlConfig& cfg) {
    if (s.last_arrival_ns == 0) return true;
    // A request may arrive after end_ns was read (it raced take_sample):
    // that is as recent as it gets.
    if (s.last_arrival_ns >= s.end_ns) return false;
    return s.end_ns - s.last_arrival_ns > cfg.recency_ms * 1'000'000ull;
}

bool under_stress(const IntervalSample& s, const ControlConfig& cfg) {
    if (foreground_idle(s, cfg)) return false;
    const std::uint64_t base = s.arrivals != 0 ? s.arrivals : s.ops;
    return base != 0 && s.stress_fraction() >= cfg.stress_ratio;
}

bool has_goal(const ControlConfig& cfg) { return cfg.target_ops > 0 || cfg.target_bytes_per_s > 0; }

bool goal_missed(const IntervalSample& s, const ControlConfig& cfg) {
    if (cfg.target_ops > 0 && s.ops_per_s() < cfg.target_ops) return true;
    if (cfg.target_bytes_per_s > 0 && s.bytes_per_s() < cfg.target_bytes_per_s) return true;
    return false;
}

}  // namespace hiodsfs
