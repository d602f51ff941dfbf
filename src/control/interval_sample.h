// IntervalSample: one interval's load as the controller measures it, and
// the stress, idle and goal tests the policies and the throttle share.
// Thread-safety: plain values and functions.
#pragma once

#include <cstdint>

#include "hiodsfs/control.h"

namespace hiodsfs {

// One interval's measurements (also what hiodsfs-stat shows as history).
struct IntervalSample {
    std::uint64_t start_ns = 0, end_ns = 0;
    std::uint64_t ops = 0;  // write requests completed in the interval
    std::uint64_t bytes = 0;
    // Of the requests that arrived in the interval, those in stress: they
    // arrived within stress_gap of the previous completion, or while another
    // request was still in flight.
    std::uint64_t stressed = 0;
    std::uint64_t last_arrival_ns = 0;  // arrival time of the most recent request (0 = none ever)
    std::uint64_t busy_ns = 0;          // sum of request service times (for a capacity estimate)
    std::uint64_t backlog_records = 0, backlog_bytes = 0;  // filled in by the engine
    // Filled in by the engine: bytes the background pass processed.
    std::uint64_t background_bytes = 0;
    // Addition: requests that arrived in the interval (the base of
    // stress_fraction; stress is known at arrival, completion may fall in
    // the next interval).
    std::uint64_t arrivals = 0;
    // Of those, the ones that arrived within held_gap of the previous
    // completion, or with two or more others in service: their
    // application was waiting on the daemon (the spare-capacity measure).
    std::uint64_t held = 0;

    double seconds() const;
    double ops_per_s() const;
    double bytes_per_s() const;
    // stressed / arrivals (ops if arrivals is 0), at most 1.
    double stress_fraction() const;
    // held / arrivals (0 without arrivals), at most 1.
    double held_fraction() const;
};

// HIODS's stress test: at least stress_ratio of the interval's requests were
// in stress and the last request arrived at most recency_ms before the end.
bool under_stress(const IntervalSample& s, const ControlConfig& cfg);
// No request arrived within recency_ms of the end of the interval.
bool foreground_idle(const IntervalSample& s, const ControlConfig& cfg);
// A goal is set and the interval's ops/s or bytes/s fell short of it.
bool goal_missed(const IntervalSample& s, const ControlConfig& cfg);
bool has_goal(const ControlConfig& cfg);

}  // namespace hiodsfs
