#include "engine/history_recorder.h"

#include <algorithm>

namespace hiodsfs {

bool HistoryRecorder::tick(const IntervalSample& s, std::uint64_t wall_ns, WriteMode mode,
                           const SpaceCounters& c, HistoryEntry* out) {
    if (start_wall_ns_ == 0)
        start_wall_ns_ = wall_ns - std::min(wall_ns, s.end_ns - std::min(s.end_ns, s.start_ns));
    ops_ += s.ops;
    bytes_ += s.bytes;
    background_bytes_ += s.background_bytes;
    elapsed_ns_ += s.end_ns - std::min(s.end_ns, s.start_ns);
    const std::uint64_t since = wall_ns - std::min(wall_ns, start_wall_ns_);
    const bool active = ops_ > 0 || background_bytes_ > 0 || c.backlog_records > 0 ||
                        c.backlog_records != last_backlog_;
    if (since < (active ? kHistoryActivePeriodNs : kHistoryIdlePeriodNs)) return false;
    const double secs = elapsed_ns_ > 0 ? static_cast<double>(elapsed_ns_) / 1e9 : 1.0;
    out->time_ns = wall_ns;
    out->r = HistoryRecord{};
    out->r.mode = static_cast<std::uint8_t>(mode);
    out->r.period_ns = elapsed_ns_;
    out->r.ops_per_s = static_cast<double>(ops_) / secs;
    out->r.bytes_per_s = static_cast<double>(bytes_) / secs;
    out->r.background_bytes_per_s = static_cast<double>(background_bytes_) / secs;
    out->r.backlog_records = c.backlog_records;
    out->r.backlog_bytes = c.backlog_bytes;
    out->r.logical_bytes = c.logical_bytes;
    out->r.stored_bytes = c.stored_bytes;
    start_wall_ns_ = wall_ns;
    ops_ = bytes_ = background_bytes_ = elapsed_ns_ = 0;
    last_backlog_ = c.backlog_records;
    return true;
}

}  // namespace hiodsfs
