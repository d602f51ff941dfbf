// The activity history in Db::kHistory: samples the daemon's control loop
// appends (inside the normal group commit) and hiodsfs-stat --history shows.
// Keys are big-endian wall-clock times in ns since the epoch, values
// HistoryRecord (records.h).
//
// Samples older than kRetention are pruned as new ones are written; the
// engine's HistoryRecorder (engine/history_recorder.h) decides when one is
// due.
// Thread-safety: the functions use the caller's Txn.
#pragma once

#include <cstdint>
#include <vector>

#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

struct HistoryEntry {
    std::uint64_t time_ns = 0;  // wall clock, ns since the epoch (end of the period)
    HistoryRecord r;
};

inline constexpr std::uint64_t kHistoryActivePeriodNs = 10ull * 1'000'000'000;
inline constexpr std::uint64_t kHistoryIdlePeriodNs = 60ull * 1'000'000'000;
inline constexpr std::uint64_t kHistoryRetentionNs = 30ull * 86400 * 1'000'000'000;
inline constexpr std::uint64_t kNsPerDay = 86400ull * 1'000'000'000;

// Adds a sample and prunes samples older than time_ns - retention_ns (at most
// a bounded number per call, so one call never stalls the store).
Status append_history(Txn& t, const HistoryEntry& e, std::uint64_t retention_ns = kHistoryRetentionNs);
// The last `max` samples, oldest first.
Status read_history_tail(Txn& t, std::size_t max, std::vector<HistoryEntry>* out);
// The last sample of each UTC day, for at most `days` days that have samples,
// oldest first (space saved per day is the difference of consecutive days).
Status read_history_daily(Txn& t, std::size_t days, std::vector<HistoryEntry>* out);

}  // namespace hiodsfs
