// SegmentStore: chunk bytes in append-only segment files of bounded size
// under STORE/segments/. Each record is self-describing:
//   header (24 B): magic u32 | payload length u32 | chunk id u64 |
//                  crc32c(payload) u32 | crc32c(first 20 header bytes) u32
//   payload
// The magic says how the payload holds the chunk: "HDSG", as it is; "HDSZ",
// encoded (compressed; the payload's prefix says how, chunk/codec.h). The
// store neither compresses nor decodes: callers do, and the checksum covers
// the payload as stored.
// so a torn tail left by a crash is detected on open and ignored (appends
// resume after the last intact record). A segment is never modified once
// sealed; whole segments are removed by compaction.
// With a SegmentTier (segment_tier.h), a sealed segment is uploaded by a
// background thread, and the directory becomes a bounded cache in front of
// the tier: uploaded segments are deleted locally, least recently used
// first, while the directory holds more than cache_bytes, and a read of one
// that is not there fetches it back whole.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_tier.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// A point in the append order: byte `offset` of segment `segment`.
struct SegmentPosition {
    SegmentId segment = 0;
    std::uint64_t offset = 0;
    bool operator<(const SegmentPosition& o) const {
        return segment != o.segment ? segment < o.segment : offset < o.offset;
    }
};

struct SegmentStoreOptions {
    std::uint64_t max_segment_bytes = 64ull << 20;
    // Appends are gathered in memory and written in blocks of this size.
    std::size_t write_buffer_bytes = 1u << 20;
    // Segment files kept open for reads (least recently used are closed).
    std::size_t max_open_segments = 256;
    // Opens without changing anything: no directory or segment is created,
    // a torn tail is left in place (reads and scans still check every
    // record), and append/flush/remove fail with EROFS.
    bool read_only = false;
    // How far committed metadata may refer (SuperState's frontier; segment
    // 0: unknown). Those bytes are never cut off or appended over: open
    // fails with EUCLEAN when the files no longer hold them, and damage
    // inside them is kept and appending goes on in a new segment.
    SegmentPosition committed;
    // Where sealed segments go (not owned; outlives the store), or null:
    // every segment stays in the directory.
    SegmentTier* tier = nullptr;
    // With a tier: the size the directory is brought back under by
    // deleting uploaded segments (the active segment, segments not yet
    // uploaded and the one read last always stay).
    std::uint64_t cache_bytes = 1ull << 30;
    // With a tier: a fetch brings a segment back, and an upload sends it,
    // this many bytes at a time (their memory; tests make it small).
    std::size_t fetch_piece_bytes = 8u << 20;
    std::size_t upload_piece_bytes = 8u << 20;
    // With a tier: told of a failed upload (retried until it works), once
    // per run of failures; may be empty.
    std::function<void(const std::string&)> log;
    // With a tier and read_only (hiodsfs-fsck): a segment the directory
    // does not hold is read from the tier into memory, the last one only,
    // instead of fetched into the directory, which stays as it was.
    bool tier_reads_in_memory = false;
    // With a tier that already held the store (not one just given it),
    // whether committed metadata has live chunks in a segment. A local
    // segment the tier lacks is then either one whose object went missing
    // (live chunks: uploaded again, and logged) or one no record refers to
    // (every committed byte reaches the tier before its commit): dropped,
    // never uploaded. Null: every local segment the tier lacks is uploaded.
    std::function<bool(SegmentId)> has_live_chunks;
    // With a tier: another holder's journal records were replayed at open,
    // and this is the directory's own frontier from before them. The
    // tier's copy of every segment at or past it is the segment, over a
    // longer local one (whose extra bytes no record of the store refers
    // to). Segment 0: the rule does not apply.
    SegmentPosition tier_wins_from;
};

// What the tier and the local cache in front of it hold and did.
struct SegmentTierStats {
    std::string where;                   // SegmentTier::describe()
    std::uint64_t tier_segments = 0, tier_bytes = 0;
    std::uint64_t cached_segments = 0, cached_bytes = 0;  // sealed ones in the directory
    std::uint64_t cache_limit = 0;
    std::uint64_t pending_uploads = 0;
    std::uint64_t uploads = 0, upload_failures = 0, evictions = 0;
    std::uint64_t cache_hits = 0;    // reads of a segment served by the directory
    std::uint64_t cache_misses = 0;  // reads that fetched their segment from the tier
    std::uint64_t fetched_bytes = 0;
    std::string upload_error;        // the last failure, while uploads fail
};

struct SegmentRecord {
    SegmentId segment = 0;
    std::uint64_t header_offset = 0;
    ChunkLocation location;  // payload
    ChunkId chunk = 0;
    bool payload_ok = false;  // crc32c of the payload matches (only when verified)
};

class SegmentStore {
public:
    static constexpr std::uint32_t kRecordMagic = 0x48445347;         // "HDSG"
    static constexpr std::uint32_t kEncodedRecordMagic = 0x4844535a;  // "HDSZ"
    static constexpr std::uint32_t kHeaderBytes = 24;

    // Opens (creating if needed) the segment directory `dir`. Scans the
    // newest segment and drops a torn tail. If it is damaged in the middle
    // instead (an intact record follows the damage), or the damage lies in
    // bytes options.committed covers, nothing is cut and appending continues
    // in a new segment.
    static Status open(Env* env, const std::string& dir, const SegmentStoreOptions& options,
                       std::unique_ptr<SegmentStore>* out);
    ~SegmentStore();
    // Makes segment `id` of directory `dir`, empty, with its file and its
    // directory entry durable (EEXIST if it is there): hiodsfs-fsck
    // --repair starts the stream anew after a lost segment with it, so no
    // append reuses an id or offset the metadata referred to.
    static Status create_empty(Env* env, const std::string& dir, SegmentId id);

    // Appends one chunk. The location is valid at once for read(); the bytes
    // are durable only after sync(). A full buffer is written by the store's
    // flusher thread while appends go on into the next one (an append waits
    // only when that one is full too). If a write fails (ENOSPC, EIO) the
    // records stay readable from memory and are written again by the next
    // hand-off, flush() or sync(), which return the error if it fails again.
    Status append(ChunkId chunk, const void* data, std::uint32_t len, ChunkLocation* out);
    // The same, with payload_crc = crc32c(data, len) computed by the caller
    // (a write computes it beside the chunk's fingerprint, on every core,
    // so the serial store of a request's chunks does not).
    // encoded: the payload is a chunk/codec.h encoding (an "HDSZ" record).
    Status append(ChunkId chunk, const void* data, std::uint32_t len, std::uint32_t payload_crc,
                  bool encoded, ChunkLocation* out);
    // Reads the whole payload of a record into out (loc.length bytes) and
    // verifies its checksum, chunk id and kind (loc.encoded); EIO with a
    // clear message otherwise.
    // *damaged (if given) tells a failure of the record itself (checks that
    // fail, bytes or segment gone) from an I/O error that may pass.
    Status read(const ChunkLocation& loc, ChunkId chunk, void* out, bool* damaged = nullptr);
    // Reads n records that lie back to back in one segment (each header
    // right after the previous payload, as a file written in order stores
    // them) with one system call, each payload straight into dests[i]
    // (locs[i].length bytes), and verifies each as read() does. A sequential
    // read then costs a system call per request, not per chunk, and no copy
    // through a buffer. Records not back to back, or still in the write
    // buffer, are refused (EINVAL, EAGAIN) before anything is read. On any
    // failure the dests may hold anything: the caller reads those records
    // again with read(), whose errors say which record failed and how.
    static constexpr std::size_t kMaxRunBytes = 4u << 20;
    Status read_run(const ChunkLocation* locs, const ChunkId* chunks, std::size_t n, char* const* dests);
    // Whether a record at `next` follows the one at `prev` directly in the
    // same segment, so the two can be read in one run.
    static bool adjacent(const ChunkLocation& prev, const ChunkLocation& next) {
        return next.segment == prev.segment && next.offset == prev.offset + prev.length + kHeaderBytes;
    }
    // Checks, without reading the payload, that a record of this chunk id and
    // length starts at loc and that the file holds all of it; EIO otherwise.
    // (For hiodsfs-fsck; read() also verifies the payload's checksum.)
    Status check_header(const ChunkLocation& loc, ChunkId chunk);
    // Makes every record appended so far durable (data, then new directory
    // entries). Cheap when nothing was appended since the last sync. After a
    // failed fdatasync, append/flush/sync keep failing until the store is
    // reopened: the kernel may have dropped the unsynced pages, so a later
    // sync could not promise anything. Reads still work. *synced (if given)
    // is the append position this sync made durable: everything appended
    // before the call lies before it.
    Status sync(SegmentPosition* synced = nullptr);
    // Makes every record before `upto` durable: returns at once when a
    // sync since made them so, else syncs as sync() does. Callers that
    // appended concurrently share one sync this way, even while other
    // appends keep coming.
    Status sync_through(const SegmentPosition& upto);
    // Writes buffered appends to the files without syncing.
    Status flush();
    // Why the store stopped (ok while it runs): a failed fdatasync, or a
    // write or new segment the file system refused for a reason that does
    // not pass (EPERM of a file made immutable, EROFS). A failure for want
    // of room or an I/O error of a write leaves the bytes in memory, written
    // again by the next hand-off, flush() or sync(). Once stopped, append,
    // flush and sync fail with EIO (this status) until the store is reopened.
    Status failure();

    // Every segment with its file size in bytes (for the active segment,
    // appended bytes still in the write buffer are counted too; with a
    // tier, segments held only there are listed with their size there).
    Status list_segments(std::vector<std::pair<SegmentId, std::uint64_t>>* out);
    // Calls fn for each intact record of a segment in order; stops at a torn
    // or corrupt header. verify_payload also checks each payload's crc32c.
    Status scan(SegmentId segment, bool verify_payload,
                const std::function<bool(const SegmentRecord&)>& fn);
    // Deletes a sealed segment (never the one being appended to), in the
    // tier first if it holds it, then the local file.
    Status remove(SegmentId segment);
    // Seals the active segment, if it holds any record, and starts a new
    // one: compaction can then take the old one.
    Status seal();
    // Sum of the segment files in the directory (as `du` counts them; with
    // a tier, segments held only there are not counted).
    std::uint64_t disk_bytes();
    // With a tier: uploads every sealed segment still waiting, one attempt
    // each, after the background uploader has stopped; the first failure
    // (those segments stay local and are uploaded at the next open).
    // Without one: ok.
    Status finish_uploads();
    // With a tier: writes the bytes before `upto` (a commit's frontier,
    // synced) of every segment not yet put whole into the tier, by range,
    // so a metadata journal record that refers to them never refers to
    // bytes only this machine holds. Without one: ok.
    Status push_to_tier(SegmentPosition upto);
    // False without a tier.
    bool tier_stats(SegmentTierStats* out);
    // Whether the directory holds the segment, so reading it costs no
    // transfer from the tier (always, without a tier, for one it lists).
    bool in_directory(SegmentId segment);
    SegmentId active_segment();
    // Where the next append goes: everything appended so far lies before it.
    SegmentPosition append_position();

private:
    struct Impl;
    explicit SegmentStore(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace hiodsfs
