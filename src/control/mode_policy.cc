// The mode policies: HIODS's baseline and the capacity policy (see
// docs/controller.md for the reasoning and the trace comparison).
#include <algorithm>
#include <cstdio>
#include <limits>

#include "control/mode_policy.h"

namespace hiodsfs {

namespace {

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, format, a, b, c, d);
    return buf;
}

// "512 ops/s against 800" and/or "61.0 MB/s against 80.0", whichever goals
// are set, for switch reasons.
std::string rate_vs_goal(const IntervalSample& s, const ControlConfig& cfg) {
    std::string out;
    if (cfg.target_ops > 0) out = fmt("%.0f ops/s against %.0f", s.ops_per_s(), cfg.target_ops);
    if (cfg.target_bytes_per_s > 0) {
        if (!out.empty()) out += ", ";
        out += fmt("%.1f MB/s against %.1f", s.bytes_per_s() / 1e6, cfg.target_bytes_per_s / 1e6);
    }
    return out;
}

void set_reason(std::string* reason, std::string text) {
    if (reason != nullptr) *reason = std::move(text);
}

// HIODS: switch to deferred after N consecutive intervals under stress with
// the goal missed; back to inline after N consecutive intervals not under
// stress (an idle interval is not under stress).
class HiodsPolicy final : public ModePolicy {
public:
    explicit HiodsPolicy(const ControlConfig& cfg) : cfg_(cfg) {}
    const char* name() const override { return "hiods"; }

    WriteMode decide(const IntervalSample& s, WriteMode current, std::string* reason) override {
        if (current != last_) {
            // Someone else changed the mode: runs counted for the old one mean nothing.
            missed_ = calm_ = 0;
            last_ = current;
        }
        const bool stress = under_stress(s, cfg_);
        const unsigned n = cfg_.switch_after;
        if (current == WriteMode::kInline) {
            missed_ = (stress && goal_missed(s, cfg_)) ? missed_ + 1 : 0;
            if (missed_ < n) return current;
            set_reason(reason,
                       fmt("under stress (%.0f%% of requests) with the goal missed for %.0f "
                           "intervals: ",
                           100 * s.stress_fraction(), n) +
                           rate_vs_goal(s, cfg_));
            missed_ = 0;
            last_ = WriteMode::kDeferred;
            return last_;
        }
        calm_ = stress ? 0 : calm_ + 1;
        if (calm_ < n) return current;
        set_reason(reason, foreground_idle(s, cfg_)
                               ? fmt("foreground idle for %.0f intervals", n)
                               : fmt("not under stress for %.0f intervals (%.0f%% of requests in "
                                     "stress)",
                                     n, 100 * s.stress_fraction()));
        calm_ = 0;
        last_ = WriteMode::kInline;
        return last_;
    }

private:
    const ControlConfig cfg_;
    WriteMode last_ = WriteMode::kInline;
    unsigned missed_ = 0, calm_ = 0;
};

// Capacity: HIODS's trigger for deferred, made aware of what each mode can
// do. It measures
//   - saturation: the daemon's busy time (sum of service times) against the
//     interval; below (1 - margin) the daemon sat idle part of the time, so
//     a missed goal is the application asking for less, not inline being
//     too slow, and deferring would not raise the rate;
//   - inline capacity: mean ops/s and bytes/s of the saturated intervals
//     that forced the switch;
//   - per-request cost in each mode: busy_ns / ops of stressed intervals
//     (comparable conditions), smoothed.
// Inline -> deferred: N consecutive intervals under stress, saturated, with
// the goal missed, unless deferred is known not to make requests at least
// `margin` cheaper.
// Deferred -> inline: R consecutive calm intervals, calm meaning idle, or
// the load within (1 - margin) of the inline capacity (inline carries it
// with headroom), or deferred requests measured no cheaper than inline ones.
// R starts at N and doubles (up to 32 N) each time a return to inline is
// undone within 10 N intervals: such a return was a mistake, so the next
// one waits for stronger evidence (flap damping).
class CapacityPolicy final : public ModePolicy {
public:
    explicit CapacityPolicy(const ControlConfig& cfg)
        : cfg_(cfg), required_calm_(cfg.switch_after), keep_(1.0 - cfg.capacity_margin) {}
    const char* name() const override { return "capacity"; }

    WriteMode decide(const IntervalSample& s, WriteMode current, std::string* reason) override {
        if (current != last_) {
            reset_runs();
            last_ = current;
        }
        const bool stress = under_stress(s, cfg_);
        if (stress && s.ops >= kMinCostOps) learn_cost(current, s);
        return current == WriteMode::kInline ? decide_inline(s, stress, reason)
                                             : decide_deferred(s, stress, reason);
    }

private:
    // Fewer requests than this give a per-request cost too noisy to compare.
    static constexpr std::uint64_t kMinCostOps = 10;
    static constexpr double kCostSmoothing = 0.3;  // EWMA weight of the newest interval
    static constexpr unsigned kUndoWindowTimesN = 10;
    static constexpr unsigned kMaxCalmTimesN = 32;
    // Inline serving less than this share of its measured capacity is the
    // application asking for less; wide, because a loaded machine makes
    // inline's own rate wander by 10-20 % (seen in scripts/bench-hybrid).
    static constexpr double kAskingLess = 0.75;
    // Per saturated interval below that (half-life ~23 intervals).
    static constexpr double kCapDecay = 0.03;

    void reset_runs() {
        missed_ = calm_ = 0;
        sum_ops_ = sum_bytes_ = 0;
    }

    void learn_cost(WriteMode mode, const IntervalSample& s) {
        const double cost = static_cast<double>(s.busy_ns) / static_cast<double>(s.ops);
        double& c = mode == WriteMode::kInline ? cost_inline_ : cost_deferred_;
        c = c == 0 ? cost : (1 - kCostSmoothing) * c + kCostSmoothing * cost;
    }

    // Deferred helps unless measured to make requests no cheaper.
    bool deferred_helps() const {
        return cost_deferred_ == 0 || cost_inline_ == 0 || cost_deferred_ <= keep_ * cost_inline_;
    }

    WriteMode decide_inline(const IntervalSample& s, bool stress, std::string* reason) {
        if (since_return_ < kUndoWindowTimesN * cfg_.switch_after) ++since_return_;
        const double busy = s.seconds() > 0 ? static_cast<double>(s.busy_ns) /
                                                  static_cast<double>(s.end_ns - s.start_ns)
                                            : 0.0;
        const bool saturated = busy >= keep_;
        if (!(stress && saturated && goal_missed(s, cfg_) && deferred_helps())) {
            reset_runs();
            return WriteMode::kInline;
        }
        // Well below the inline capacity measured before, a missed goal is
        // the application asking for less (with several writers the daemon
        // looks saturated either way): deferring would only grow a backlog.
        // The estimate decays toward what inline serves now, so a capacity
        // that really dropped is learned within a minute or two.
        if (have_cap_ && s.ops_per_s() < kAskingLess * cap_ops_) {
            cap_ops_ = (1 - kCapDecay) * cap_ops_ + kCapDecay * s.ops_per_s();
            reset_runs();
            return WriteMode::kInline;
        }
        ++missed_;
        sum_ops_ += s.ops_per_s();
        sum_bytes_ += s.bytes_per_s();
        if (missed_ < cfg_.switch_after) return WriteMode::kInline;
        cap_ops_ = sum_ops_ / missed_;
        cap_bytes_ = sum_bytes_ / missed_;
        have_cap_ = true;
        const unsigned n = cfg_.switch_after;
        const bool undone = since_return_ < kUndoWindowTimesN * n;
        required_calm_ = undone ? std::min(2 * required_calm_, kMaxCalmTimesN * n) : n;
        set_reason(reason, fmt("under stress (%.0f%% of requests) with the goal missed for %.0f "
                               "intervals: ",
                               100 * s.stress_fraction(), n) +
                               rate_vs_goal(s, cfg_) +
                               fmt("; inline capacity measured at %.0f ops/s", cap_ops_));
        reset_runs();
        last_ = WriteMode::kDeferred;
        return last_;
    }

    WriteMode decide_deferred(const IntervalSample& s, bool stress, std::string* reason) {
        const bool idle = foreground_idle(s, cfg_);
        // Without a capacity (the mode was set from outside) fall back to HIODS.
        const bool fits = have_cap_ ? (s.ops_per_s() <= keep_ * cap_ops_ &&
                                       (cap_bytes_ == 0 || s.bytes_per_s() <= keep_ * cap_bytes_))
                                    : !stress;
        const bool no_gain = stress && !deferred_helps();
        if (!(idle || fits || no_gain)) {
            calm_ = 0;
            return WriteMode::kDeferred;
        }
        if (++calm_ < required_calm_) return WriteMode::kDeferred;
        const double r = required_calm_;
        if (idle) {
            set_reason(reason, fmt("foreground idle for %.0f intervals", r));
        } else if (no_gain) {
            set_reason(reason, fmt("deferred does not make requests cheaper (%.2f ms vs %.2f ms "
                                   "inline) for %.0f intervals",
                                   cost_deferred_ / 1e6, cost_inline_ / 1e6, r));
        } else {
            set_reason(reason, fmt("load of %.0f ops/s fits within inline capacity (%.0f ops/s) "
                                   "for %.0f intervals",
                                   s.ops_per_s(), cap_ops_, r));
        }
        reset_runs();
        since_return_ = 0;
        last_ = WriteMode::kInline;
        return last_;
    }

    const ControlConfig cfg_;
    unsigned required_calm_;
    const double keep_;  // 1 - margin
    WriteMode last_ = WriteMode::kInline;
    unsigned missed_ = 0, calm_ = 0;
    double sum_ops_ = 0, sum_bytes_ = 0;
    bool have_cap_ = false;
    double cap_ops_ = 0, cap_bytes_ = 0;
    double cost_inline_ = 0, cost_deferred_ = 0;  // ns per request; 0 = not measured yet
    // Inline intervals since the last return to inline, saturating at the undo window.
    unsigned since_return_ = std::numeric_limits<unsigned>::max();
};

}  // namespace

std::vector<std::string> policy_names() { return {"capacity", "hiods"}; }

std::unique_ptr<ModePolicy> make_policy(const std::string& name, const ControlConfig& cfg,
                                        std::string* error) {
    if (name == "hiods") return std::make_unique<HiodsPolicy>(cfg);
    if (name == "capacity") return std::make_unique<CapacityPolicy>(cfg);
    if (error != nullptr) {
        *error = "unknown mode policy '" + name + "' (known: capacity, hiods)";
    }
    return nullptr;
}

}  // namespace hiodsfs
