// BackgroundThrottle: the PID controller that paces the background pass.
// Thread-safety: as the class says.
#pragma once

#include "control/interval_sample.h"
#include "hiodsfs/control.h"

namespace hiodsfs {

// PID controller pacing the background pass. Output: background speed in
// [0, 1] (1 = full speed, 0 = paused). While the goal is missed under stress
// it slows the background down; when the foreground is idle it runs at full
// speed; while the foreground is active the speed rises at most ramp_per_s
// per second, and a switch back to inline restarts it from 0 (the foreground
// takes on inline deduplication, so the old operating point is stale).
// Reads are foreground too: while they stream (under stress by the same
// test as writes, on their own sample) the background pauses whatever the
// goal, since a write-rate goal says nothing of reads and the pass's disk
// and CPU use would come out of theirs; the integral is kept for the writes.
// Output clamping plus integrator clamping keep it free of windup: a
// positive error integrates only as far as the upper limit (1, or the ramp)
// lets the output through, and the integral stays in [0, 1]. Without a goal
// there is nothing to protect: the error is +1.
// Thread-safety: not thread-safe; the controller serialises update() and
// publishes speed() through an atomic.
class BackgroundThrottle {
public:
    explicit BackgroundThrottle(const ControlConfig& cfg);
    // dt_s: the interval's length in seconds; reads: the same interval's
    // read requests, if counted; over_limit: the backlog is past its limit
    // (in deferred mode the pass then runs at full speed). Returns the new
    // speed.
    double update(const IntervalSample& s, WriteMode mode, double dt_s,
                  const IntervalSample* reads = nullptr, bool over_limit = false);
    double speed() const;
    // Addition: why the last update set the speed, e.g. "goal missed".
    const char* regime() const;
    // Addition: the integral term (tests check it stays within [0, 1]).
    double integral() const;
    // The last update found the foreground idle (and so ran at full speed).
    bool found_idle() const { return idle_; }

private:
    // The spare-capacity throttle (cfg.spare_capacity): paced by the share
    // of held requests, or by the goal while requests are held and one is set.
    double update_spare(const IntervalSample& s, const IntervalSample* reads, double dt_s, bool switched_back);
    // One PI(D) step on the error e (positive: the pass may speed up),
    // clamped to [lowest, 1]; measured: e is a measurement (the goal's),
    // which D may differentiate.
    // ramp_per_s: the climb's limit (<= 0: cfg.ramp_per_s).
    double pid(double e, double dt_s, bool switched_back, bool measured, double lowest = -1.0,
               double ramp_per_s = 0);

    ControlConfig cfg_;
    double speed_ = 1.0;
    double integral_ = 1.0;  // consistent with the initial full speed
    double prev_error_ = 0.0;
    bool prev_stressed_ = false;
    // From a switch back to inline until full speed or an idle foreground:
    // the pass climbs at ramp_per_s, never faster.
    bool slow_ramp_ = false;
    WriteMode prev_mode_ = WriteMode::kInline;
    bool have_mode_ = false;
    const char* regime_ = "start";
    bool idle_ = false;
};

}  // namespace hiodsfs
