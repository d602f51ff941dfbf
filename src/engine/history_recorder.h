// HistoryRecorder: folds the mode controller's interval samples into the
// activity history of Db::kHistory (meta/history.h) that hiodsfs-stat
// --history shows.
//
// A sample every kHistoryActivePeriodNs while there is activity (writes,
// background work or a backlog), at most one per kHistoryIdlePeriodNs when
// idle. With the retention of meta/history.h that is at most ~260k samples
// (~20 MB) for a store busy for a whole month, ~43k for an idle one.
// Thread-safety: a HistoryRecorder belongs to one thread (the control loop).
#pragma once

#include <cstdint>

#include "control/interval_sample.h"
#include "hiodsfs/control.h"
#include "hiodsfs/space_counters.h"
#include "meta/history.h"

namespace hiodsfs {

// Accumulates controller ticks and says when a sample is due.
class HistoryRecorder {
public:
    // One controller tick; returns true and fills *out when a sample is due.
    // wall_ns: the wall clock now; mode and counters as of now.
    bool tick(const IntervalSample& s, std::uint64_t wall_ns, WriteMode mode,
              const SpaceCounters& c, HistoryEntry* out);

private:
    std::uint64_t start_wall_ns_ = 0;  // start of the open period (0: none yet)
    std::uint64_t ops_ = 0, bytes_ = 0, background_bytes_ = 0, elapsed_ns_ = 0;
    std::uint64_t last_backlog_ = 0;
};

}  // namespace hiodsfs
