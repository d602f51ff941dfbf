// Committer: the group commit and its frontier, the fsync log's records
// between commits (engine/fsync_log.h), the committer thread's round, and a
// tiered store's metadata snapshots after commits.
//
// A commit syncs the segments first, then commits the metadata group with
// the frontier: every byte the group refers to lies before it
// (WriteBehind::drained_at() or the synced end, whichever is first), so a
// crash leaves only leftovers past it. Every segment this run made gets an
// entry in Db::kSegments by the first commit after it was made.
// Thread-safety: every method may be called from any thread; commits and
// log records are serial (commit_mu_). Lock order: commit_mu_, then the
// metadata lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "engine/meta_tier.h"
#include "engine/write_behind.h"
#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "meta/meta_store.h"
#include "store/store_dir.h"

namespace hiodsfs {

// What the Committer works with, all owned by the engine and outliving it.
struct CommitterParts {
    MetaStore* meta = nullptr;
    SegmentStore* segs = nullptr;
    WriteBehind* write_behind = nullptr;
    TierJournal* journal = nullptr;  // a tiered store's metadata journal, or null
    SegmentTier* tier = nullptr;     // with journal: where snapshots go
    Env* env = nullptr;              // with journal: writes snapshot_tmp
    std::string snapshot_tmp;        // with journal: the snapshot's temporary file
    const StoreDir* store = nullptr;  // names the store in errors
    bool read_only = false;
    std::function<void(const std::string&)> log;  // may be empty
    // If the segment store stopped, stops the engine with its reason
    // (logged there); true if it had.
    std::function<bool()> stop_with_segments;
};

class Committer {
public:
    explicit Committer(CommitterParts parts);

    // Commits the open group. *reached_limit: see MetaStore::commit_group.
    Status commit_now(bool* reached_limit = nullptr);
    // fsync's commit on a logging store: the group's changes since the last
    // record, appended to the segments as one record and synced with them
    // (a large group commits instead).
    Status log_now();
    // A run of the committer thread: commits what is pending, then a
    // snapshot if one is due.
    void round();
    // A tiered store: a snapshot of the metadata to the tier
    // (engine/meta_tier.h); closing: the last one of this run.
    Status snapshot_to_tier(bool closing);
    // At open: segment seg was already there, with bytes; segments up to it
    // are left as they were (hiodsfs-fsck's), not noted again.
    void found_at_open(SegmentId seg);

    // For status.json.
    std::uint64_t early_commits() const { return early_commits_.load(); }
    std::uint64_t resident_trims() const { return resident_trims_.load(); }

    static constexpr std::size_t kLogRecordMost = 1u << 20;

private:
    Status commit_locked(bool* reached_limit);  // holds commit_mu_
    // A segment a log record went to has an entry in Db::kSegments, like
    // one that got a chunk, so reclaim may free it and fsck knows it.
    Status note_log_segment(SegmentId seg);
    static Status note_segment(Txn& t, SegmentId seg);
    // Every segment this run made has an entry in Db::kSegments from the
    // first group commit after it was made, even if no chunk of it was
    // ever mapped (a lost held write, a failed operation's appends): its
    // bytes are then counted dead and reclaim frees it.
    Status note_new_segments();
    // After a background commit: a snapshot when the journal grew enough.
    void maybe_snapshot();

    const CommitterParts p_;
    std::mutex commit_mu_;  // one commit at a time
    SegmentId log_segment_noted_ = 0;  // under commit_mu_
    SegmentId segments_noted_ = 0;     // made by this run above it; under commit_mu_
    std::chrono::steady_clock::time_point last_snapshot_;
    std::atomic<std::uint64_t> early_commits_{0};   // groups committed at commit_writes or meta_dirty
    std::atomic<std::uint64_t> resident_trims_{0};  // metadata map dropped (meta_resident)
    std::atomic<bool> commit_failed_{false};  // logged once
    std::atomic<bool> push_failing_{false};   // a tiered commit failed without stopping the store
};

}  // namespace hiodsfs
