// Compactor: gives back the space of dead chunks by rewriting segments.
//
// A sealed segment whose live payload (Db::kSegments) is below `threshold`
// of its file size (kIdleThreshold when reclaim may run at full speed) is
// compacted: its records are scanned, the ones a chunk
// record still points at are copied (verified reads) to the active segment
// in batches, then ONE metadata operation switches every copied chunk whose
// record still points at its old place to the copy, moves the live bytes
// between the segments' counters and drops the old segment's entry; the
// group commit that follows syncs the copies before the metadata (as every
// commit does), and only after it has returned is the old file deleted. A
// segment without live bytes is deleted at once (after a commit, so its
// zero count is durable first). The active segment is sealed when it
// qualifies too (and holds at least kMinSealBytes, or nothing live), so the
// tail of a large deleted file does not stay on disk.
//
// Crashes: before the commit the old segment is still referenced and intact
// (the copies are dead bytes); after it nothing refers to the old file, its
// entry says 0 live bytes, and the next pass deletes it. A segment is only
// ever deleted when a committed entry says it holds nothing live: one the
// metadata has no entry for is never touched.
// Concurrency: chunk ids never change, and a chunk freed or re-referenced
// while it is being copied is handled by the re-check under the switch (a
// copy of a chunk that died meanwhile is dead space). Readers that looked up
// the old location may find the file deleted: the engine's read path looks
// the chunk up again and reads the new place.
// Recompression (set_recompression): a chunk it moves that is stored weaker
// than the background compression (lz4, a lower zstd level, or as it is) is
// stored anew at that level, and a zstd chunk stored before the store had a
// dictionary is stored once with the newest (if that makes it no smaller,
// its record says the dictionary was tried, and it is not taken up again);
// and while reclaim may run at full speed, a
// sealed segment whose live chunks are a quarter or more encoded weaker is
// compacted for that alone (each segment is looked at once per background
// compression and dictionary: a look that finds it not worth it marks its
// metadata entry settled, so later opens skip it unread; the open one is
// sealed for it once it qualifies with kMinSealBytes / 4 or more stored
// weaker, and looked at again once what it gained since could make it
// qualify). A chunk stored as it is does not
// count: it may be one that does not compress, and copying it again would
// gain nothing.
// Thread-safety: one thread at a time calls step()/run_until_idle().
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "chunk/codec.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/records.h"
#include "meta/segment_entry.h"

namespace hiodsfs {

// Adds delta to a segment's live payload bytes in Db::kSegments (clamped at 0).
Status add_segment_live(Txn& t, SegmentId seg, std::int64_t delta);

struct CompactionStats {
    std::uint64_t segments_deleted = 0;
    std::uint64_t segments_compacted = 0;  // of those, segments whose live chunks were copied
    std::uint64_t chunks_moved = 0;
    std::uint64_t bytes_moved = 0;
    std::uint64_t bytes_freed = 0;  // file bytes of deleted segments
    std::uint64_t chunks_recompressed = 0;
};

class Compactor {
public:
    // Live fraction below which a segment is compacted by default: the copy
    // costs at most as much writing as it frees (see docs/architecture.md).
    static constexpr double kDefaultThreshold = 0.5;
    // ... and while the reclaimer may run at full speed (the foreground is
    // idle, or there is no goal): the space then comes back to within about
    // a tenth of the live data, at the cost of more copying.
    static constexpr double kIdleThreshold = 0.9;
    // Bytes copied per step, so a step stays short and can be paced.
    static constexpr std::uint64_t kBatchBytes = 4ull << 20;
    // The active segment is sealed for compaction when it qualifies and
    // holds at least this much, or holds nothing live at all.
    static constexpr std::uint64_t kMinSealBytes = 1ull << 20;

    // commit makes the open metadata group durable (segments synced first).
    // threshold <= 0 switches compaction off (fully dead segments are still
    // deleted).
    Compactor(MetaStore* meta, SegmentStore* segs, std::function<Status()> commit,
              double threshold = kDefaultThreshold);
    // Asked before copying a segment's live bytes: false when the file
    // system cannot take them now (a full disk: whole dead segments, which
    // need no copy, are still deleted, and copying waits for the space).
    void set_room_for(std::function<bool(std::uint64_t bytes)> room_for) {
        room_for_ = std::move(room_for);
    }
    // Chunks it moves are stored with `to` when they are weaker (none: as
    // they are); dicts (the store's, outliving this) decodes them, and an
    // encrypted store's cipher opens and seals them.
    void set_recompression(const Compression& to, const DictionarySet* dicts, const ChunkCipher* cipher = nullptr) {
        recompress_to_ = to;
        dicts_ = dicts;
        cipher_ = cipher;
    }

    // One bounded piece of work: pick a segment and scan it, or copy one
    // batch, or switch, commit and delete. *did_work false: nothing to do.
    // full_speed: the throttle lets reclaim run flat out, so segments below
    // max(threshold, kIdleThreshold) live qualify.
    Status step(bool full_speed, bool* did_work);
    // Totals since construction (may be read while another thread steps).
    CompactionStats stats() const;
    // Segments pick_weak has yet to look at (0 without recompression):
    // sealed ones, and the open one when it would look at it again.
    // status.json's recompress_pending_segments. From any thread.
    Status recompress_pending(std::uint64_t* segments);
    // Chunk copies of a job are made and the switch is next (for tests that
    // crash at that point).
    bool copies_done() const { return job_ && job_->next == job_->moves.size(); }
    // Drops the job in progress (the reclaimer stopped: a close). The copies
    // it made are dead: they go on the dead-bytes counter, in the open group.
    Status abandon_job();

private:
    struct Move {
        ChunkId chunk = 0;
        ChunkLocation from, to;
        std::uint32_t length = 0;  // the chunk's bytes
        bool recompress = false;   // stored weaker than recompress_to_
        std::uint8_t codec = 0;    // how `to` holds it, if encoded
    };
    struct Job {
        SegmentId seg = 0;
        std::uint64_t file_bytes = 0;
        std::uint64_t payload_bytes = 0;  // every record's payload in the segment
        std::vector<Move> moves;          // records a chunk pointed at when scanned
        std::size_t next = 0;             // first move not yet copied
    };

    Status pick(double threshold, bool* found);
    // A sealed segment worth compacting for its weakly stored chunks: one
    // not looked at yet is looked at (*found: there was work).
    Status pick_weak(bool* found);
    // The live payload bytes of a segment, and those of its chunks stored
    // weaker than recompress_to_ (a scan of its headers and a lookup each).
    Status weak_bytes(SegmentId seg, std::uint64_t* live, std::uint64_t* weak, bool* present);
    // Whether chunk rec is stored weaker than recompress_to_ (and may be
    // stored anew: fingerprinted, not damaged, encoded).
    bool weaker(const ChunkRecord& rec) const;
    // A sealed segment pick_weak has not looked at, on this host's disk.
    bool worth_a_look(SegmentId seg, SegmentId active);
    // Whether the open segment (active_size bytes) is worth a look: it
    // could qualify for sealing were all it gained since the last look
    // (this open's, or a settled mark's) stored weaker, or all of it when
    // never looked at. From any thread.
    Status active_worth_a_look(SegmentId active, std::uint64_t active_size, bool* look);
    // Whether a sealed segment with these live and weakly stored bytes is
    // compacted for recompression (a quarter or more), and whether the open
    // one is sealed for it (that, and kMinSealBytes / 4 or more).
    static bool worth_recompressing(std::uint64_t live, std::uint64_t weak);
    static bool worth_sealing(std::uint64_t live, std::uint64_t weak);
    // What a segment looked at now is marked settled with (weak: 0).
    SettledMark settled_mark_now() const;
    // Whether seg's entry says an earlier look found it settled under the
    // present background compression and dictionary, and the weak bytes it
    // found then are still under a quarter of its live bytes.
    Status settled_now(Txn& t, SegmentId seg, bool* settled);
    // Records in seg's entry what a look that found `live` bytes there
    // found weak (unless its live bytes have changed since).
    Status mark_settled(SegmentId seg, std::uint64_t live, const SettledMark& mark);
    // The id of the store's newest dictionary (0: none yet).
    std::uint32_t newest_dictionary() const;
    // The payload m.to gets: m.from's, or its chunk stored anew.
    void recompress(Move& m, std::vector<std::uint8_t>& payload, bool* encoded);
    Status start_job(SegmentId seg, std::uint64_t file_bytes);
    Status copy_batch();
    Status finish_job();
    // The payload bytes of the chunk records in `seg` (a scan of its
    // headers): what SpaceCounters::dead_bytes counted of it once it is dead.
    Status chunk_payload(SegmentId seg, std::uint64_t* bytes);
    Status delete_segment(SegmentId seg, std::uint64_t file_bytes, std::uint64_t dead_payload);
    // Removes a segment that committed metadata says is dead, then its entry.
    Status remove_file(SegmentId seg, std::uint64_t dead_payload);
    void give_up(SegmentId seg);

    MetaStore* meta_;
    SegmentStore* segs_;
    std::function<Status()> commit_;
    std::function<bool(std::uint64_t)> room_for_;
    double threshold_;
    std::optional<Job> job_;
    // Segments that could not be compacted (unreadable chunk, live bytes the
    // scan did not find): left alone until the store is reopened.
    std::set<SegmentId> skip_;
    Compression recompress_to_;
    const DictionarySet* dicts_ = nullptr;
    const ChunkCipher* cipher_ = nullptr;
    // Guards looked_at_, skip_ and active_looked_'s changes
    // (recompress_pending reads them from another thread; the stepping
    // thread reads them without it).
    std::mutex looked_mu_;
    std::set<SegmentId> looked_at_;  // by pick_weak, this open, since looked_with_dictionary_
    std::uint32_t looked_with_dictionary_ = 0;
    // The open segment pick_weak last looked at: its size and weakly
    // stored bytes then.
    struct ActiveLook {
        SegmentId seg = 0;
        std::uint64_t size = 0, weak = 0;
    };
    ActiveLook active_looked_;
    std::atomic<std::uint64_t> segments_deleted_{0}, segments_compacted_{0}, chunks_moved_{0},
        bytes_moved_{0}, bytes_freed_{0}, chunks_recompressed_{0};
};

}  // namespace hiodsfs
