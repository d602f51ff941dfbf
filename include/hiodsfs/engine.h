// Engine: the file system as a library. Inodes, directories, symlinks,
// extended attributes and file contents over a store directory:
//   STORE/FORMAT     format version and chunking parameters (text)
//   STORE/lock       flock held by the one process that has the store open
//   STORE/meta/      LMDB environment (inodes, dirents, extents, chunks,
//                    fingerprint index, dirty queue, xattrs, counters)
//   STORE/segments/  chunk bytes (see segment_store.h)
// Writes are chunked (fixed or CDC), fingerprinted and deduplicated inline.
// Metadata changes are group-committed: at most commit_interval apart,
// always after the segment data they refer to is durable. fsync() makes one
// file's data and metadata durable at once.
// The engine performs no permission checks (the kernel does, with
// default_permissions); it enforces the namespace rules (EEXIST, ENOTEMPTY,
// ENOTDIR, EISDIR, ...).
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hiodsfs/chunker.h"
#include "hiodsfs/clock.h"
#include "hiodsfs/compression.h"
#include "hiodsfs/control.h"
#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/space_counters.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

enum class DedupMode : std::uint8_t { kInline = 0, kDeferred = 1, kHybrid = 2 };

// Who gives space back: freeing deleted files and compacting segments.
enum class ReclaimMode : std::uint8_t {
    kBackground = 0,  // a thread, paced by the throttle like the deduplication pass
    kManual = 1,      // the same work, queued until run_reclaim() (tests)
    kOff = 2,         // deleted files are freed in the deleting request; no compaction
};

class StoreKey;    // src/chunk/cipher.h
class Passphrase;  // src/chunk/key_wrap.h

struct EngineOptions {
    std::string store_dir;
    // Chunking for a new store. For an existing store, the store's own
    // parameters are used; if chunking_given and they differ, open fails.
    ChunkingParams chunking;
    bool chunking_given = false;
    bool create_if_missing = true;
    bool read_only = false;
    // Open a store directory that another user owns or that group or others
    // may write (store/store_dir.h refuses one): the daemon's
    // -o unsafe_store_dir, and hiodsfs-stat, which only reads. Links in the
    // store are refused either way.
    bool any_store_owner = false;
    // The store's files go through this Env (tests inject faults); nullptr:
    // Env::beneath() the store directory.
    Env* env = nullptr;
    std::uint32_t commit_interval_ms = 1000;
    // ... and sooner once the open group holds this many metadata writes
    // (0: no limit): LMDB keeps a group's dirty pages in memory, one page
    // per write of a random key (a fingerprint), so an unbounded group's
    // memory grows with the write rate and the index.
    std::uint64_t commit_writes = 65536;
    // ... or once it has dirtied about this many bytes of pages of the
    // fingerprint index and the chunk records (0: no limit): in a large
    // index nearly every write of a fingerprint dirties a page of its own,
    // so a bound on writes alone lets a group's memory grow with the index.
    // 12M (3072 pages), and what arrives while the committer syncs the
    // segments, is what commit_writes allows in a small index (~4000 pages):
    // with 16M, RssAnon still rose 32 -> 37 MiB from 0.5 to 4 Mi chunks.
    std::uint64_t meta_dirty_bytes = 12ull << 20;
    // After a group commit, the metadata pages the daemon has mapped are
    // unmapped (they stay in the page cache) if more than this many bytes
    // of file pages are mapped, so RSS stays bounded as the index grows
    // (0: never).
    std::uint64_t meta_resident_bytes = 128ull << 20;
    // At close, the metadata file is rewritten compacted (full B-tree pages,
    // no free pages) if it is at most this large and the copy saves 10 %
    // or more (0: never). Costs a read and a write of the file at unmount.
    std::uint64_t meta_compact_max_bytes = 1ull << 30;
    // An fsync of a store without a tier writes the metadata's changes as
    // one record into the segment stream and syncs the segments once,
    // instead of committing the metadata (engine/fsync_log.h). Off: every
    // fsync commits.
    bool fsync_log = true;
    // read_only: a store whose fsync log holds changes its metadata does
    // not have yet (a crash) is refused, since they cannot be applied; with
    // this, it is opened at its last commit instead (hiodsfs-stat's figures).
    bool read_only_at_last_commit = false;
    SegmentStoreOptions segments;
    std::uint64_t lmdb_map_bytes = 1ull << 40;
    // Background thread that commits metadata every commit_interval_ms.
    // Tests that want to control commits switch it off.
    bool background_commit = true;
    // inline: deduplicate on the write path; deferred: write raw and let the
    // background pass deduplicate; hybrid: switch between them (controller).
    DedupMode mode = DedupMode::kInline;
    // How new chunks are stored: `compression` by a write that deduplicates
    // inline, `compression_background` by the background pass and by
    // compaction, which also recompresses the chunks it moves that were
    // stored weaker. Deferred writes are stored as they come: the pass
    // rewrites them anyway, so the foreground pays nothing.
    Compression compression;
    Compression compression_background;
    // Compression dictionaries (docs/architecture.md, "Compression"): once
    // the store holds this many bytes of chunk content and no dictionary,
    // or 8 times what it held when its newest one was trained, a zstd
    // dictionary is trained from a sample of its chunks in the background,
    // and new zstd chunks are compressed with it. 0: never. The trainer
    // thread runs with the background pass (background_threads > 0 and
    // background_commit); train_dictionary() does its work in every mode.
    std::uint64_t dictionary_min_bytes = 64ull << 20;
    // Encryption at rest (docs/architecture.md): the store's key (the
    // daemon's -o key_file=FILE). A new store made with a key is encrypted;
    // an encrypted store opens only with its own key, and a plain one
    // refuses a key. Null: no key.
    std::shared_ptr<const StoreKey> key;
    // Or a passphrase (-o key=ask), which opens the store's key from its
    // key slot (engine/key_slot.h); a new store made with one gets a random
    // key and a slot. Not both.
    std::shared_ptr<const Passphrase> passphrase;
    // read_only: an encrypted store opens without its key, for what its
    // metadata says (hiodsfs-stat's figures); its chunks then do not read.
    bool without_key = false;
    // Tests: a new encrypted store is sealed with AES-256-GCM, as those
    // made before XAES-256-GCM were (chunk/cipher.h), not XAES-256-GCM.
    bool legacy_cipher_for_tests = false;
    // The write-rate goal and controller settings (hybrid mode), the
    // policy's name ("" = the default), and the clock (nullptr = system).
    // policy "hiods" also gives the throttle HIODS's stress test
    // (ControlConfig::spare_capacity false).
    ControlConfig control;
    std::string policy;
    // The largest backlog (bytes written raw, not yet deduplicated): past
    // it hybrid writes inline and the pass of a deferred mode runs at full
    // speed (docs/controller.md). backlog_max_bytes when not 0, else
    // backlog_max_percent of the space the backlog could take (the store's
    // file system's free bytes plus the backlog); both 0: no limit.
    std::uint64_t backlog_max_bytes = 0;
    unsigned backlog_max_percent = 25;
    Clock* clock = nullptr;
    // Publish STORE/status.json every control interval (the daemon does, so
    // hiodsfs-stat can read a mounted store without disturbing it).
    bool publish_status = false;
    // Worker threads of the background pass; 0 = no background pass (tests
    // then drive it with run_background()).
    unsigned background_threads = 2;
    // The nice value (0..19) of background work: the pass, compaction, the
    // dictionary trainer, and the helpers while they work for them. The
    // scheduler then serves requests first and the background takes the CPU
    // they leave. Past the backlog limit the pass runs at 0, as requests do.
    int background_nice = 19;
    // How long to wait for another process to release the store (e.g. a
    // daemon still flushing after umount) before failing with EBUSY.
    unsigned lock_wait_ms = 0;
    // Space reclaim (docs/architecture.md). kBackground needs
    // background_commit; without it reclaim is kOff. run_reclaim() works in
    // every mode.
    ReclaimMode reclaim = ReclaimMode::kBackground;
    // A sealed segment whose live bytes are below this fraction of its size
    // is compacted, and below 0.9 while reclaim may run at full speed (the
    // foreground idle, or no goal); 0 deletes only segments without live
    // bytes.
    double compact_threshold = 0.5;
    // A deleted file that maps more than this many bytes is freed by the
    // reclaimer in bounded steps; the deleting request only queues it.
    std::uint64_t async_delete_bytes = 1ull << 20;
    // Free space on the store's file system kept back from file data, so
    // that metadata commits, deletes and compaction can still run when the
    // disk is full (file data writes fail with ENOSPC first). UINT64_MAX:
    // 2 % of the file system, at least 16 MiB and at most 512 MiB.
    std::uint64_t space_reserve = UINT64_MAX;
    // Where the engine reports what a user must know that no request
    // returns (a failed background commit); may be empty.
    std::function<void(const std::string&)> log;
    // Requests the layer above has received, by kind (the FUSE daemon's
    // count by opcode), published in status.json as "requests"; may be empty.
    std::function<std::vector<std::pair<std::string, std::uint64_t>>()> request_counts;
    // Called when a file's size or times change with no request that
    // asked for it (acknowledged writes that could not be applied), so that
    // the layer above drops what its kernel cached; may be empty. It may
    // run with engine locks held: it must not call the engine.
    std::function<void(InodeId)> attrs_changed;
};

struct Attr {
    InodeId ino = 0;
    std::uint32_t mode = 0;  // type and permission bits, as st_mode
    std::uint32_t nlink = 0;
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::uint64_t rdev = 0;
    std::uint64_t size = 0;
    std::uint64_t blocks = 0;  // 512-byte units of data the file maps (holes excluded)
    struct timespec atime{}, mtime{}, ctime{};
    std::uint64_t generation = 0;
};

// Which fields setattr changes (any combination).
struct SetAttr {
    enum : std::uint32_t {
        kMode = 1u << 0,
        kUid = 1u << 1,
        kGid = 1u << 2,
        kSize = 1u << 3,
        kAtime = 1u << 4,
        kMtime = 1u << 5,
        kAtimeNow = 1u << 6,
        kMtimeNow = 1u << 7,
        kCtime = 1u << 8,
    };
    std::uint32_t valid = 0;
    std::uint32_t mode = 0, uid = 0, gid = 0;
    std::uint64_t size = 0;
    struct timespec atime{}, mtime{}, ctime{};
};

// Everything a new inode starts with; the caller (the VFS) applies the
// POSIX rules (umask, setgid inheritance, default ACLs) before calling.
struct NewNode {
    std::uint32_t mode = 0;  // including the type bits (S_IFREG, S_IFDIR, S_IFLNK, ...)
    std::uint32_t uid = 0, gid = 0;
    std::uint64_t rdev = 0;
    std::string symlink_target;                                // S_IFLNK only
    std::vector<std::pair<std::string, std::string>> xattrs;  // set atomically with creation
};

struct DirEntry {
    std::string name;
    InodeId ino = 0;
    std::uint32_t type = 0;  // S_IFMT bits of the child
};

struct FsStats {
    std::uint64_t block_size = 4096;
    std::uint64_t blocks = 0, blocks_free = 0, blocks_avail = 0;  // of the backing file system
    std::uint64_t files = 0, files_free = 0;
    std::uint64_t name_max = 255;
};

// What one open file (a file description) has been told of its file's
// lost writes: Linux's errseq_t sample. Taken at open, compared and moved
// on by that file's flush and fsync, so every file open when writes were
// lost is told once, whoever else closes the file first; a file opened
// later is told only of a loss no file was told of yet.
struct WriteErrorCursor {
    std::uint64_t seen = 0;  // the last loss this file was told of, or knew at open
};

enum class SeekWhence { kData, kHole };
// Whether a write sets the file's mtime and ctime to its own time (kSet),
// or leaves them (kKeep) to whoever keeps them: the kernel's writeback
// cache stamps a write when write(2) runs and sends those times itself,
// so pages it writes back later must not restamp the file.
enum class WriteTimes { kSet, kKeep };

class Engine {
public:
    static Status open(const EngineOptions& options, std::unique_ptr<Engine>* out);
    // Flushes and commits everything (like close()), ignoring errors.
    virtual ~Engine() = default;
    // Flushes every open write stream, syncs segments, commits metadata.
    virtual Status close() = 0;
    virtual const ChunkingParams& chunking() const = 0;

    // Namespace. Names are any bytes except '/' and NUL, 1..255 bytes
    // ("." and ".." are not entries; lookup of them is the VFS's job).
    virtual Status lookup(InodeId parent, std::string_view name, Attr* out) = 0;
    virtual Status getattr(InodeId ino, Attr* out) = 0;
    virtual Status setattr(InodeId ino, const SetAttr& changes, Attr* out) = 0;
    // Creates a regular file, directory, symlink, FIFO, socket or device node.
    virtual Status create(InodeId parent, std::string_view name, const NewNode& node, Attr* out) = 0;
    virtual Status readlink(InodeId ino, std::string* target) = 0;
    virtual Status link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out) = 0;
    virtual Status unlink(InodeId parent, std::string_view name) = 0;
    virtual Status rmdir(InodeId parent, std::string_view name) = 0;
    // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (from <linux/fs.h>).
    virtual Status rename(InodeId parent, std::string_view name, InodeId new_parent,
                          std::string_view new_name, unsigned flags) = 0;
    // All entries of a directory, in a stable order (by name).
    virtual Status readdir(InodeId dir, std::vector<DirEntry>* out) = 0;
    // The parent of a directory (root's parent is root).
    virtual Status parent_of(InodeId dir, InodeId* out) = 0;

    // Inode lifetime: the VFS pins an inode for every reference the kernel
    // holds (lookup count, open handle). An unlinked inode keeps its data
    // until its last pin goes; on the next open of the store any inode that
    // was unlinked but still pinned at a crash is freed.
    virtual void pin(InodeId ino, std::uint64_t count = 1) = 0;
    virtual void unpin(InodeId ino, std::uint64_t count = 1) = 0;

    // Data.
    virtual Status read(InodeId ino, std::uint64_t offset, std::size_t len, void* out,
                        std::size_t* got) = 0;
    virtual Status write(InodeId ino, std::uint64_t offset, const void* data, std::size_t len,
                         WriteTimes times = WriteTimes::kSet) = 0;
    // Chunks any buffered tail of the file (called on close).
    // Both this and fsync then tell the caller's open file of writes lost
    // since it last asked (EIO, once; see WriteErrorCursor).
    virtual Status flush(InodeId ino, WriteErrorCursor* seen) = 0;
    // The file's data and metadata are durable when this returns.
    virtual Status fsync(InodeId ino, bool datasync, WriteErrorCursor* seen) = 0;
    // What an open file samples at open.
    virtual WriteErrorCursor write_error_cursor(InodeId ino) = 0;
    // The same for a caller without an open file: as one opened just now.
    Status flush(InodeId ino) {
        WriteErrorCursor seen = write_error_cursor(ino);
        return flush(ino, &seen);
    }
    Status fsync(InodeId ino, bool datasync) {
        WriteErrorCursor seen = write_error_cursor(ino);
        return fsync(ino, datasync, &seen);
    }
    // Everything is durable when this returns.
    virtual Status sync_all() = 0;
    // mode: 0 (allocate: extends size, holes stay holes), FALLOC_FL_KEEP_SIZE,
    // FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE;
    // anything else is EOPNOTSUPP.
    virtual Status fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len) = 0;
    // Makes dst[dst_off, +len) share src's chunks for src[src_off, +len)
    // (clipped at src's size); no data is copied. *copied is the length cloned.
    virtual Status clone_range(InodeId src, std::uint64_t src_off, InodeId dst,
                               std::uint64_t dst_off, std::uint64_t len, std::uint64_t* copied) = 0;
    // SEEK_DATA / SEEK_HOLE; ENXIO past the end as lseek(2) says.
    virtual Status seek(InodeId ino, std::uint64_t offset, SeekWhence whence,
                        std::uint64_t* out) = 0;

    // Extended attributes. flags: 0, XATTR_CREATE or XATTR_REPLACE.
    virtual Status setxattr(InodeId ino, std::string_view name, std::string_view value,
                            int flags) = 0;
    virtual Status getxattr(InodeId ino, std::string_view name, std::string* value) = 0;
    virtual Status listxattr(InodeId ino, std::vector<std::string>* names) = 0;
    virtual Status removexattr(InodeId ino, std::string_view name) = 0;

    // Runs the background pass in the calling thread until no dirty record
    // is left (for tests and tools; the daemon's pass runs by itself).
    virtual Status run_background() = 0;
    // Does all pending space reclaim in the calling thread: frees deleted
    // files (those no handle pins any more) and compacts segments until no
    // segment qualifies. The daemon's reclaimer does the same by itself.
    virtual Status run_reclaim() = 0;
    // Trains a compression dictionary in the calling thread if the store is
    // due one (EngineOptions::dictionary_min_bytes), whatever the throttle
    // says, and stores it; *trained says whether it did. Samples that train
    // none are logged once and are no error. EROFS on a read-only store.
    // The daemon's trainer thread does the same by itself.
    virtual Status train_dictionary(bool* trained) = 0;
    // Switches the write path (the mode controller calls this in hybrid mode).
    virtual void set_deferred(bool deferred) = 0;
    virtual bool deferred() const = 0;
    // The controller (mode, throttle, history); null on a read-only store.
    virtual const ModeController* controller() const = 0;
    // The engine's state as JSON (counters, mode, throttle, recent events):
    // what STORE/status.json holds.
    virtual std::string status_json() = 0;

    virtual Status statfs(FsStats* out) = 0;
    // Bytes of file data the store can still take before write() fails with
    // ENOSPC: the store's file system's free space less the reserve (one
    // statvfs; UINT64_MAX when that fails).
    virtual std::uint64_t data_room() = 0;
    virtual Status counters(SpaceCounters* out) = 0;
    // Stops the store for a reason found outside it (the daemon lost its
    // lock on the store): from now on every change and fsync fails with
    // EIO, as after a failed commit, and what was not committed is not.
    virtual void stop(const std::string& why) = 0;
    // With a tier: ok if the tier's metadata is as this engine left it (no
    // commit of another writer past its own). Asked by the daemon after its
    // lock on the store lapsed and was taken again; ok without a tier.
    virtual Status check_tier_unchanged() = 0;
};

}  // namespace hiodsfs
