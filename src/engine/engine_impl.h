// EngineImpl, the engine behind include/hiodsfs/engine.h, internal to
// libhiodsfs. Its definitions are split by job:
//   engine.cc         opening and closing, the control loop
//   recovery.cc       what an open finds and puts right: a lost FORMAT,
//                     the fsync log's records, segment files, crash leftovers
//   status.cc         status for hiodsfs-stat, space figures (statfs)
//   namespace_ops.cc  metadata helpers, namespace operations, extended
//                     attributes
//   write_path.cc     streams, the inline and deferred write paths
//   read_path.cc      reads
//   file_ops.cc       truncate, flush, fsync, fallocate, clone and seek
//   background.cc     the background pass's target (dirty queue,
//                     re-chunking) and space reclaim (purge, compaction)
// Its parts with state of their own are classes it owns: StreamTable
// (stream_table.h, the open write streams), WriteBehind (write_behind.h,
// deferred writes' metadata held and applied in batches), the Committer
// (commit.h: group commits, fsync's log records, snapshots), SpaceAdmission
// (space_admission.h), the IntervalThreads (interval_thread.h) that
// run the committer and the control loop, and the DictionaryTrainer
// (dictionary_trainer.h).
//
// Lock order: Stream::mu, then WriteBehind's raw_ids_mu_, then the
// MetaStore lock (a Txn), then WriteBehind's held_mu_, PendingDirty::mu,
// pins_mu_ or WriteErrors' own (write_behind.h); the Committer's
// commit_mu_ before the MetaStore lock, never under a Stream::mu.
#pragma once

#include "hiodsfs/engine.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "dedup/background_pass.h"
#include "dedup/reclaimer.h"
#include "engine/chunk_content.h"
#include "engine/chunk_index.h"
#include "engine/commit.h"
#include "engine/compaction.h"
#include "engine/dictionary_trainer.h"
#include "engine/engine_test_hooks.h"
#include "engine/history_recorder.h"
#include "engine/inode_ops.h"
#include "engine/interval_thread.h"
#include "engine/meta_tier.h"
#include "engine/pending_dirty.h"
#include "engine/quarantine.h"
#include "engine/sealed_tier.h"
#include "engine/space_admission.h"
#include "engine/space_budget.h"
#include "engine/store_layout.h"
#include "engine/stream_table.h"
#include "engine/write_behind.h"
#include "engine/write_errors.h"
#include "chunk/fingerprint.h"
#include "common/parallel_loop.h"
#include "control/mode_controller.h"
#include "meta/chunk_table.h"
#include "meta/dirty_queue.h"
#include "meta/extent_map.h"
#include "meta/history.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

// A write this far ahead of its file's stream, while the file is being
// written sequentially, waits for the requests before it (wait_for_gap),
// at most kReorderWait.
inline constexpr std::uint64_t kReorderWindow = 16 << 20;
inline constexpr auto kReorderWait = std::chrono::milliseconds(50);
// The pass lets writes waiting for a file's lock go before each of its
// records, waiting at most this long for them (rechunk).
inline constexpr auto kYieldToWriters = std::chrono::milliseconds(10);
// A sweep of the pass reads this much at a time, and may stop between
// two such steps for the throttle or a request (rechunk_locked).
inline constexpr std::uint64_t kSweepStep = 1u << 20;
// A record whose cut lies further back than this over raw bytes waits for
// the records of those bytes (rechunk_locked).
inline constexpr std::uint64_t kSweepReach = 4u << 20;
// A read is planned this many times at most when chunks of its plan were
// freed before it read them (read_locked).
inline constexpr int kReadPlans = 4;
// A request at least this large that is stored at once has its chunks
// hashed by a helper while the rest of it is cut (feed).
inline constexpr std::size_t kHashWhileCutting = 64 * 1024;
// Old data is re-read in pieces of at most this size while re-chunking.
inline constexpr std::uint64_t kRechunkPiece = 256 * 1024;
// Chunks back to back in a segment are read with one pread of at most this
// much (a read request is at most 1 MiB).
inline constexpr std::uint64_t kReadRunBytes = 1u << 20;

inline bool all_zero(const std::uint8_t* p, std::size_t n) {
    // Compare 8 bytes at a time; chunks are large, and most are not zero.
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        if (w != 0) return false;
    }
    for (; i < n; ++i)
        if (p[i] != 0) return false;
    return true;
}

// What a read found in the metadata: the chunk pieces that cover
// [off, off + n), in file order; the gaps between them are holes.
struct ReadPlan {
    struct Piece {
        std::uint64_t file_off;
        std::uint32_t chunk_off, length;
        ChunkId chunk;
        ChunkLocation loc;
        std::uint32_t chunk_length;  // the chunk's bytes (loc.length is its payload's)
        // The piece is the whole chunk, stored as it is: read straight into
        // the request's buffer.
        bool whole() const { return chunk_off == 0 && length == chunk_length && !loc.encoded; }
    };
    std::uint64_t off = 0;
    std::size_t n = 0;
    std::vector<Piece> pieces;
};

// What re-chunking after an overwrite finds at pos (EngineImpl::realign):
// whether it may stop there, and else the old bytes it chunks on through.
struct RealignStep {
    std::uint64_t pos = 0;
    bool past_end = false;           // pos is at or past the file's end
    bool hole_at_pos = false;        // a hole starts at pos: a cut point
    bool at_boundary = false;        // an old extent (or a hole) starts at pos
    bool next_starts_chunk = false;  // the extent at pos begins a chunk the chunker cut
    std::uint64_t piece_end = 0;     // the piece is [pos, piece_end)
    bool planned = false;            // plan holds the piece's lookups
    ReadPlan plan;
};

class EngineImpl final : public Engine, private DedupTarget, private ReclaimTarget {
public:
    ~EngineImpl() override {
        if (!closed_) (void)close();
    }

    Status init(const EngineOptions& options, const EngineHooks& hooks);

    Status close() override;
    // Drops everything not yet committed and closes the store, as a crash
    // would (a failed open; tests: abandon_engine).
    void abandon();
    Status check_tier_unchanged() override;
    void stop(const std::string& why) override;
    // If the segment store stopped (a failed fdatasync, or a write its files
    // refused), stops the engine with its reason, logged once: nothing more
    // is taken that could never be made durable. True if it had. Never
    // under the metadata lock (a Txn).
    bool stop_with_segments();
    // The tier's name for FORMAT ("" without one), and whether the store's
    // FORMAT lets this open use it.
    std::string tier_name() const;
    Status check_tier(const StoreFormat& format) const;
    std::string backend_;  // "local", or where the sealed segments live
    const ChunkingParams& chunking() const override { return chunking_; }

    Status lookup(InodeId parent, std::string_view name, Attr* out) override;
    Status getattr(InodeId ino, Attr* out) override;
    Status setattr(InodeId ino, const SetAttr& changes, Attr* out) override;
    Status create(InodeId parent, std::string_view name, const NewNode& node, Attr* out) override;
    Status readlink(InodeId ino, std::string* target) override;
    Status link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out) override;
    Status unlink(InodeId parent, std::string_view name) override;
    Status rmdir(InodeId parent, std::string_view name) override;
    Status rename(InodeId parent, std::string_view name, InodeId new_parent,
                  std::string_view new_name, unsigned flags) override;
    Status readdir(InodeId dir, std::vector<DirEntry>* out) override;
    Status parent_of(InodeId dir, InodeId* out) override;
    void pin(InodeId ino, std::uint64_t count) override;
    void unpin(InodeId ino, std::uint64_t count) override;

    Status read(InodeId ino, std::uint64_t offset, std::size_t len, void* out,
                std::size_t* got) override;
    Status write(InodeId ino, std::uint64_t offset, const void* data, std::size_t len,
                 WriteTimes times = WriteTimes::kSet) override;
    using Engine::flush;
    using Engine::fsync;
    Status flush(InodeId ino, WriteErrorCursor* seen) override;
    Status fsync(InodeId ino, bool datasync, WriteErrorCursor* seen) override;
    WriteErrorCursor write_error_cursor(InodeId ino) override { return write_errors_.sample(ino); }
    Status sync_all() override;
    Status fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len) override;
    Status clone_range(InodeId src, std::uint64_t src_off, InodeId dst, std::uint64_t dst_off,
                       std::uint64_t len, std::uint64_t* copied) override;
    Status seek(InodeId ino, std::uint64_t offset, SeekWhence whence, std::uint64_t* out) override;

    Status setxattr(InodeId ino, std::string_view name, std::string_view value,
                    int flags) override;
    Status getxattr(InodeId ino, std::string_view name, std::string* value) override;
    Status listxattr(InodeId ino, std::vector<std::string>* names) override;
    Status removexattr(InodeId ino, std::string_view name) override;

    Status run_background() override;
    Status run_reclaim() override;
    Status train_dictionary(bool* trained) override;
    void set_deferred(bool deferred) override { deferred_.store(deferred); }
    bool deferred() const override { return deferred_.load(); }
    const ModeController* controller() const override { return controller_.get(); }
    std::string status_json() override;

    Status statfs(FsStats* out) override;
    std::uint64_t data_room() override;
    Status counters(SpaceCounters* out) override;

private:
    // ---- DedupTarget (the background pass) ----
    Status take_dirty(std::size_t max, std::vector<DirtyRecord>* out) override;
    Status rechunk(InodeId ino, std::uint64_t offset, std::uint64_t length) override;
    Status finish_dirty(const std::vector<DirtyRecord>& done) override;
    Status set_aside(const std::vector<DirtyRecord>& records, const Status& why) override;
    // ---- work set aside (background.cc; engine/quarantine.h) ----
    // Whether one file's failed work is set aside: not while the store has
    // stopped (nothing is written then), nor for a failure that passes.
    bool may_set_aside(const Status& why);
    // A deleted file that could not be freed (why): its orphan record is
    // marked with the reason, so the reclaimer goes on with the others;
    // why itself if it is not set aside.
    Status set_aside_orphan(InodeId ino, const Status& why);
    // At a read-write open: the dirty records set aside before go back
    // into the queue, to be tried again (marked orphans are, by the open's
    // freeing of every orphan).
    Status requeue_set_aside();
    // No dirty record has a number below this (take_dirty starts there).
    std::atomic<std::uint64_t> dirty_floor_{0};
    // What is set aside now, for status.json: dirty records, marked
    // orphans, and the reason of one of them ("" if none).
    void count_set_aside(Txn& t, std::uint64_t* dirty, std::uint64_t* deletes, std::string* why);
    Status rechunk_locked(InodeId ino, Stream& s, std::uint64_t offset, std::uint64_t length,
                          bool* gone);
    // The speed the pass and the reclaimer go by (the throttle's).
    double background_speed() const {
        return hooks_.background_speed ? hooks_.background_speed() : controller_->background_speed();
    }
    // The nice value background work runs at: the option's, or 0 while the
    // backlog is over its limit (the pass then takes the foreground's CPU).
    int background_nice() const { return controller_->over_limit() ? 0 : opts_.background_nice; }
    // A sweep stopped for the throttle or a request: the stream's bytes (all
    // still mapped) are dropped, and what is left of the record's range
    // [offset, end), from s's last cut, is queued again.
    Status requeue_sweep(InodeId ino, Stream& s, std::uint64_t offset, std::uint64_t end);
    // Queues [from, end) of ino again (a record of its own, at the back).
    Status requeue_range(InodeId ino, std::uint64_t from, std::uint64_t end);

    // ---- write-behind of deferred writes (write_behind_) ----
    // The deferred path: a write's bytes are stored as they are (no
    // fingerprint, no lookup) and its metadata held back.
    Status hold_write(InodeId ino, Stream& s, std::uint64_t off, const std::uint8_t* data,
                      std::size_t len, const struct timespec* touched);
    // Raw records are bounded like chunks so reads of them stay cheap.
    std::size_t raw_piece_bytes() const {
        return std::max<std::size_t>(chunking_.max_size, 64 * 1024);
    }

    // ---- ReclaimTarget (the reclaimer; see reclaim.cc) ----
    Status reclaim_step(bool* did_work) override;
    // Frees part of one deleted file that nothing pins any more; one that
    // fails is set aside.
    Status purge_step(bool* did_work);
    // The same without setting aside: *ino is the file it worked on (0: none).
    Status purge_next(InodeId* ino);
    // nlink is zero and nothing pins ino: free it now, or queue a large file
    // for the reclaimer.
    Status free_inode(Txn& t, InodeId ino);
    // Reads chunk id (its `length` bytes) at loc, or where compaction has
    // moved it meanwhile; decodes it if it is stored encoded.
    // *damaged as read_chunk_content says it.
    // *freed (if given): the read failed and the chunk has no record any
    // more, freed after the caller looked it up (ids are never reused).
    Status read_chunk(ChunkId id, ChunkLocation loc, std::uint32_t length, std::uint8_t* out,
                      bool* damaged = nullptr, bool* freed = nullptr);
    // A chunk whose record failed its checks (checksum, header, or bytes
    // gone; not a passing I/O error) is flagged kDamaged and leaves the
    // fingerprint index: never shared again.
    void mark_damaged(ChunkId id);

    // ---- chunks and an inode's lifetime (namespace_ops.cc) ----
    // What a new chunk's record holds, prepared before the metadata
    // operation: its payload (the chunk's bytes, or their encoding) and
    // the payload's crc32c.
    struct ChunkPayload {
        const std::uint8_t* data = nullptr;
        std::uint32_t length = 0;
        std::uint32_t crc = 0;  // of the payload; 0 in an encrypted store, whose CRC is of what is sealed
        bool encoded = false;
        std::uint8_t codec = 0;  // encoded: ChunkRecord::codec_byte of how
    };
    // Stores (or finds) one chunk's bytes; *out is an extent of the whole chunk.
    // gains (if given): the new chunk's live bytes go there, not to its segment.
    // payload (if given): what to append if the chunk is new; else the bytes
    // as they are, with crc (if given) = crc32c(data, len) computed ahead.
    Status store_chunk(Txn& t, const std::uint8_t* data, std::uint32_t len, const Digest& digest,
                       ExtentRecord* out, SegmentGains* gains = nullptr, const std::uint32_t* crc = nullptr,
                       const ChunkPayload* payload = nullptr);
    // How this thread stores new chunks: the background pass's threads
    // (BackgroundScope) with compression_background, writes with compression.
    const Compression& write_compression() const;
    struct BackgroundScope {
        BackgroundScope();
        ~BackgroundScope();
    };
    bool pinned(InodeId ino);
    // nlink reached zero: free now (*freed), or when the last pin goes.
    Status release_inode(Txn& t, InodeId ino, bool* freed);
    // Commits t, then drops the stream of ino if release_inode freed it.
    Status commit_release(Txn& t, InodeId ino, bool freed);

    // ---- data path (caller holds the Stream lock) ----
    // write() but for what a failure stops.
    Status write_request(InodeId ino, std::uint64_t offset, const void* data, std::size_t len,
                         WriteTimes times);
    struct ChunkSpan {
        std::uint64_t off;
        const std::uint8_t* data;
        std::size_t len;
    };
    // What a write request does to its inode (size, mtime, ctime), applied in
    // the same metadata operation as its last chunks when it has any, so a
    // write costs one transaction instead of two.
    struct WriteUpdate {
        std::uint64_t end;
        struct timespec now;
        bool touch = true;  // sets mtime and ctime to now
        bool applied = false;
    };
    static void apply_update(Inode& in, WriteUpdate* u);
    // What the store needs of each chunk before the metadata operation:
    // whether it is all zeros, else its SHA-256 and CRC-32C.
    struct ChunkPrints {
        explicit ChunkPrints(const ChunkCipher* keyed) : keyed(keyed) {}
        const ChunkCipher* keyed;  // an encrypted store's: its keyed fingerprints
        std::vector<Digest> digests;
        std::vector<std::uint32_t> crcs;
        std::vector<char> zero;
        // Set before compute: each chunk is also encoded with it there (a
        // large request's chunks are compressed on the helpers while the
        // request is cut, before the store is asked which are new);
        // payloads[i].data is then null for a chunk stored as it is.
        const Compression* encode_with = nullptr;
        const Dictionary* dictionary = nullptr;
        std::vector<ChunkPayload> payloads;
        std::vector<std::vector<std::uint8_t>> bytes;
        void resize(std::size_t n);
        void compute(std::size_t i, const ChunkSpan& c);  // thread-safe for distinct i
    };
    // The encodings of the chunks of a request that the store does not hold
    // yet (a duplicate is shared, never compressed), made on every core
    // before the metadata operation. payloads[i].data is null for a chunk
    // stored as it is.
    struct ChunkEncodings {
        std::vector<ChunkPayload> payloads;
        std::vector<std::vector<std::uint8_t>> bytes;
    };
    Status encode_new_chunks(const std::vector<ChunkSpan>& chunks, const ChunkPrints& prints,
                             const Compression& how, ChunkEncodings* out);
    // prints: computed already (feed hashes while it cuts); else here.
    // shared (if given): how many of the chunks the store held already.
    Status emit_chunks(InodeId ino, const std::vector<ChunkSpan>& chunks,
                       WriteUpdate* upd = nullptr, const ChunkPrints* prints = nullptr,
                       std::size_t* shared = nullptr);
    // The chunks a small overwrite cuts (the old bytes before it, its own,
    // the old bytes it re-cuts after it), held until the last is cut and
    // then stored and mapped in one metadata operation, instead of one per
    // piece of the re-cut.
    class ChunkBatch {
    public:
        // stable: c.data outlives the batch (the request's own bytes);
        // otherwise they are copied.
        void add(const ChunkSpan& c, bool stable);
        bool empty() const { return chunks_.empty(); }
        std::vector<ChunkSpan> spans() const;

    private:
        struct Held {
            std::uint64_t off;
            const std::uint8_t* stable;  // or nullptr: bytes_[at, at + len)
            std::size_t at, len;
        };
        std::vector<Held> chunks_;
        std::vector<std::uint8_t> bytes_;
    };
    // batch: the chunks completed go there instead of being emitted, and
    // data_stable says whether data outlives it.
    Status feed(InodeId ino, Stream& s, const std::uint8_t* data, std::size_t len,
                WriteUpdate* upd = nullptr, ChunkBatch* batch = nullptr, bool data_stable = false);
    // Emits a batch in one operation; on failure the stream, which held
    // bytes of the same request, is cleared.
    Status flush_batch(InodeId ino, Stream& s, ChunkBatch& batch, WriteUpdate* upd);
    static void wait_for_gap(Stream& s, std::unique_lock<std::mutex>& l, std::uint64_t offset);
    // The stream's lock for an operation on the file other than a write or
    // the pass: a sweep that holds it stops at its next piece. It has the
    // whole file: no overwrite runs in a window beside it.
    static std::unique_lock<std::mutex> lock_stream(Stream& s);
    // With mu held (l): waits until no overwrite runs in a window.
    static void whole(Stream& s, std::unique_lock<std::mutex>& l);
    // Sets the file's size and times as the write upd says, unless its
    // chunks' operation did.
    Status apply_unless_applied(InodeId ino, WriteUpdate* upd);
    // A write inside the file, with mu held (l), run in a window of its own
    // without mu when it can be: *done says it ran (result in the Status);
    // otherwise the caller writes it under mu. Releases and retakes l.
    Status write_in_window(InodeId ino, Stream& s, std::unique_lock<std::mutex>& l, std::uint64_t offset,
                           const std::uint8_t* data, std::size_t len, WriteUpdate* upd, bool* done);
    // Chunks the stream's tail (raw in deferred mode unless force_inline).
    // upd: a write whose times the emitted chunks' operation sets, if not yet set.
    Status close_stream(InodeId ino, Stream& s, bool force_inline = false, WriteUpdate* upd = nullptr,
                        ChunkBatch* batch = nullptr);
    // The same for ino's stream, if it has one (taking its lock; not
    // waiting for a sweep of the pass, StreamTable::lock_for_sync).
    Status close_stream(InodeId ino);
    // `reach` bounds the re-chunking around a write (kUnbounded: the pass,
    // which must leave canonical cut points however far that takes it).
    static constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();
    // *size (if given): the file's size before the write at off. Fails
    // unless ino is a regular file.
    // ahead (if given): realign's first steps after a write ending at
    // ahead_from, looked up in the same operation as the start.
    // The cut point a stream restarted at off starts from (CDC): the start
    // of the chunk before off, a hole's end or the file's start; off itself
    // when that lies more than reach back.
    Status cut_before(Txn& t, InodeId ino, const Inode& in, std::uint64_t off, std::uint64_t reach,
                      std::uint64_t* start, bool* beyond = nullptr);
    Status start_stream(InodeId ino, Stream& s, std::uint64_t off, std::uint64_t reach,
                        std::uint64_t* size = nullptr, std::uint64_t ahead_from = 0,
                        std::vector<RealignStep>* ahead = nullptr, ChunkBatch* batch = nullptr);
    // upd (if given): the write before it, whose times the first chunks
    // realign emits set. ahead: steps start_stream looked up, used while
    // they match where the stream is.
    // window_end (if given): realign reads nothing at or past it; it stops
    // and sets *left_window instead.
    Status realign(InodeId ino, Stream& s, std::uint64_t write_end, std::uint64_t reach,
                   WriteUpdate* upd = nullptr, ChunkBatch* batch = nullptr,
                   std::vector<RealignStep>* ahead = nullptr, std::uint64_t window_end = kUnbounded,
                   bool* left_window = nullptr);
    // Looks up realign's step at pos; the piece is planned unless the step
    // is past the end, at a hole, or stops (may_stop, at a chunk boundary).
    Status plan_realign_step(Txn& t, InodeId ino, const Inode& in, std::uint64_t pos, bool may_stop,
                             RealignStep* step);
    // Whether m begins a chunk cut by the chunker (raw data and the tail of
    // a chunk whose head was overwritten do not).
    Status starts_chunk(Txn& t, const MappedExtent& m, bool* out);
    // A read's lookups, made in the caller's metadata operation, and the
    // fetch of its bytes after that operation ends (no I/O under the
    // metadata lock). plan->n: the bytes the read returns (0 past the end).
    Status plan_read(Txn& t, InodeId ino, const Inode& in, std::uint64_t off, std::size_t len,
                     ReadPlan* plan, bool quiet = false);
    // Fills out[0, plan.n): holes as zeros, s's unflushed bytes (if s) over the chunks.
    // replan (if given): set when a chunk of the plan was freed before it
    // was read (an overwrite in a window, then compaction): the error is
    // then the plan's age, not damage, and is neither counted nor acted on.
    Status fetch_read(InodeId ino, Stream* s, const ReadPlan& plan, std::uint8_t* out,
                      bool quiet = false, bool* replan = nullptr);
    // Both, in an operation of its own; planned again (a few times) when a
    // planned chunk was freed before it was read.
    // quiet: a failure is not counted or acted on (the caller retries).
    // from: kGroup for the write path's reads of old bytes (MetaStore::begin_read).
    Status read_locked(InodeId ino, Stream* s, std::uint64_t off, std::size_t len,
                       std::uint8_t* out, std::size_t* got, bool quiet = false,
                       MetaStore::ReadFrom from = MetaStore::ReadFrom::kSnapshot);
    Status truncate_locked(InodeId ino, Stream& s, std::uint64_t size);
    Status regular_file(InodeId ino, Inode* out);

    // The group commit, fsync's log records and snapshots (commit_).
    Status commit_now() { return commit_->commit_now(); }
    Status replay_log(const std::string& dir);
    // At close: MetaStore::compact() within EngineOptions::meta_compact_max_bytes.
    void compact_metadata();
    // A tiered store: its metadata rebuilt from the tier into a store
    // directory without FORMAT (a fresh cache_dir), then FORMAT written.
    Status recover_from_tier(const std::string& dir);
    // The FORMAT record of this store as it is open (version, chunking,
    // tier, encryption).
    StoreFormat current_format() const;
    // Encryption (encryption.cc): the key checked against an existing
    // store's FORMAT (format, or null for a new store, which is given an id
    // and a key check if a key came); cipher_ made. Before anything of the
    // store is touched: a missing, wrong or unwanted key changes nothing.
    Status open_encryption(const std::string& dir, const StoreFormat* format);
    // A new store's encryption: with a key file, that key; with a
    // passphrase, a random key and its key slot, written first.
    Status new_encrypted_store(const std::string& dir);
    // Wraps the tier in a SealedTier for an encrypted store: before the
    // pool's metadata is read, from its FORMAT record (with the key), and
    // again after open_encryption for a new store; *tier follows (init's
    // tier variable, null for a read-only open).
    Status seal_tier(SegmentTier** tier);
    // The payload to append for new chunk id of an encrypted store: the
    // encoding (payload, if given and encoded) or the raw bytes, sealed.
    Status seal_chunk(ChunkId id, const std::uint8_t* data, std::uint32_t len, const ChunkPayload* payload,
                      std::vector<std::uint8_t>* out) const;
    // A chunk's fingerprint: SHA-256, or an encrypted store's keyed one.
    Digest fingerprint(const void* data, std::size_t len) const { return chunk_fingerprint(cipher_.get(), data, len); }
    StoreEncryption encryption_;
    std::unique_ptr<ChunkCipher> cipher_;  // an encrypted store's; null for a plain one
    // An encrypted store's tier, which seals what goes to the pool; then
    // opts_.segments.tier (set by seal_tier, before cipher_ is ever made anew).
    std::unique_ptr<SealedTier> sealed_tier_;
    Status find_lost_format(const std::string& dir, StoreFormat* format, bool* exists);
    Status check_format_copy(const std::string& dir, const StoreFormat& format);
    Status keep_format_copy();
    // FORMAT's log_open mark (store_layout.h): set at a read-write open of a
    // store with an fsync log, cleared at a clean close, after its commit.
    Status mark_log_open(bool open);
    bool format_log_open_ = false;  // what FORMAT says
    Status check_segment_files(const SuperState& committed, const std::string& hint);
    Status count_crash_leftovers(const SuperState& committed);
    // At open, after the replays: the metadata's dictionaries into dicts_
    // (a damaged one is logged, not refused), and the trainer.
    Status open_dictionaries();
    // A run of the control thread (control_): last_processed is the pass's
    // progress at its last run.
    void control_round(std::uint64_t* last_processed);
    // The backlog's limit in bytes this interval (0: none; EngineOptions::backlog_max_*).
    std::uint64_t backlog_limit(std::uint64_t backlog_bytes) const;
    // Dead bytes in the segments past which reclaim runs at full speed
    // whatever the throttle says: more than kDeadSpacePerLive times the
    // live chunks' bytes, and more than kDeadSpaceFloor. Overwrites under a
    // load that keeps the pass paused leave the old bytes dead; without
    // this the store's disk use grew without bound while the load lasted.
    static constexpr std::uint64_t kDeadSpacePerLive = 2, kDeadSpaceFloor = 256ull << 20;
    bool dead_space_over_bound(const SpaceCounters& c) const;
    void stop_committer();
    Status publish_status();
    Status record_history(const IntervalSample& s, const SpaceCounters& c);

    EngineOptions opts_;
    EngineHooks hooks_;  // what tests inject (engine_test_hooks.h)
    // The store directory, opened once; the last of the store's handles to go.
    std::unique_ptr<StoreDir> store_;
    Env* env_ = nullptr;
    // The store for code that opens files by name (LMDB, put_snapshot,
    // recover_store_dir): through the descriptor (StoreDir::via_fd) unless
    // an Env was injected; and the metadata directory, through its own.
    std::string lib_dir_, meta_dir_;
    ChunkingParams chunking_;
    std::unique_ptr<StoreLock> lock_;
    std::unique_ptr<SegmentStore> segs_;
    // Deferred writes' metadata, held and applied in batches; MetaStore's
    // HeldBack. Made once segs_ and meta_ are open, and kept until after
    // meta_ is gone (declared before it).
    std::unique_ptr<WriteBehind> write_behind_;
    // The group commit and its frontier, fsync's log records, snapshots:
    // made with write_behind_.
    std::unique_ptr<Committer> commit_;
    // A tiered store's metadata journal; declared before meta_, which
    // writes to it until it is destroyed.
    std::unique_ptr<TierJournal> journal_;
    std::unique_ptr<MetaStore> meta_;
    std::uint32_t uid_ = 0, gid_ = 0;

    std::mutex pins_mu_;
    std::unordered_map<InodeId, std::uint64_t> pins_;
    StreamTable streams_{[this](InodeId ino) { return pinned(ino); }};

    IntervalThread committer_;  // runs commit_->round(); woken when the open group reached commit_writes
    IntervalThread control_;
    bool closed_ = false;
    SpaceAdmission space_;  // the ENOSPC admission of requests and sweeps
    std::uint64_t compaction_floor_ = 0;  // free bytes compaction leaves (SpaceBudget)
    std::unique_ptr<ModeController> controller_;
    HistoryRecorder history_;  // the control thread's
    Clock* clock_ = nullptr;   // the controller's

    std::atomic<bool> segments_stop_logged_{false};
    std::atomic<bool> deferred_{false};
    // A large write's chunks are fingerprinted on the FUSE thread and these
    // helpers (emit_chunks); the background pass has its TBB arena.
    ParallelLoop digest_loop_{ParallelLoop::default_helpers()};
    // The store's compression dictionaries (chunk/codec.h): every one is
    // read, the newest compresses new zstd chunks. Loaded at open; the
    // trainer adds to it (dictionary_trainer.h), on its own thread when
    // the background runs.
    DictionarySet dicts_;
    std::unique_ptr<DictionaryTrainer> trainer_;  // null when read-only
    std::unique_ptr<PacedWorker> trainer_thread_;
    WorkerThreads pool_threads_;  // the pass's pools' threads: joined by close()
    std::unique_ptr<BackgroundPass> pass_;
    std::atomic<std::uint64_t> read_errors_{0};  // chunk reads that failed verification
    std::atomic<std::uint64_t> reads_beside_sweep_{0};  // reads that did not wait for the pass
    std::atomic<std::uint64_t> read_replans_{0};  // reads planned again: a chunk freed under them
    std::atomic<std::uint64_t> syncs_beside_sweep_{0};  // flushes and fsyncs that did not either
    std::atomic<std::uint64_t> reads_coalesced_{0};  // runs of chunks read with one pread
    std::atomic<std::uint64_t> sweeps_yielded_{0};  // sweeps stopped early for the throttle or a write
    std::atomic<std::uint64_t> sweeps_deferred_{0};  // records sent back behind the raw bytes before them
    std::atomic<std::uint64_t> dirty_records_covered_{0};  // finished unswept: another queued record covers them
    std::atomic<std::uint64_t> backlog_limit_{0};   // the last control round's (status.json)
    std::atomic<bool> reclaim_forced_{false};       // the last control round found dead space over its bound
    std::atomic<std::uint64_t> sweeps_yielded_to_requests_{0};  // of those, for a write or other operation
    std::atomic<std::uint64_t> overwrites_in_windows_{0};  // overwrites that ran without the stream lock
    std::atomic<std::uint64_t> overwrites_beside_others_{0};  // of those, begun while another ran
    std::atomic<std::uint64_t> window_retries_{0};  // of those, whose realignment left the window
    std::atomic<std::uint64_t> damaged_chunks_{0};  // chunks flagged kDamaged since open

    WriteErrors write_errors_;  // held writes lost, for the files open when they were
    Quarantine quarantine_{[this](const std::string& line) {
        if (opts_.log) opts_.log(line);
    }};
    // Records queued and not yet taken by the pass, which deferred writes
    // over them need not repeat (pending_dirty.h); and the writes that did
    // not (runs whose range a record already covered).
    PendingDirty pending_dirty_;

    ReclaimMode reclaim_mode_ = ReclaimMode::kOff;
    std::mutex reclaim_mu_;  // one reclaim step at a time
    std::unique_ptr<Compactor> compactor_;
    std::unique_ptr<Reclaimer> reclaimer_;
    std::atomic<std::uint64_t> deletes_queued_{0};  // large deletes handed to the reclaimer
    std::atomic<std::uint64_t> deletes_done_{0};    // deleted files the reclaimer freed
};

}  // namespace hiodsfs
