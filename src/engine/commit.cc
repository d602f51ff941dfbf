// The group commit and its frontier, the fsync log's records between
// commits, the committer thread's round, and snapshots (engine/commit.h).
#include "engine/commit.h"

#include <malloc.h>

#include <algorithm>
#include <vector>

#include "engine/compaction.h"
#include "engine/fsync_log.h"
#include "meta/chunk_table.h"
#include "meta/keys.h"

namespace hiodsfs {

namespace {

// A commit syncs the segments in rounds before it takes the metadata lock,
// at most this many, until the writers appended at most kLockedSyncBytes
// during the last one: the sync under the lock, which every metadata
// operation waits for, then covers only that much (commit_locked).
constexpr int kPreSyncRounds = 4;
constexpr std::uint64_t kLockedSyncBytes = 4u << 20;

}  // namespace

Committer::Committer(CommitterParts parts) : p_(std::move(parts)) {
    // A journal starts where the open left the tier: the last snapshot's.
    if (p_.journal != nullptr) last_snapshot_ = std::chrono::steady_clock::now();
}

void Committer::found_at_open(SegmentId seg) {
    std::lock_guard<std::mutex> serial(commit_mu_);
    segments_noted_ = std::max(segments_noted_, seg);
}

Status Committer::snapshot_to_tier(bool closing) {
    std::uint64_t seq = 0;
    Status st = put_snapshot(p_.env, p_.tier, *p_.meta, p_.journal, p_.snapshot_tmp, closing, &seq);
    last_snapshot_ = std::chrono::steady_clock::now();
    return p_.store->named(st);
}

// After a background commit: a snapshot once the journal has grown by
// kSnapshotJournalBytes, or every 10 minutes while it grows at all, so
// that a recovery replays little and the journal objects can go.
void Committer::maybe_snapshot() {
    if (p_.journal == nullptr) return;
    const std::uint64_t grown = p_.journal->bytes_since_snapshot();
    const bool due = grown >= kSnapshotJournalBytes ||
                     (grown > 0 && std::chrono::steady_clock::now() - last_snapshot_ > std::chrono::minutes(10));
    if (!due) return;
    Status st = snapshot_to_tier(false);
    if (!st && p_.log) p_.log("hiodsfs: metadata snapshot failed (retried later): " + st.message());
}


// An fsync of a logging store: the group's changes since the last record,
// appended to the segments as one record, then synced with them. Records
// take their seqs and places in the stream under commit_mu_; the sync runs
// after it is released, so fsyncs of several threads share one: a sync that
// covers a record covers every record before it, as the stream is written
// in order (a failed write keeps its bytes for the next, a failed sync stops
// the store), and one that finds its record already covered returns at once.
Status Committer::log_now() {
    SegmentPosition through;
    {
        std::lock_guard<std::mutex> serial(commit_mu_);
        std::string record;
        LogMark mark;
        bool commit_instead = false;
        HIODSFS_TRY(p_.meta->prepare_log(
            [this](SuperState* state) {
                // Every chunk the group refers to was appended before this
                // point (held writes were applied just now, under the lock).
                const SegmentPosition p = p_.segs->append_position();
                state->frontier_segment = p.segment;
                state->frontier_offset = p.offset;
                return Status::ok();
            },
            &record, &mark, &commit_instead));
        // A large group commits instead: its record would be most of its pages.
        if (commit_instead || record.size() > kLogRecordMost) return commit_locked(nullptr);
        if (!record.empty()) {
            ChunkLocation loc;
            HIODSFS_TRY(
                p_.segs->append(kLogRecord, record.data(), static_cast<std::uint32_t>(record.size()), &loc));
            // In the stream now: the next record follows this one.
            p_.meta->logged(mark);
            HIODSFS_TRY(note_log_segment(loc.segment));
            through = SegmentPosition{loc.segment, loc.offset + loc.length};
        } else {
            // Nothing new: the records before may still wait for their sync.
            through = p_.segs->append_position();
        }
    }
    return p_.segs->sync_through(through);
}

// The entry is a change of the open group after the record: the next record
// or commit has it. A crash before either leaves the segment after the
// committed frontier, which the next open records (check_segment_files).
Status Committer::note_log_segment(SegmentId seg) {
    if (seg == log_segment_noted_) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(p_.meta->begin(&t));
    HIODSFS_TRY(note_segment(*t, seg));
    HIODSFS_TRY(t->commit());
    log_segment_noted_ = seg;
    return Status::ok();
}

Status Committer::commit_now(bool* reached_limit) {
    std::lock_guard<std::mutex> serial(commit_mu_);
    return commit_locked(reached_limit);
}

// An entry of 0 live bytes, unless it has one: a damaged one is fsck's to
// repair, never to be read as "dead" here.
Status Committer::note_segment(Txn& t, SegmentId seg) {
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kSegments, key_u64(seg), &v, &found));
    return found ? Status::ok() : add_segment_live(t, seg, 0);
}

Status Committer::note_new_segments() {
    if (p_.read_only || p_.segs->active_segment() <= segments_noted_) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(p_.meta->begin(&t));
    // Listed under the metadata lock: compaction deletes a file before it
    // drops the file's entry, in an operation of its own, so a file listed
    // here still has its entry unless it never got one.
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(p_.segs->list_segments(&files));
    const SegmentId active = p_.segs->active_segment();
    SegmentId noted = segments_noted_;
    for (const auto& [seg, size] : files) {
        if (seg <= segments_noted_ || seg > active) continue;
        HIODSFS_TRY(note_segment(*t, seg));
        noted = std::max(noted, seg);
    }
    HIODSFS_TRY(t->commit());
    segments_noted_ = noted;
    return Status::ok();
}

Status Committer::commit_locked(bool* reached_limit) {
    HIODSFS_TRY(note_new_segments());
    // Most data is synced before taking the metadata lock; the sync under
    // it covers what was appended meanwhile. A fast writer appends tens of
    // MiB during a sync of that much (whole segments, 60-70 ms each here),
    // so this syncs again while the last round left more than
    // kLockedSyncBytes behind it. With a journal, the same for the synced
    // bytes the tier needs first.
    SegmentPosition early;
    HIODSFS_TRY(p_.segs->sync(&early));
    for (int round = 1; round < kPreSyncRounds; ++round) {
        const SegmentPosition now = p_.segs->append_position();
        if (now.segment == early.segment && now.offset - std::min(now.offset, early.offset) <= kLockedSyncBytes)
            break;
        HIODSFS_TRY(p_.segs->sync(&early));
    }
    Status st = p_.journal != nullptr ? p_.segs->push_to_tier(early) : Status::ok();
    if (st) st = p_.meta->commit_group([this](SuperState* state) {
        SegmentPosition synced;
        HIODSFS_TRY(p_.segs->sync(&synced));
        // Writes held back after the group took the last ones appended
        // past drained_at(): their bytes are not the group's, crash leftovers
        // if it is the last commit.
        const SegmentPosition drained = p_.write_behind->drained_at();
        const bool drained_first = drained.segment < synced.segment ||
                                   (drained.segment == synced.segment && drained.offset < synced.offset);
        const SegmentPosition frontier = drained_first ? drained : synced;
        state->frontier_segment = frontier.segment;
        state->frontier_offset = frontier.offset;
        // Every byte the journal record will refer to is in the tier before it.
        if (p_.journal != nullptr) HIODSFS_TRY(p_.segs->push_to_tier(frontier));
        return Status::ok();
    }, reached_limit);
    // Logged once: the failure that stopped the store. With a journal, a
    // commit whose bytes could not be pushed leaves the store running (the
    // next commit tries again): logged once per run of such failures.
    const bool segments_stopped = !st && p_.stop_with_segments && p_.stop_with_segments();  // logged there
    const bool stopped = p_.journal == nullptr || !p_.meta->failure().is_ok();
    if (!st && st.err() == EIO && stopped && !segments_stopped && !commit_failed_.exchange(true) &&
        p_.log)
        p_.log("hiodsfs: " + st.message());
    if (!st && !stopped && !push_failing_.exchange(true) && p_.log)
        p_.log("hiodsfs: a commit failed and is tried again with the next: " + st.message());
    if (st) push_failing_.store(false);
    if (st && p_.meta->trim_resident()) resident_trims_.fetch_add(1, std::memory_order_relaxed);
    return st;
}

void Committer::round() {
    if (p_.meta->pending_ops() > 0) {
        // Counted by the group it commits: one an fsync committed
        // first, whose request woke this thread, is not counted again.
        bool reached_limit = false;
        const bool committed = commit_now(&reached_limit).is_ok();
        if (committed && reached_limit) ++early_commits_;  // errors resurface on fsync
        if (committed) maybe_snapshot();
        // Each metadata operation allocates and frees LMDB's ~3 MiB of
        // page lists, between other threads' allocations: the heap
        // keeps the freed holes resident, and more of them the longer
        // the daemon runs. Give their pages back, off any request's path.
        ::malloc_trim(0);
    }
}

}  // namespace hiodsfs
