// The metadata of a tiered store, kept in its tier (RADOS) next to the
// segments, so that a host that lost the store directory (cache_dir) can
// rebuild it from the tier alone. E is the epoch of the holder that wrote
// the object (SegmentTier::epoch(), 8 hex digits), so two holders never
// write one name:
//   journal.SSSSSSSSSSSSSSSS.E   records of group commits (meta/journal.h),
//                                appended; S: the first record's seq (hex).
//                                A new object every kJournalObjectBytes and
//                                at every open, so no append of an earlier
//                                run (or holder) can land after the records
//                                of a later one.
//   meta.SSSSSSSSSSSSSSSS.E.PPPP a snapshot of the metadata as of record S,
//                                in parts of kSnapshotPartBytes
//   manifest.E.SSSSSSSSSSSSSSSS  the snapshot's manifest: seq, parts, size,
//                                CRC; written after its parts, so it never
//                                names a snapshot that is not whole. The
//                                newest holder's newest one is the snapshot.
//   format                       the FORMAT record (chunking, tier)
// A store made before holder epochs has journal.S, meta.S.PPPP and the
// manifest "meta": read as the objects of epoch 0, superseded (and so
// deleted) by the first snapshot of a holder with an epoch.
// Recovery reads the snapshot the manifest names (or starts from an empty
// environment without one) and replays the records after it in order.
// Thread-safety: TierJournal's methods may be called from any thread; the
// functions are for one thread at a time on a store.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_tier.h"
#include "meta/journal.h"
#include "meta/meta_store.h"

namespace hiodsfs {

constexpr std::uint64_t kJournalObjectBytes = 4u << 20;
constexpr std::uint64_t kSnapshotPartBytes = 32u << 20;
// A background snapshot follows this many bytes of journal records.
constexpr std::uint64_t kSnapshotJournalBytes = 64u << 20;

// Appends each group's record to the current journal object.
class TierJournal : public MetaJournal {
public:
    explicit TierJournal(SegmentTier* tier) : tier_(tier) {}
    Status write(std::uint64_t seq, std::string_view record) override;
    // Bytes of records written since the last snapshot (take_snapshot resets it).
    std::uint64_t bytes_since_snapshot();
    // The current object and the last seq written to it ("" / 0 before the first).
    std::string current_object();
    std::uint64_t last_seq();
    void snapshot_taken();
    // Whether the tier's metadata is as this journal left it: no snapshot
    // past `committed` and no record after it but the appends of this
    // journal that failed since (and may have landed). Asked after the
    // tier's lock lapsed and was taken again: anything else is another
    // writer's, which had the store meanwhile.
    Status check_unchanged(std::uint64_t committed);

private:
    // An append that failed since the last one that did not.
    struct Attempt {
        std::uint64_t seq = 0;
        std::string super;
        std::size_t ops_bytes = 0;
    };
    SegmentTier* tier_;
    std::mutex mu_;
    std::string object_;
    std::uint64_t object_bytes_ = 0, last_seq_ = 0, since_snapshot_ = 0;
    std::vector<Attempt> failed_;
};

// The journal object whose first record is first_seq, of the holder of
// `epoch` (0: the name before holder epochs).
std::string journal_object_name(std::uint64_t first_seq, std::uint32_t epoch);

// The journal records after `after`, in order, from the tier. *bytes keeps
// the objects they point into. A record torn or damaged in the last object
// ends them (it was never acknowledged: its commit failed); damage before
// the last object, or a gap in the seqs, is EUCLEAN. *last is the seq of
// the last record there is (after, if none). *epochs (if given) gets the
// epoch of the holder that wrote each record.
Status read_journal(SegmentTier* tier, std::uint64_t after, std::vector<std::vector<char>>* bytes,
                    std::vector<JournalRecord>* out, std::uint64_t* last,
                    std::vector<std::uint32_t>* epochs = nullptr);

// The seq of the snapshot the tier's manifest names (and the epoch of the
// holder that took it); false when there is none.
Status snapshot_seq(SegmentTier* tier, std::uint64_t* seq, bool* found,
                    std::uint32_t* epoch = nullptr);

// Whether the tier holds this store's metadata (a snapshot or journal
// objects; a format record alone is a creation that never committed).
Status tier_has_metadata(SegmentTier* tier, bool* found);

// Rebuilds `meta_dir` (absent or empty) from the tier: the snapshot, then
// every record after it. *summary says what was recovered, in a few words.
Status recover_metadata(Env* env, SegmentTier* tier, const std::string& meta_dir, std::uint64_t map_bytes,
                        std::string* summary);

// Makes the store directory `dir` (without FORMAT and committed metadata
// of its own) the tier's copy of the store: removes what an interrupted
// recovery or creation left (anything else there: EEXIST, not a store),
// recovers meta/ through meta.recover/, then writes FORMAT from the tier's
// record. *summary as recover_metadata's.
Status recover_store_dir(Env* env, SegmentTier* tier, const std::string& dir, std::uint64_t map_bytes,
                         std::string* summary);

// Metadata objects the snapshot of record `seq` by the holder of `epoch`
// makes superfluous: parts of other snapshots, other manifests, and
// journal objects whose every record it holds (but the newest object,
// which later records may still go to). put_snapshot deletes them; a crash
// before that leaves them for the next snapshot.
Status superseded_objects(SegmentTier* tier, std::uint64_t seq, std::uint32_t epoch,
                          std::vector<std::string>* out);

// What catch_up_from_tier did.
struct CatchUp {
    std::uint64_t replayed = 0;  // records replayed
    // Some were written by another holder than the one that wrote the
    // directory's own last record (or that one is no longer in the journal
    // to tell): another host went on with the store meanwhile.
    bool foreign = false;
};

// Replays onto an open store (no journal set, nothing uncommitted) the
// records the tier holds after its committed seq.
// EUCLEAN, saying what to do, when the tier's copy is not a continuation
// of this one (older than the tier's snapshot, or newer than the tier).
Status catch_up_from_tier(SegmentTier* tier, MetaStore& meta, const std::string& store_dir,
                          CatchUp* out);

// Uploads a snapshot of meta's committed state (copied to tmp_path first),
// then its manifest, then deletes older snapshots and the journal objects
// it covers wholly (with `closing`, the current one too: nothing more is
// written to it). *seq: the snapshot's.
Status put_snapshot(Env* env, SegmentTier* tier, MetaStore& meta, TierJournal* journal,
                    const std::string& tmp_path, bool closing, std::uint64_t* seq,
                    std::uint64_t part_bytes = kSnapshotPartBytes);

// The FORMAT record in the tier, the object kFormatObject.
inline constexpr const char* kFormatObject = "format";
Status put_format(SegmentTier* tier, const std::string& text);
Status get_format(SegmentTier* tier, std::string* text);

}  // namespace hiodsfs
