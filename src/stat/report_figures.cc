// The figures hiodsfs-stat derives from a Report's counters (report.h).
#include <algorithm>

#include "hiodsfs/segment_store.h"
#include "stat/report.h"

namespace hiodsfs::stat {

std::uint64_t Report::saved_bytes() const {
    return logical_bytes > stored_bytes ? logical_bytes - stored_bytes : 0;
}

double Report::ratio() const {
    return stored_bytes == 0 ? 1.0 : static_cast<double>(logical_bytes) / static_cast<double>(stored_bytes);
}

double Report::dedup_ratio() const {
    return content_bytes == 0 ? 1.0 : static_cast<double>(logical_bytes) / static_cast<double>(content_bytes);
}

double Report::compression_ratio() const {
    return stored_bytes == 0 ? 1.0 : static_cast<double>(content_bytes) / static_cast<double>(stored_bytes);
}

double Report::mean_chunk_bytes() const {
    return chunk_count == 0 ? 0.0 : static_cast<double>(content_bytes) / static_cast<double>(chunk_count);
}

std::uint64_t Report::reclaimable_bytes() const {
    const std::uint64_t live = stored_bytes + chunk_count * SegmentStore::kHeaderBytes;
    return disk_bytes > live ? disk_bytes - live : 0;
}

double Report::drain_rate() const {
    if (background_bytes_per_s > 0) return background_bytes_per_s;
    // Between two batches the last interval may show nothing: fall back to
    // the last history sample's average.
    if (!history.empty()) return history.back().background_bytes_per_s;
    return 0;
}

std::optional<double> Report::drain_eta_s() const {
    if (backlog_bytes == 0 && backlog_records == 0) return 0.0;
    const double rate = drain_rate();
    if (rate <= 0) return std::nullopt;
    return static_cast<double>(backlog_bytes) / rate;
}

}  // namespace hiodsfs::stat
