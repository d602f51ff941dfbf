// The mode controller's settings, as a program gives them to the engine
// (EngineOptions::control, engine.h; see docs/controller.md).
//
// hiodsfs deduplicates either inline (on the write path) or deferred (data
// written raw, a background pass deduplicates later). In the hybrid setting
// the engine's ModeController picks the mode every interval so that a
// write-rate goal is met, following HIODS (Univ. of Minho, 2021), and a PID
// throttle paces the background pass so that it does not take the
// foreground's throughput. The controller, its load monitor, policies and
// throttle are the engine's (src/control/); this header is what configures
// them.
// Thread-safety: plain values and functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs {

enum class WriteMode : std::uint8_t { kInline = 0, kDeferred = 1 };
// "inline" or "deferred".
const char* to_string(WriteMode mode);

// Controller settings. A plain value; validate() before use.
struct ControlConfig {
    double target_ops = 0;  // write ops/s goal; 0 = no goal (hybrid stays inline)
    // Optional byte-rate goal (0 = none); the goal is missed if either is missed.
    double target_bytes_per_s = 0;
    std::uint64_t interval_ms = 1000;  // sampling interval
    std::uint64_t stress_gap_us = 3000;  // HIODS's stress test (the mode policies)
    double stress_ratio = 0.9;
    std::uint64_t recency_ms = 1000;
    unsigned switch_after = 3;  // N consecutive intervals
    // Throttle (PID on the normalised error (rate - goal) / goal, output =
    // background speed in [0, 1]). The plant gain g (share of the goal the
    // foreground loses when the background goes from paused to full speed)
    // is typically 0.2..1; with a one-interval measurement delay the loop is
    // stable for g < 2 / (2 kp + ki dt), i.e. g < 3.3 at the defaults (see
    // docs/controller.md for the derivation).
    double kp = 0.1;  // small: P acts on last interval's figure, so a large kp rings
    double ki = 0.4;  // per second: within 2 % of a step in ~10 intervals at g = 1
    double kd = 0.0;  // off: ops/s is noisy interval to interval and the plant has no inertia
    // Max increase of background speed per second while the foreground is
    // active (in particular after a switch back to inline, when the
    // throttle restarts from a pause): 0.05/s reaches full speed in 20 s, and
    // one interval's step (5 % of full speed) costs at most ~5 % of the goal
    // at g = 1, which the PID sees and stops before it adds up.
    double ramp_per_s = 0.05;
    // Addition, for the capacity policy: it counts an interval as saturated
    // when the daemon was busy at least (1 - capacity_margin) of it, returns
    // to inline only when the load is at most (1 - capacity_margin) of the
    // inline capacity it measured, and counts deferred as a gain only if it
    // makes a request at least capacity_margin cheaper than inline.
    double capacity_margin = 0.1;
    // Spare capacity (the throttle's measure, docs/controller.md): a write
    // request that arrives within held_gap_us of the previous completion
    // found its application waiting on the daemon: it was held; so is one
    // that arrives with two or more others in service (a queue, as the
    // kernel's writeback keeps). One other alone does not count: the
    // daemon serves several at once, and independent writers overlap at
    // any load. A FUSE round trip through the kernel and back
    // takes 10-20 us on the machines measured, so 20 us separates "sent as
    // soon as it could" from "had nothing to send" (HIODS's 3 ms gap was
    // for requests that took milliseconds: at FUSE's pace a load at 6 % of
    // capacity is all "stress" by it).
    std::uint64_t held_gap_us = 20;
    // The share of held requests the throttle paces the pass to: below it
    // the foreground has spare capacity and the pass speeds up; above it
    // the pass slows; with half or more held (a saturating load) it pauses.
    double held_ratio = 0.35;
    // False: the throttle uses HIODS's stress test instead (policy=hiods),
    // under which any load with gaps under stress_gap_us pauses the pass.
    bool spare_capacity = true;

    // EINVAL with a message naming the setting, its allowed range and the
    // value given.
    Status validate() const;
};

// The policy a hybrid controller uses when EngineOptions::policy is empty.
inline constexpr const char* kDefaultPolicy = "capacity";
// The names of the policies (EngineOptions::policy), for option help texts.
std::vector<std::string> policy_names();

// The controller itself (src/control/mode_controller.h): what
// Engine::controller() returns.
class ModeController;

}  // namespace hiodsfs
