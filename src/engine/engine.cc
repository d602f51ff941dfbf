// The engine: namespace operations and the inline write path over the
// metadata (meta_store.h) and the segment store (segment_store.h).
//
// Write path. Each regular file being written has a Stream: the bytes since
// the last cut point, kept in memory with the chunker's state, so chunk
// boundaries do not depend on how writes are split. A complete chunk is
// fingerprinted, looked up, stored once, and mapped in one metadata
// operation. A write that does not continue the stream first closes it, then
// re-chunks from the start of the chunk holding the byte before the write
// (the cut point before it) and goes on through the old data after it until
// a new cut falls on an old chunk boundary again, so a small overwrite
// re-chunks only its region.
//
// Lock order: Stream::mu, then the MetaStore lock (a Txn), then pins_mu_.
#include "hiodsfs/engine.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

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

#include "common/tsan_fork_join.h"
#include "dedup/background_pass.h"
#include "dedup/reclaimer.h"
#include "engine/chunk_index.h"
#include "engine/compaction.h"
#include "engine/space_budget.h"
#include "engine/store_layout.h"
#include "hiodsfs/fingerprint.h"
#include "hiodsfs/history.h"
#include "hiodsfs/meta_store.h"
#include "hiodsfs/records.h"

namespace hiodsfs {
namespace {

constexpr std::uint64_t kMaxFileSize = std::uint64_t(1) << 60;
constexpr std::size_t kMaxName = 255;
constexpr std::size_t kMaxXattrName = 255;
constexpr std::size_t kMaxXattrValue = 65536;
constexpr std::size_t kMaxSymlink = 4095;
// A write this far ahead of its file's stream, while the file is being
// written sequentially, waits for the requests before it (wait_for_gap),
// at most kReorderWait.
constexpr std::uint64_t kReorderWindow = 16 << 20;
constexpr auto kReorderWait = std::chrono::milliseconds(50);
// A read that finds its file's lock taken looks this often, this many
// times, whether the pass's sweep holds it (EngineImpl::read).
constexpr auto kReadLockPoll = std::chrono::microseconds(50);
constexpr int kReadLockPolls = 200;
// Old data is re-read in pieces of at most this size while re-chunking.
constexpr std::uint64_t kRechunkPiece = 256 * 1024;

struct timespec now_ts() {
    struct timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

void set_time(std::int64_t* s, std::uint32_t* ns, const struct timespec& ts) {
    *s = ts.tv_sec;
    *ns = static_cast<std::uint32_t>(ts.tv_nsec);
}

std::uint64_t wall_ns() {
    auto ts = now_ts();
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

struct timespec get_time(std::int64_t s, std::uint32_t ns) {
    struct timespec ts {};
    ts.tv_sec = s;
    ts.tv_nsec = ns;
    return ts;
}

bool is_dir(std::uint32_t mode) { return S_ISDIR(mode); }

bool all_zero(const std::uint8_t* p, std::size_t n) {
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

Status check_name(std::string_view name) {
    if (name.empty() || name == "." || name == "..")
        return Status::error(EINVAL, "invalid name");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
        return Status::error(EINVAL, "name contains '/' or NUL");
    return Status::ok();
}

// An inode as stored: the fixed record plus a symlink target.
struct Inode {
    InodeRecord r;
    std::string target;
};

struct MappedExtent {
    std::uint64_t start;  // file offset
    ExtentRecord e;
    std::uint64_t end() const { return start + e.length; }
};

// The open write stream of one file (see the comment at the top).
struct Stream {
    std::mutex mu;
    std::condition_variable moved;  // a write to the file finished
    std::atomic<int> writers{0};    // write requests inside write() for this file
    int streak = 0;                 // consecutive writes that continued the stream
    std::multiset<std::uint64_t> waiting;  // offsets of writes waiting for a gap to fill
    bool active = false;
    std::uint64_t off = 0;  // file offset of buf[head]; always a cut point
    std::vector<std::uint8_t> buf;
    std::size_t head = 0;
    std::unique_ptr<Chunker> chunker;
    // The background pass holds the lock for a sweep (rechunk_locked), which
    // may take seconds: every acknowledged byte of the file is then in its
    // extents, so reads need not wait for it (EngineImpl::read).
    std::atomic<bool> sweeping{false};

    std::size_t size() const { return buf.size() - head; }
    std::uint64_t end() const { return off + size(); }
    const std::uint8_t* data() const { return buf.data() + head; }
    void clear() {
        active = false;
        buf.clear();
        buf.shrink_to_fit();
        head = 0;
    }
};

class EngineImpl final : public Engine, private DedupTarget, private ReclaimTarget {
public:
    ~EngineImpl() override {
        if (!closed_) (void)close();
    }

    Status init(const EngineOptions& options);

    Status close() override;
    void abandon() override;
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
    Status write(InodeId ino, std::uint64_t offset, const void* data, std::size_t len) override;
    Status flush(InodeId ino) override;
    Status fsync(InodeId ino, bool datasync) override;
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
    Status rechunk_locked(InodeId ino, Stream& s, std::uint64_t offset, std::uint64_t length,
                          bool* gone);
    // The speed the pass and the reclaimer go by (the throttle's).
    double background_speed() const {
        return opts_.background_speed ? opts_.background_speed() : controller_->background_speed();
    }
    // A sweep stopped for the throttle: the stream's bytes (all still mapped)
    // are dropped and [s.off, end) is queued again, to be swept from that cut.
    Status requeue_sweep(InodeId ino, Stream& s, std::uint64_t end);
    // Queues [off, off + len) of ino for the background pass.
    Status queue_dirty(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t len);

    // ---- ReclaimTarget (the reclaimer; see reclaim.cc) ----
    Status reclaim_step(bool* did_work) override;
    // Frees part of one deleted file that nothing pins any more.
    Status purge_step(bool* did_work);
    // nlink is zero and nothing pins ino: free it now, or queue a large file
    // for the reclaimer.
    Status free_inode(Txn& t, InodeId ino);
    // Reads chunk id at loc, or where compaction has moved it meanwhile.
    // *damaged as SegmentStore::read says it.
    Status read_chunk(ChunkId id, ChunkLocation loc, std::uint8_t* out, bool* damaged = nullptr);
    // A chunk whose record failed its checks (checksum, header, or bytes
    // gone; not a passing I/O error) is flagged kDamaged and leaves the
    // fingerprint index: never shared again.
    void mark_damaged(ChunkId id);

    // ---- metadata helpers (caller holds a Txn) ----
    Status load_inode(Txn& t, InodeId ino, Inode* out);
    Status store_inode(Txn& t, InodeId ino, const Inode& in);
    Status lookup_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* out,
                        bool* found);
    Status load_dir(Txn& t, InodeId ino, Inode* out);
    // The entry `name` of directory `parent` and its inode (ENOENT if absent).
    Status resolve_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* entry,
                         Inode* child);
    Status dir_is_empty(Txn& t, InodeId dir, bool* empty);
    Status touch_dir(Txn& t, InodeId dir, int nlink_delta);
    // Collects the extents of ino overlapping [off, end).
    Status extents_in(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                      std::vector<MappedExtent>* out);
    // Unmaps [off, off+len) of ino and, if add is given, maps it to add (whose
    // chunk reference the caller has already taken). Updates mapped bytes.
    Status replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, std::uint64_t len,
                         const ExtentRecord* add);
    // Maps [off, off + e.length), which must be unmapped (a hole).
    Status map_extent(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, const ExtentRecord& e);
    Status chunk_ref(Txn& t, ChunkId id, std::int64_t delta);
    // Stores (or finds) one chunk's bytes; *out is an extent of the whole chunk.
    // New chunks' live bytes per segment, added once per request (most of a
    // request's chunks land in one segment).
    using SegmentGains = std::vector<std::pair<SegmentId, std::uint64_t>>;
    Status store_chunk(Txn& t, const std::uint8_t* data, std::uint32_t len, const Digest& digest,
                       ExtentRecord* out, SegmentGains* gains = nullptr);
    Status purge_inode(Txn& t, InodeId ino);
    bool pinned(InodeId ino);
    // Forgets ino's stream once nothing holds or pins it. A stream is never
    // replaced while in use: the pass re-chunking a file and a write after
    // the kernel forgot and reopened it must serialize on the same lock.
    void drop_stream(InodeId ino, bool file_gone = false);
    // nlink reached zero: free now, or when the last pin goes.
    Status release_inode(Txn& t, InodeId ino);
    Attr to_attr(InodeId ino, const Inode& in) const;

    // ---- data path (caller holds the Stream lock) ----
    std::shared_ptr<Stream> stream(InodeId ino);
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
        bool applied = false;
    };
    static void apply_update(Inode& in, WriteUpdate* u);
    Status emit_chunks(InodeId ino, const std::vector<ChunkSpan>& chunks,
                       WriteUpdate* upd = nullptr);
    Status emit(InodeId ino, std::uint64_t off, const std::uint8_t* data, std::size_t len);
    // Deferred path: stores bytes as they are (no fingerprint, no lookup),
    // maps them, and records the range for the background pass.
    Status emit_raw(InodeId ino, std::uint64_t off, const std::uint8_t* data, std::size_t len,
                    WriteUpdate* upd = nullptr);
    Status write_deferred(InodeId ino, Stream& s, std::uint64_t off, const std::uint8_t* data,
                          std::size_t len, WriteUpdate* upd);
    Status feed(InodeId ino, Stream& s, const std::uint8_t* data, std::size_t len,
                WriteUpdate* upd = nullptr);
    static void wait_for_gap(Stream& s, std::unique_lock<std::mutex>& l, std::uint64_t offset);
    // Chunks the stream's tail (raw in deferred mode unless force_inline).
    Status close_stream(InodeId ino, Stream& s, bool force_inline = false);
    // `reach` bounds the re-chunking around a write (kUnbounded: the pass,
    // which must leave canonical cut points however far that takes it).
    static constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();
    Status start_stream(InodeId ino, Stream& s, std::uint64_t off, std::uint64_t reach);
    Status realign(InodeId ino, Stream& s, std::uint64_t write_end, std::uint64_t reach);
    // Whether m begins a chunk cut by the chunker (raw data and the tail of
    // a chunk whose head was overwritten do not).
    Status starts_chunk(Txn& t, const MappedExtent& m, bool* out);
    // quiet: a failure is not counted or acted on (the caller retries).
    Status read_locked(InodeId ino, Stream* s, std::uint64_t off, std::size_t len,
                       std::uint8_t* out, std::size_t* got, bool quiet = false);
    Status truncate_locked(InodeId ino, Stream& s, std::uint64_t size);
    Status regular_file(InodeId ino, Inode* out);
    static Status check_regular(const Inode& in);

    Status commit_now();
    Status check_segment_files(const SuperState& committed, const std::string& hint);
    void committer_loop();
    void control_loop();
    void stop_committer();
    Status publish_status();
    Status record_history(const IntervalSample& s, const SpaceCounters& c);

    EngineOptions opts_;
    Env* env_ = nullptr;
    ChunkingParams chunking_;
    std::unique_ptr<StoreLock> lock_;
    std::unique_ptr<SegmentStore> segs_;
    std::unique_ptr<MetaStore> meta_;
    std::uint32_t uid_ = 0, gid_ = 0;

    std::mutex streams_mu_;
    std::unordered_map<InodeId, std::shared_ptr<Stream>> streams_;
    std::mutex pins_mu_;
    std::unordered_map<InodeId, std::uint64_t> pins_;

    std::mutex commit_mu_;  // one commit at a time
    std::mutex committer_mu_;
    std::condition_variable committer_cv_;
    bool stop_ = false;
    std::thread committer_;
    std::thread control_;
    bool closed_ = false;
    std::uint64_t space_reserve_ = 0;  // bytes (EngineOptions::space_reserve)
    std::uint64_t compaction_floor_ = 0;  // free bytes compaction leaves (SpaceBudget)
    // check_space's view: free bytes at the last statvfs (steady-clock
    // time), and bytes asked for since.
    std::atomic<std::uint64_t> known_avail_{0}, asked_since_{0};
    std::atomic<std::int64_t> known_at_{0};
    // ENOSPC when the store's file system cannot take len on top of `keep`
    // free bytes (file data and the pass keep the reserve) and of what
    // admitted requests are still writing.
    Status check_space(std::uint64_t len) { return check_space(len, space_reserve_); }
    Status check_space(std::uint64_t len, std::uint64_t keep, bool admitted = false);
    // Bytes of write requests and pass sweeps that passed check_space and
    // are not yet written: requests queued on one stream are all checked
    // before the first of them writes, and must not pass the reserve together.
    std::atomic<std::uint64_t> admitted_{0};
    struct Admission {
        std::atomic<std::uint64_t>& bytes;
        std::uint64_t len;
        Admission(std::atomic<std::uint64_t>& b, std::uint64_t n) : bytes(b), len(n) {}
        Admission(const Admission&) = delete;
        Admission& operator=(const Admission&) = delete;
        ~Admission() { bytes.fetch_sub(len, std::memory_order_relaxed); }
    };
    // check_space for a request of len bytes that counts as being written
    // until *out goes.
    // The pass's sweeps (background) yield to a write waiting for room.
    Status admit(std::uint64_t len, std::optional<Admission>* out, bool background = false) {
        admitted_.fetch_add(len, std::memory_order_relaxed);
        out->emplace(admitted_, len);
        if (background && room_waiters_.load(std::memory_order_relaxed) > 0)
            return Status::error(ENOSPC, "a write is waiting for room");
        return check_space(len, space_reserve_, true);
    }
    // admit for a foreground write: on a full disk it first waits, a bounded
    // time, while reclaim gives space back (deletes being purged, segments
    // the pass or a delete left dead), the way a file system flushes its
    // pending frees before it answers ENOSPC. Meanwhile the pass yields.
    Status admit_write(std::uint64_t len, std::optional<Admission>* out);
    std::atomic<int> room_waiters_{0};
    std::unique_ptr<ModeController> controller_;
    HistoryRecorder history_;  // the control thread's
    Clock* clock_ = nullptr;   // the controller's

    std::atomic<bool> commit_failed_{false};  // logged once
    std::atomic<bool> deferred_{false};
    std::unique_ptr<BackgroundPass> pass_;
    std::atomic<std::uint64_t> read_errors_{0};  // chunk reads that failed verification
    std::atomic<std::uint64_t> reads_beside_sweep_{0};  // reads that did not wait for the pass
    std::atomic<std::uint64_t> sweeps_yielded_{0};  // sweeps stopped early for the throttle
    std::atomic<std::uint64_t> damaged_chunks_{0};  // chunks flagged kDamaged since open

    ReclaimMode reclaim_mode_ = ReclaimMode::kOff;
    std::mutex reclaim_mu_;  // one reclaim step at a time
    std::unique_ptr<Compactor> compactor_;
    std::unique_ptr<Reclaimer> reclaimer_;
    std::atomic<std::uint64_t> deletes_queued_{0};  // large deletes handed to the reclaimer
    std::atomic<std::uint64_t> deletes_done_{0};    // deleted files the reclaimer freed
};

// ---------------------------------------------------------------------------
// Opening and closing

Status EngineImpl::check_space(std::uint64_t len, std::uint64_t keep, bool admitted) {
    if (space_reserve_ == 0) return Status::ok();
    // Far from the reserve, the last statvfs less what was asked for since
    // answers without a system call per write request; it is refreshed at
    // least every second, and on every request once within kSpaceSlack.
    constexpr std::uint64_t kSpaceSlack = 64ull << 20;
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    const std::uint64_t known = known_avail_.load(std::memory_order_relaxed);
    const std::uint64_t since = asked_since_.fetch_add(len, std::memory_order_relaxed) + len;
    if (now - known_at_.load(std::memory_order_relaxed) < std::int64_t{1'000'000'000} &&
        known > since && known - since > keep && known - since - keep >= kSpaceSlack)
        return Status::ok();
    struct statvfs v {};
    if (::statvfs(opts_.store_dir.c_str(), &v) != 0) return Status::ok();  // let the write say
    std::uint64_t avail = std::uint64_t{v.f_bavail} * v.f_frsize;
    known_avail_.store(avail, std::memory_order_relaxed);
    std::uint64_t pending = admitted_.load(std::memory_order_relaxed);
    if (admitted) pending -= std::min(pending, len);
    avail -= std::min(avail, pending);
    asked_since_.store(0, std::memory_order_relaxed);
    known_at_.store(now, std::memory_order_relaxed);
    if (avail < keep || avail - keep < len)
        return Status::error(ENOSPC, "the store's file system is full (" +
                                         std::to_string(space_reserve_ >> 20) +
                                         " MiB kept for metadata and reclaim)");
    return Status::ok();
}

Status EngineImpl::admit_write(std::uint64_t len, std::optional<Admission>* out) {
    Status st = admit(len, out);
    if (st || st.err() != ENOSPC || !reclaimer_) return st;
    // Waits while reclaim makes progress (segment bytes on disk shrink, or a
    // deleted file is purged), at most kGiveUp without any and kMaxWait in all.
    constexpr auto kPoll = std::chrono::milliseconds(50);
    constexpr auto kGiveUp = std::chrono::milliseconds(2500);  // the reclaimer polls every second
    constexpr auto kMaxWait = std::chrono::seconds(20);
    room_waiters_.fetch_add(1);
    struct Leave {
        std::atomic<int>& n;
        ~Leave() { n.fetch_sub(1); }
    } leave{room_waiters_};
    const auto start = std::chrono::steady_clock::now();
    auto last_progress = start;
    std::uint64_t disk = segs_->disk_bytes();
    std::uint64_t purged = deletes_done_.load();
    while (!st && st.err() == ENOSPC) {
        reclaimer_->wake();
        std::this_thread::sleep_for(kPoll);
        const auto now = std::chrono::steady_clock::now();
        const std::uint64_t d = segs_->disk_bytes(), p = deletes_done_.load();
        if (d < disk || p > purged) last_progress = now;
        disk = std::min(disk, d);
        purged = std::max(purged, p);
        known_at_.store(0, std::memory_order_relaxed);  // a fresh statvfs
        st = check_space(len, space_reserve_, true);
        if (now - last_progress > kGiveUp || now - start > kMaxWait) break;
    }
    return st;
}

Status EngineImpl::init(const EngineOptions& options) {
    opts_ = options;
    env_ = options.env != nullptr ? options.env : Env::posix();
    uid_ = ::getuid();
    gid_ = ::getgid();
    const std::string& dir = options.store_dir;
    if (dir.empty()) return Status::error(EINVAL, "no store directory given");

    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno != ENOENT) return Status::from_errno(errno, "store " + dir);
        if (!options.create_if_missing || options.read_only)
            return Status::error(ENOENT, "store " + dir + " does not exist");
        if (::mkdir(dir.c_str(), 0700) != 0)
            return Status::from_errno(errno, "cannot create store directory " + dir);
    } else if (!S_ISDIR(st.st_mode)) {
        return Status::error(ENOTDIR, "store " + dir + " is not a directory");
    }
    if (::access(dir.c_str(), options.read_only ? R_OK | X_OK : R_OK | W_OK | X_OK) != 0)
        return Status::from_errno(errno, "store " + dir + " is not accessible");

    HIODSFS_TRY(StoreLock::acquire(dir, !options.read_only, options.lock_wait_ms, &lock_));
    struct statvfs fsv {};
    const std::uint64_t fs_bytes =
        ::statvfs(dir.c_str(), &fsv) == 0 ? std::uint64_t{fsv.f_blocks} * fsv.f_frsize : 0;
    const SpaceBudget budget =
        plan_space(fs_bytes, options.segments.max_segment_bytes, options.space_reserve);
    space_reserve_ = budget.reserve;
    compaction_floor_ = budget.metadata_floor;

    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(env_, dir, &format, &exists));
    bool fresh = !exists;
    if (exists) {
        HIODSFS_TRY(check_format_version(dir, format));
        if (options.chunking_given && !(options.chunking == format.chunking))
            return Status::error(EINVAL, "store " + dir + " was made with chunking " +
                                             format.chunking.describe() +
                                             " and cannot be opened with " +
                                             options.chunking.describe());
        chunking_ = format.chunking;
    } else {
        std::vector<std::string> names;
        HIODSFS_TRY(env_->list_dir(dir, &names));
        for (const auto& n : names)
            if (n != "." && n != ".." && n != "lock")
                return Status::error(EEXIST, "store " + dir +
                                                 " is not empty and is not a hiodsfs store");
        if (options.read_only) return Status::error(ENOENT, "store " + dir + " is not a hiodsfs store");
        HIODSFS_TRY(options.chunking.validate());
        chunking_ = options.chunking;
    }

    // The metadata first: it says which segment bytes are committed, and a
    // store whose metadata is gone or damaged is refused before anything
    // of it is touched (a fresh environment would disown every segment).
    MetaStoreOptions meta_options;
    meta_options.map_bytes = options.lmdb_map_bytes;
    meta_options.read_only = options.read_only;
    meta_options.create = fresh;
    meta_options.commit_fault = options.commit_fault;
    const std::string fsck_hint = "; nothing was changed; hiodsfs-fsck " + dir + " tells more";
    Status opened = MetaStore::open(dir + "/meta", meta_options, &meta_);
    if (!opened) {
        return Status::error(opened.err() == ENOENT ? EUCLEAN : opened.err(),
                             "store " + dir + " cannot be opened: its metadata is unreadable (" +
                                 opened.message() + ")" + fsck_hint);
    }
    if (!fresh && !meta_->had_super())
        return Status::error(EUCLEAN, "store " + dir + " cannot be opened: its metadata has no "
                                          "state record (made anew or damaged)" + fsck_hint);
    if (!fresh) {
        opened = meta_->verify();
        if (!opened) return Status::error(EUCLEAN, "store " + dir + " cannot be opened: " + opened.message() + fsck_hint);
    }
    const SuperState committed = meta_->super_snapshot();
    SegmentStoreOptions seg_options = options.segments;
    seg_options.max_segment_bytes = budget.segment_bytes;
    seg_options.read_only = options.read_only;  // a read-only open must not cut a torn tail under a daemon
    seg_options.committed = SegmentPosition{static_cast<SegmentId>(committed.frontier_segment),
                                            committed.frontier_offset};
    opened = SegmentStore::open(env_, dir + "/segments", seg_options, &segs_);
    if (opened.err() == EUCLEAN)
        return Status::error(EUCLEAN, "store " + dir + " cannot be opened read-write: " + opened.message() +
                                          fsck_hint + " (mount with -o ro to copy out the rest)");
    HIODSFS_TRY(opened);
    if (!fresh) HIODSFS_TRY(check_segment_files(committed, fsck_hint));

    if (fresh) {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        Inode root;
        root.r.mode = S_IFDIR | 0755;
        root.r.nlink = 2;
        root.r.uid = uid_;
        root.r.gid = gid_;
        root.r.parent = kRootInode;
        auto now = now_ts();
        set_time(&root.r.atime_s, &root.r.atime_ns, now);
        set_time(&root.r.mtime_s, &root.r.mtime_ns, now);
        set_time(&root.r.ctime_s, &root.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, kRootInode, root));
        t->super() = SuperState{};
        t->super().counters.inode_count = 1;
        HIODSFS_TRY(t->commit());
        t.reset();
        HIODSFS_TRY(commit_now());
        // FORMAT last: a store without it is unfinished and may be made again.
        HIODSFS_TRY(write_store_format(env_, dir, StoreFormat{kFormatVersion, chunking_}));
    }
    // Opened and accepted: files left more open than 0600/0700 are tightened.
    if (!options.read_only) HIODSFS_TRY(make_store_private(dir));
    reclaim_mode_ = options.reclaim;
    if (reclaim_mode_ == ReclaimMode::kBackground && !options.background_commit)
        reclaim_mode_ = ReclaimMode::kOff;
    if (!options.read_only)
        compactor_ = std::make_unique<Compactor>(meta_.get(), segs_.get(),
                                                 [this] { return commit_now(); },
                                                 options.compact_threshold);
    if (compactor_)
        compactor_->set_room_for(
            [this](std::uint64_t bytes) { return check_space(bytes, compaction_floor_).is_ok(); });
    if (!fresh && !options.read_only) {
        // Inodes unlinked while open when the store was last closed or
        // crashed, and large deletes still queued: freed now, except that
        // large files are left to the reclaimer when it runs.
        std::vector<InodeId> orphans;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            Cursor c = t->cursor(Db::kOrphans);
            for (bool ok = c.first(); ok; ok = c.next()) orphans.push_back(get_be64(c.key()));
            HIODSFS_TRY(c.status());
        }
        for (InodeId ino : orphans) {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            HIODSFS_TRY(free_inode(*t, ino));
            HIODSFS_TRY(t->commit());
        }
        if (!orphans.empty()) HIODSFS_TRY(commit_now());
    }

    HIODSFS_TRY(options.control.validate());
    auto setting = options.mode == DedupMode::kInline     ? ModeController::Setting::kInline
                   : options.mode == DedupMode::kDeferred ? ModeController::Setting::kDeferred
                                                          : ModeController::Setting::kHybrid;
    std::unique_ptr<ModePolicy> policy;
    if (setting == ModeController::Setting::kHybrid && !options.policy.empty()) {
        std::string error;
        policy = make_policy(options.policy, options.control, &error);
        if (!policy) return Status::error(EINVAL, error);
    }
    Clock* clock = options.clock != nullptr ? options.clock : Clock::system();
    clock_ = clock;
    controller_ = std::make_unique<ModeController>(clock, options.control, setting, std::move(policy));
    deferred_.store(controller_->mode() == WriteMode::kDeferred);
    if (options.read_only) return Status::ok();
    if (options.background_commit) committer_ = std::thread([this] { committer_loop(); });
    if (options.background_threads > 0) {
        pass_ = std::make_unique<BackgroundPass>(
            static_cast<DedupTarget*>(this), [this] { return background_speed(); },
            options.background_threads);
        pass_->start();
    }
    if (options.background_commit) control_ = std::thread([this] { control_loop(); });
    if (reclaim_mode_ == ReclaimMode::kBackground) {
        reclaimer_ = std::make_unique<Reclaimer>(static_cast<ReclaimTarget*>(this),
                                                 [this] { return background_speed(); });
        reclaimer_->start();
    }
    return Status::ok();
}

void EngineImpl::stop_committer() {
    {
        std::lock_guard<std::mutex> l(committer_mu_);
        stop_ = true;
    }
    committer_cv_.notify_all();
    if (committer_.joinable()) committer_.join();
    if (control_.joinable()) control_.join();
}

Status EngineImpl::close() {
    if (closed_) return Status::ok();
    if (reclaimer_) reclaimer_->stop();  // queued deletes stay queued; a half-copied segment stays
    if (pass_) pass_->stop();  // unfinished records stay queued for the next open
    stop_committer();
    Status result;
    if (meta_ && !meta_->read_only()) {
        std::vector<std::pair<InodeId, std::shared_ptr<Stream>>> all;
        {
            std::lock_guard<std::mutex> l(streams_mu_);
            all.assign(streams_.begin(), streams_.end());
        }
        for (auto& [ino, s] : all) {
            std::lock_guard<std::mutex> l(s->mu);
            Status st = close_stream(ino, *s);
            if (!st && result) result = st;
        }
        Status st = commit_now();
        if (!st && result) result = st;
    }
    closed_ = true;
    compactor_.reset();
    meta_.reset();
    segs_.reset();
    lock_.reset();
    return result;
}

void EngineImpl::abandon() {
    if (reclaimer_) reclaimer_->stop();
    if (pass_) pass_->stop();
    stop_committer();
    closed_ = true;
    {
        std::lock_guard<std::mutex> l(streams_mu_);
        streams_.clear();
    }
    compactor_.reset();
    meta_.reset();  // aborts the open group
    segs_.reset();
    lock_.reset();
}

Status EngineImpl::commit_now() {
    std::lock_guard<std::mutex> serial(commit_mu_);
    // Most data is synced before taking the metadata lock; the second sync,
    // under it, covers what was appended meanwhile and is usually cheap.
    HIODSFS_TRY(segs_->sync());
    Status st = meta_->commit_group([this](SuperState* state) {
        SegmentPosition synced;
        HIODSFS_TRY(segs_->sync(&synced));
        state->frontier_segment = synced.segment;
        state->frontier_offset = synced.offset;
        return Status::ok();
    });
    if (!st && st.err() == EIO && !commit_failed_.exchange(true) && opts_.log)
        opts_.log("hiodsfs: " + st.message());
    return st;
}

// Segment files against what committed metadata says of them, at open.
Status EngineImpl::check_segment_files(const SuperState& committed, const std::string& hint) {
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    std::map<SegmentId, std::uint64_t> on_disk(files.begin(), files.end());
    std::vector<SegmentId> gone, beyond;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        std::set<SegmentId> known;
        Cursor c = t->cursor(Db::kSegments);
        for (bool ok = c.first(); ok; ok = c.next()) {
            if (c.key().size() != 8 || c.value().size() != 8) continue;  // fsck's to repair
            const auto seg = static_cast<SegmentId>(get_be64(c.key()));
            const std::uint64_t live = get_be64(c.value());
            known.insert(seg);
            auto it = on_disk.find(seg);
            if (it == on_disk.end() && live == 0) {
                gone.push_back(seg);  // deleted, and the metadata not told before a crash
            } else if (it == on_disk.end() || it->second < live) {
                if (opts_.read_only) continue;  // reads of it fail with EIO; copy out the rest
                return Status::error(
                    EUCLEAN, "store " + opts_.store_dir + " cannot be opened read-write: segment " +
                                 std::to_string(seg) + " holds " + std::to_string(live) +
                                 " bytes of file data by the committed metadata, but its file " +
                                 (it == on_disk.end() ? "is missing"
                                                      : "has only " + std::to_string(it->second) + " bytes") +
                                 hint + " (mount with -o ro to copy out the rest)");
            }
        }
        HIODSFS_TRY(c.status());
        // Segments made after the last commit hold nothing committed metadata
        // refers to (a crash): recorded as dead, so reclaim may remove them.
        // Others without an entry are kept and left to hiodsfs-fsck.
        if (committed.frontier_segment != 0) {
            for (const auto& [seg, size] : on_disk)
                if (seg > committed.frontier_segment && known.count(seg) == 0) beyond.push_back(seg);
        }
    }
    if (opts_.read_only || (gone.empty() && beyond.empty())) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    for (SegmentId seg : gone) HIODSFS_TRY(t->del(Db::kSegments, key_u64(seg)));
    for (SegmentId seg : beyond) HIODSFS_TRY(add_segment_live(*t, seg, 0));
    return t->commit();
}

// Every control interval: sample the load, let the controller pick the write
// path and the background speed, and publish the status for hiodsfs-stat.
void EngineImpl::control_loop() {
    std::unique_lock<std::mutex> l(committer_mu_);
    auto interval = std::chrono::milliseconds(std::max<std::uint64_t>(opts_.control.interval_ms, 10));
    std::uint64_t last_processed = 0;
    while (!stop_) {
        committer_cv_.wait_for(l, interval, [this] { return stop_; });
        if (stop_) break;
        l.unlock();
        SpaceCounters c;
        if (counters(&c)) {
            std::uint64_t processed = pass_ ? pass_->processed_bytes() : 0;
            IntervalSample s =
                controller_->tick(c.backlog_records, c.backlog_bytes, processed - last_processed);
            last_processed = processed;
            if (controller_->setting() == ModeController::Setting::kHybrid)
                deferred_.store(controller_->mode() == WriteMode::kDeferred);
            (void)record_history(s, c);  // best effort: history is informational
            if (opts_.publish_status) (void)publish_status();
        }
        l.lock();
    }
}

// A sample of Db::kHistory now and then (see history.h), folded into the
// open group like any operation.
Status EngineImpl::record_history(const IntervalSample& s, const SpaceCounters& c) {
    HistoryEntry e;
    if (!history_.tick(s, wall_ns(), deferred_.load() ? WriteMode::kDeferred : WriteMode::kInline,
                       c, &e))
        return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(append_history(*t, e));
    return t->commit();
}

void EngineImpl::committer_loop() {
    std::unique_lock<std::mutex> l(committer_mu_);
    auto interval = std::chrono::milliseconds(std::max<std::uint32_t>(opts_.commit_interval_ms, 1));
    while (!stop_) {
        committer_cv_.wait_for(l, interval, [this] { return stop_; });
        if (stop_) break;
        l.unlock();
        if (meta_->pending_ops() > 0) (void)commit_now();  // errors resurface on fsync
        l.lock();
    }
}

// ---------------------------------------------------------------------------
// Metadata helpers

Status EngineImpl::load_inode(Txn& t, InodeId ino, Inode* out) {
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kInodes, key_u64(ino), &v, &found));
    if (!found) return Status::error(ENOENT, "inode " + std::to_string(ino) + " does not exist");
    if (!from_bytes(v, &out->r))
        return Status::error(EUCLEAN, "inode " + std::to_string(ino) + " record is damaged");
    out->target.assign(v.substr(sizeof(InodeRecord)));
    return Status::ok();
}

Status EngineImpl::store_inode(Txn& t, InodeId ino, const Inode& in) {
    std::string v(as_bytes(in.r));
    v += in.target;
    return t.put(Db::kInodes, key_u64(ino), v);
}

Status EngineImpl::lookup_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* out,
                                bool* found) {
    std::string_view v;
    HIODSFS_TRY(t.get(Db::kDirents, key_u64_str(parent, name), &v, found));
    if (*found && !from_bytes(v, out))
        return Status::error(EUCLEAN, "directory entry record is damaged");
    return Status::ok();
}

Status EngineImpl::load_dir(Txn& t, InodeId ino, Inode* out) {
    HIODSFS_TRY(load_inode(t, ino, out));
    if (!is_dir(out->r.mode)) return Status::error(ENOTDIR, "not a directory");
    if (out->r.nlink == 0) return Status::error(ENOENT, "directory was removed");
    return Status::ok();
}

Status EngineImpl::resolve_entry(Txn& t, InodeId parent, std::string_view name,
                                 DirentValue* entry, Inode* child) {
    Inode dir;
    HIODSFS_TRY(load_dir(t, parent, &dir));
    bool found = false;
    HIODSFS_TRY(lookup_entry(t, parent, name, entry, &found));
    if (!found) return Status::error(ENOENT, "no such entry");
    return load_inode(t, entry->ino, child);
}

Status EngineImpl::dir_is_empty(Txn& t, InodeId dir, bool* empty) {
    Cursor c = t.cursor(Db::kDirents);
    std::string prefix = key_u64(dir);
    *empty = !(c.seek(prefix) && c.key().substr(0, 8) == prefix);
    return c.status();
}

Status EngineImpl::touch_dir(Txn& t, InodeId dir, int nlink_delta) {
    Inode d;
    HIODSFS_TRY(load_inode(t, dir, &d));
    auto now = now_ts();
    set_time(&d.r.mtime_s, &d.r.mtime_ns, now);
    set_time(&d.r.ctime_s, &d.r.ctime_ns, now);
    d.r.nlink = static_cast<std::uint32_t>(static_cast<std::int64_t>(d.r.nlink) + nlink_delta);
    return store_inode(t, dir, d);
}

Attr EngineImpl::to_attr(InodeId ino, const Inode& in) const {
    Attr a;
    a.ino = ino;
    a.mode = in.r.mode;
    a.nlink = in.r.nlink;
    a.uid = in.r.uid;
    a.gid = in.r.gid;
    a.rdev = in.r.rdev;
    if (is_dir(in.r.mode)) {
        a.size = 4096;
        a.blocks = 8;
    } else if (S_ISLNK(in.r.mode)) {
        a.size = in.target.size();
    } else {
        a.size = in.r.size;
        a.blocks = (in.r.mapped + 511) / 512;
    }
    a.atime = get_time(in.r.atime_s, in.r.atime_ns);
    a.mtime = get_time(in.r.mtime_s, in.r.mtime_ns);
    a.ctime = get_time(in.r.ctime_s, in.r.ctime_ns);
    return a;
}

Status EngineImpl::extents_in(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                              std::vector<MappedExtent>* out) {
    Cursor c = t.cursor(Db::kExtents);
    std::string k = key_u64_u64(ino, off);
    bool ok = c.seek(k);
    // The extent before `off` may reach into the range.
    if (ok) {
        if (c.key() != k) ok = c.prev() || (c.status() ? c.seek(k) : false);
    } else {
        HIODSFS_TRY(c.status());
        ok = c.last();
    }
    for (; ok; ok = c.next()) {
        std::string_view key = c.key();
        if (key.size() != 16) return Status::error(EUCLEAN, "extent key is damaged");
        InodeId kino = get_be64(key, 0);
        if (kino < ino) continue;
        if (kino > ino) break;
        MappedExtent m;
        m.start = get_be64(key, 8);
        if (m.start >= end) break;
        if (!from_bytes(c.value(), &m.e)) return Status::error(EUCLEAN, "extent record is damaged");
        if (m.end() > off) out->push_back(m);
    }
    return c.status();
}

Status EngineImpl::chunk_ref(Txn& t, ChunkId id, std::int64_t delta) {
    if (delta == 0) return Status::ok();
    std::string k = key_u64(id);
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kChunks, k, &v, &found));
    ChunkRecord rec;
    if (!found || !from_bytes(v, &rec))
        return Status::error(EUCLEAN, "chunk " + std::to_string(id) + " is missing or damaged");
    const std::uint64_t refs = rec.refs();
    if (delta < 0 && refs < static_cast<std::uint64_t>(-delta))
        return Status::error(EUCLEAN, "chunk " + std::to_string(id) + " reference count underflow");
    if (delta > 0 && ChunkRecord::kMaxRefs - refs < static_cast<std::uint64_t>(delta))
        return Status::error(EOVERFLOW, "chunk " + std::to_string(id) + " is shared by too many extents");
    rec.set_refs(refs + static_cast<std::uint64_t>(delta));
    if (rec.refs() > 0) return t.put(Db::kChunks, k, as_bytes(rec));

    // Last reference gone: the bytes are dead (reclaimable by compaction).
    HIODSFS_TRY(t.del(Db::kChunks, k));
    HIODSFS_TRY(unindex_chunk(t, id, rec));
    HIODSFS_TRY(add_segment_live(t, rec.segment, -static_cast<std::int64_t>(rec.length)));
    auto& c = t.super().counters;
    if (!(rec.flags & ChunkRecord::kIndexed)) c.raw_bytes -= rec.length;
    c.stored_bytes -= rec.length;
    c.chunk_count -= 1;
    c.dead_bytes += rec.length;
    return Status::ok();
}

Status EngineImpl::replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off,
                                 std::uint64_t len, const ExtentRecord* add) {
    std::uint64_t end = len > kMaxFileSize - std::min(off, kMaxFileSize) ? kMaxFileSize : off + len;
    std::vector<MappedExtent> old;
    HIODSFS_TRY(extents_in(t, ino, off, end, &old));
    auto& c = t.super().counters;
    for (const auto& m : old) {
        HIODSFS_TRY(t.del(Db::kExtents, key_u64_u64(ino, m.start)));
        int pieces = 0;
        if (m.start < off) {
            ExtentRecord left = m.e;
            left.length = static_cast<std::uint32_t>(off - m.start);
            HIODSFS_TRY(t.put(Db::kExtents, key_u64_u64(ino, m.start), as_bytes(left)));
            ++pieces;
        }
        if (m.end() > end) {
            ExtentRecord right = m.e;
            right.chunk_off = static_cast<std::uint32_t>(m.e.chunk_off + (end - m.start));
            right.length = static_cast<std::uint32_t>(m.end() - end);
            HIODSFS_TRY(t.put(Db::kExtents, key_u64_u64(ino, end), as_bytes(right)));
            ++pieces;
        }
        std::uint64_t removed = std::min(m.end(), end) - std::max(m.start, off);
        inode.r.mapped -= removed;
        c.logical_bytes -= removed;
        HIODSFS_TRY(chunk_ref(t, m.e.chunk, pieces - 1));
    }
    return add != nullptr ? map_extent(t, ino, inode, off, *add) : Status::ok();
}

Status EngineImpl::map_extent(Txn& t, InodeId ino, Inode& inode, std::uint64_t off,
                              const ExtentRecord& e) {
    HIODSFS_TRY(t.put(Db::kExtents, key_u64_u64(ino, off), as_bytes(e)));
    inode.r.mapped += e.length;
    t.super().counters.logical_bytes += e.length;
    return Status::ok();
}

Status EngineImpl::store_chunk(Txn& t, const std::uint8_t* data, std::uint32_t len,
                               const Digest& digest, ExtentRecord* out, SegmentGains* gains) {
    auto& c = t.super().counters;
    std::string fk = fingerprint_key(digest);
    std::string_view fv;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kFingerprints, fk, &fv, &found));
    if (found) {
        if (fv.size() != 8) return Status::error(EUCLEAN, "fingerprint index record is damaged");
        ChunkId id = get_be64(fv);
        HIODSFS_TRY(chunk_ref(t, id, +1));
        c.dedup_hits += 1;
        *out = ExtentRecord{id, 0, len};
        return Status::ok();
    }
    ChunkId id = t.super().next_chunk++;
    ChunkLocation loc;
    HIODSFS_TRY(segs_->append(id, data, len, &loc));
    ChunkRecord rec;
    rec.segment = loc.segment;
    rec.offset = loc.offset;
    rec.length = len;
    rec.set_refs(1);
    rec.flags = ChunkRecord::kIndexed;
    rec.digest = digest;
    HIODSFS_TRY(t.put(Db::kChunks, key_u64(id), as_bytes(rec)));
    HIODSFS_TRY(t.put(Db::kFingerprints, fk, key_u64(id)));
    if (gains == nullptr) {
        HIODSFS_TRY(add_segment_live(t, loc.segment, len));
    } else if (!gains->empty() && gains->back().first == loc.segment) {
        gains->back().second += len;
    } else {
        gains->emplace_back(loc.segment, len);
    }
    c.stored_bytes += len;
    c.chunk_count += 1;
    *out = ExtentRecord{id, 0, len};
    return Status::ok();
}

Status EngineImpl::purge_inode(Txn& t, InodeId ino) {
    Inode in;
    Status st = load_inode(t, ino, &in);
    if (st.err() == ENOENT) return t.del(Db::kOrphans, key_u64(ino));
    HIODSFS_TRY(st);
    if (S_ISREG(in.r.mode)) HIODSFS_TRY(replace_range(t, ino, in, 0, kMaxFileSize, nullptr));
    std::vector<std::string> xattr_keys;
    {
        std::string prefix = key_u64(ino);
        Cursor c = t.cursor(Db::kXattrs);
        for (bool ok = c.seek(prefix); ok && c.key().substr(0, 8) == prefix; ok = c.next())
            xattr_keys.emplace_back(c.key());
        HIODSFS_TRY(c.status());
    }
    for (const auto& k : xattr_keys) HIODSFS_TRY(t.del(Db::kXattrs, k));
    HIODSFS_TRY(t.del(Db::kInodes, key_u64(ino)));
    HIODSFS_TRY(t.del(Db::kOrphans, key_u64(ino)));
    t.super().counters.inode_count -= 1;
    if (S_ISREG(in.r.mode)) t.super().counters.file_count -= 1;
    return Status::ok();
}

bool EngineImpl::pinned(InodeId ino) {
    std::lock_guard<std::mutex> l(pins_mu_);
    return pins_.count(ino) != 0;
}

Status EngineImpl::release_inode(Txn& t, InodeId ino) {
    if (pinned(ino)) return t.put(Db::kOrphans, key_u64(ino), "");
    drop_stream(ino, true);
    return free_inode(t, ino);
}

void EngineImpl::drop_stream(InodeId ino, bool file_gone) {
    std::lock_guard<std::mutex> l(streams_mu_);
    auto it = streams_.find(ino);
    // Copies are only made under streams_mu_, so a count of one (the map's)
    // means nobody holds it and nobody can get it without this lock; its own
    // lock is then free, and taking it orders this read of `active` after
    // the last holder's writes. An active stream holds bytes not yet
    // chunked: it stays unless the file itself is gone.
    if (it == streams_.end() || it->second.use_count() != 1 || pinned(ino)) return;
    std::unique_lock<std::mutex> sl(it->second->mu, std::try_to_lock);
    if (!sl.owns_lock() || (!file_gone && it->second->active)) return;
    sl.unlock();
    streams_.erase(it);
}

// ---------------------------------------------------------------------------
// Namespace

Status EngineImpl::lookup(InodeId parent, std::string_view name, Attr* out) {
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    *out = to_attr(d.ino, in);
    return Status::ok();
}

Status EngineImpl::getattr(InodeId ino, Attr* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::setattr(InodeId ino, const SetAttr& ch, Attr* out) {
    if (ch.valid & SetAttr::kSize) {
        if (ch.size > kMaxFileSize) return Status::error(EFBIG, "file size too large");
        auto s = stream(ino);
        std::lock_guard<std::mutex> l(s->mu);
        Inode in;
        HIODSFS_TRY(regular_file(ino, &in));
        HIODSFS_TRY(truncate_locked(ino, *s, ch.size));
    }
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    auto now = now_ts();
    if (ch.valid & SetAttr::kMode) in.r.mode = (in.r.mode & S_IFMT) | (ch.mode & 07777);
    if (ch.valid & SetAttr::kUid) in.r.uid = ch.uid;
    if (ch.valid & SetAttr::kGid) in.r.gid = ch.gid;
    if (ch.valid & SetAttr::kAtimeNow) set_time(&in.r.atime_s, &in.r.atime_ns, now);
    else if (ch.valid & SetAttr::kAtime) set_time(&in.r.atime_s, &in.r.atime_ns, ch.atime);
    if (ch.valid & SetAttr::kMtimeNow) set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    else if (ch.valid & SetAttr::kMtime) set_time(&in.r.mtime_s, &in.r.mtime_ns, ch.mtime);
    if (ch.valid & SetAttr::kCtime) set_time(&in.r.ctime_s, &in.r.ctime_ns, ch.ctime);
    else if (ch.valid != 0) set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    HIODSFS_TRY(t->commit());
    if (out != nullptr) *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::create(InodeId parent, std::string_view name, const NewNode& node, Attr* out) {
    HIODSFS_TRY(check_name(name));
    std::uint32_t type = node.mode & S_IFMT;
    if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO &&
        type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK)
        return Status::error(EINVAL, "unknown file type");
    if (type == S_IFLNK && (node.symlink_target.empty() || node.symlink_target.size() > kMaxSymlink))
        return Status::error(node.symlink_target.empty() ? ENOENT : ENAMETOOLONG, "bad symlink target");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode dir;
    HIODSFS_TRY(load_dir(*t, parent, &dir));
    DirentValue existing;
    bool found = false;
    HIODSFS_TRY(lookup_entry(*t, parent, name, &existing, &found));
    if (found) return Status::error(EEXIST, "entry exists");

    InodeId ino = t->super().next_ino++;
    Inode in;
    in.r.mode = node.mode;
    in.r.uid = node.uid;
    in.r.gid = node.gid;
    in.r.rdev = (type == S_IFCHR || type == S_IFBLK) ? node.rdev : 0;
    in.r.nlink = type == S_IFDIR ? 2 : 1;
    in.r.parent = type == S_IFDIR ? parent : 0;
    auto now = now_ts();
    set_time(&in.r.atime_s, &in.r.atime_ns, now);
    set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    if (type == S_IFLNK) in.target = node.symlink_target;
    HIODSFS_TRY(store_inode(*t, ino, in));
    DirentValue d{ino, type, 0};
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(parent, name), as_bytes(d)));
    for (const auto& [xname, xvalue] : node.xattrs)
        HIODSFS_TRY(t->put(Db::kXattrs, key_u64_str(ino, xname), xvalue));
    HIODSFS_TRY(touch_dir(*t, parent, type == S_IFDIR ? 1 : 0));
    t->super().counters.inode_count += 1;
    if (type == S_IFREG) t->super().counters.file_count += 1;
    HIODSFS_TRY(t->commit());
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::readlink(InodeId ino, std::string* target) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (!S_ISLNK(in.r.mode)) return Status::error(EINVAL, "not a symlink");
    *target = in.target;
    return Status::ok();
}

Status EngineImpl::link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out) {
    HIODSFS_TRY(check_name(new_name));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (is_dir(in.r.mode)) return Status::error(EPERM, "hard link to a directory");
    if (in.r.nlink == 0) return Status::error(ENOENT, "file was removed");
    if (in.r.nlink >= 65000) return Status::error(EMLINK, "too many links");
    Inode dir;
    HIODSFS_TRY(load_dir(*t, new_parent, &dir));
    DirentValue existing;
    bool found = false;
    HIODSFS_TRY(lookup_entry(*t, new_parent, new_name, &existing, &found));
    if (found) return Status::error(EEXIST, "entry exists");
    in.r.nlink += 1;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    DirentValue d{ino, in.r.mode & S_IFMT, 0};
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), as_bytes(d)));
    HIODSFS_TRY(touch_dir(*t, new_parent, 0));
    HIODSFS_TRY(t->commit());
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::unlink(InodeId parent, std::string_view name) {
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(touch_dir(*t, parent, 0));
    in.r.nlink -= 1;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, d.ino, in));
    if (in.r.nlink == 0) HIODSFS_TRY(release_inode(*t, d.ino));
    return t->commit();
}

Status EngineImpl::rmdir(InodeId parent, std::string_view name) {
    if (name == ".") return Status::error(EINVAL, "cannot remove '.'");
    if (name == "..") return Status::error(ENOTEMPTY, "cannot remove '..'");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    if (!is_dir(in.r.mode)) return Status::error(ENOTDIR, "not a directory");
    bool empty = false;
    HIODSFS_TRY(dir_is_empty(*t, d.ino, &empty));
    if (!empty) return Status::error(ENOTEMPTY, "directory not empty");
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(touch_dir(*t, parent, -1));
    in.r.nlink = 0;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, d.ino, in));
    HIODSFS_TRY(release_inode(*t, d.ino));
    return t->commit();
}

Status EngineImpl::rename(InodeId parent, std::string_view name, InodeId new_parent,
                          std::string_view new_name, unsigned flags) {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return Status::error(EINVAL, "unsupported rename flags");
    if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
        return Status::error(EINVAL, "RENAME_NOREPLACE with RENAME_EXCHANGE");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    HIODSFS_TRY(check_name(new_name));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode pdir, ndir;
    HIODSFS_TRY(load_dir(*t, parent, &pdir));
    HIODSFS_TRY(load_dir(*t, new_parent, &ndir));
    DirentValue src, dst;
    bool have_src = false, have_dst = false;
    HIODSFS_TRY(lookup_entry(*t, parent, name, &src, &have_src));
    if (!have_src) return Status::error(ENOENT, "no such entry");
    HIODSFS_TRY(lookup_entry(*t, new_parent, new_name, &dst, &have_dst));
    if ((flags & RENAME_EXCHANGE) && !have_dst) return Status::error(ENOENT, "exchange target missing");
    if ((flags & RENAME_NOREPLACE) && have_dst) return Status::error(EEXIST, "target exists");
    if (have_dst && dst.ino == src.ino) return Status::ok();  // the same file: nothing to do

    Inode sin;
    HIODSFS_TRY(load_inode(*t, src.ino, &sin));
    bool src_dir = is_dir(sin.r.mode);
    Inode din;
    if (have_dst) HIODSFS_TRY(load_inode(*t, dst.ino, &din));
    bool dst_dir = have_dst && is_dir(din.r.mode);

    // A directory may not move below itself.
    auto check_not_below = [&](InodeId moving, InodeId into) -> Status {
        InodeId cur = into;
        for (int depth = 0; depth < 100000; ++depth) {
            if (cur == moving) return Status::error(EINVAL, "cannot move a directory below itself");
            if (cur == kRootInode) return Status::ok();
            Inode ci;
            HIODSFS_TRY(load_inode(*t, cur, &ci));
            cur = ci.r.parent;
        }
        return Status::error(ELOOP, "directory tree too deep");
    };
    auto now = now_ts();

    if (flags & RENAME_EXCHANGE) {
        if (parent != new_parent) {
            if (src_dir) HIODSFS_TRY(check_not_below(src.ino, new_parent));
            if (dst_dir) HIODSFS_TRY(check_not_below(dst.ino, parent));
        }
        HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(parent, name), as_bytes(dst)));
        HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), as_bytes(src)));
        if (src_dir) sin.r.parent = new_parent;
        if (dst_dir) din.r.parent = parent;
        set_time(&sin.r.ctime_s, &sin.r.ctime_ns, now);
        set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, src.ino, sin));
        HIODSFS_TRY(store_inode(*t, dst.ino, din));
        int delta = (src_dir ? 1 : 0) - (dst_dir ? 1 : 0);
        if (parent != new_parent) {
            HIODSFS_TRY(touch_dir(*t, parent, -delta));
            HIODSFS_TRY(touch_dir(*t, new_parent, delta));
        } else {
            HIODSFS_TRY(touch_dir(*t, parent, 0));
        }
        return t->commit();
    }

    if (src_dir) {
        if (have_dst && !dst_dir) return Status::error(ENOTDIR, "target is not a directory");
        if (parent != new_parent) HIODSFS_TRY(check_not_below(src.ino, new_parent));
    } else if (dst_dir) {
        return Status::error(EISDIR, "target is a directory");
    }
    if (have_dst) {
        if (dst_dir) {
            bool empty = false;
            HIODSFS_TRY(dir_is_empty(*t, dst.ino, &empty));
            if (!empty) return Status::error(ENOTEMPTY, "target directory not empty");
            din.r.nlink = 0;
        } else {
            din.r.nlink -= 1;
        }
        set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, dst.ino, din));
    }
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), as_bytes(src)));
    if (src_dir) sin.r.parent = new_parent;
    set_time(&sin.r.ctime_s, &sin.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, src.ino, sin));
    // Link counts of the parents: a moved directory's ".." changes parent;
    // a replaced directory's entry goes away from new_parent.
    int old_parent_delta = (src_dir && parent != new_parent) ? -1 : 0;
    int new_parent_delta = (src_dir && parent != new_parent ? 1 : 0) - (dst_dir ? 1 : 0);
    if (parent == new_parent) {
        HIODSFS_TRY(touch_dir(*t, parent, old_parent_delta + new_parent_delta));
    } else {
        HIODSFS_TRY(touch_dir(*t, parent, old_parent_delta));
        HIODSFS_TRY(touch_dir(*t, new_parent, new_parent_delta));
    }
    if (have_dst && din.r.nlink == 0) HIODSFS_TRY(release_inode(*t, dst.ino));
    return t->commit();
}

Status EngineImpl::readdir(InodeId dir, std::vector<DirEntry>* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode d;
    HIODSFS_TRY(load_dir(*t, dir, &d));
    std::string prefix = key_u64(dir);
    Cursor c = t->cursor(Db::kDirents);
    for (bool ok = c.seek(prefix); ok && c.key().substr(0, 8) == prefix; ok = c.next()) {
        DirentValue v;
        if (!from_bytes(c.value(), &v)) return Status::error(EUCLEAN, "directory entry record is damaged");
        out->push_back(DirEntry{std::string(c.key().substr(8)), v.ino, v.type});
    }
    return c.status();
}

Status EngineImpl::parent_of(InodeId dir, InodeId* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode d;
    HIODSFS_TRY(load_inode(*t, dir, &d));
    if (!is_dir(d.r.mode)) return Status::error(ENOTDIR, "not a directory");
    *out = dir == kRootInode ? kRootInode : d.r.parent;
    return Status::ok();
}

void EngineImpl::pin(InodeId ino, std::uint64_t count) {
    std::lock_guard<std::mutex> l(pins_mu_);
    pins_[ino] += count;
}

void EngineImpl::unpin(InodeId ino, std::uint64_t count) {
    {
        std::lock_guard<std::mutex> l(pins_mu_);
        auto it = pins_.find(ino);
        if (it == pins_.end()) return;
        if (it->second > count) {
            it->second -= count;
            return;
        }
        pins_.erase(it);
    }
    // The kernel forgot the inode: close its stream, and free it if unlinked.
    std::shared_ptr<Stream> s;
    {
        std::lock_guard<std::mutex> l(streams_mu_);
        auto it = streams_.find(ino);
        if (it != streams_.end()) s = it->second;
    }
    if (s) {
        std::lock_guard<std::mutex> l(s->mu);
        (void)close_stream(ino, *s);
    }
    std::unique_ptr<Txn> t;
    if (!meta_->begin(&t)) return;
    Inode in;
    if (!load_inode(*t, ino, &in)) return;
    if (in.r.nlink == 0 && !pinned(ino)) {
        if (free_inode(*t, ino)) (void)t->commit();
    }
    t.reset();
    s.reset();
    drop_stream(ino);
}

// ---------------------------------------------------------------------------
// Data path

std::shared_ptr<Stream> EngineImpl::stream(InodeId ino) {
    std::lock_guard<std::mutex> l(streams_mu_);
    auto& s = streams_[ino];
    if (!s) s = std::make_shared<Stream>();
    return s;
}

Status EngineImpl::regular_file(InodeId ino, Inode* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(load_inode(*t, ino, out));
    return check_regular(*out);
}

Status EngineImpl::check_regular(const Inode& in) {
    if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
    if (!S_ISREG(in.r.mode)) return Status::error(EINVAL, "not a regular file");
    return Status::ok();
}

// Chunks of file ino: fingerprinted outside the lock, then stored or shared
// and mapped in ONE metadata operation (a request's chunks commit together).
void EngineImpl::apply_update(Inode& in, WriteUpdate* u) {
    if (u->end > in.r.size) in.r.size = u->end;
    set_time(&in.r.mtime_s, &in.r.mtime_ns, u->now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, u->now);
    u->applied = true;
}

Status EngineImpl::emit_chunks(InodeId ino, const std::vector<ChunkSpan>& chunks,
                               WriteUpdate* upd) {
    if (chunks.empty()) return Status::ok();
    std::vector<Digest> digests(chunks.size());
    std::vector<char> zero(chunks.size());
    auto fingerprint = [&](std::size_t i) {
        // Zeros are not stored: they read back from a hole.
        zero[i] = all_zero(chunks[i].data, chunks[i].len);
        if (!zero[i]) digests[i] = thread_sha256().digest(chunks[i].data, chunks[i].len);
    };
    // A large request's chunks are hashed on every core: one file's stream
    // is serial, and SHA-256 is most of its CPU time.
    if (chunks.size() >= 8) {
        ForkJoin fj;  // for ThreadSanitizer: TBB's hand-off is not instrumented
        fj.fork();
        tbb::parallel_for(std::size_t{0}, chunks.size(), fj.wrap(fingerprint));
        fj.join();
    } else {
        for (std::size_t i = 0; i < chunks.size(); ++i) fingerprint(i);
    }
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    // Appending (or filling a hole) replaces nothing: one lookup for the
    // whole request instead of one per chunk.
    std::vector<MappedExtent> old;
    HIODSFS_TRY(extents_in(*t, ino, chunks.front().off, chunks.back().off + chunks.back().len, &old));
    const bool fresh = old.empty();
    SegmentGains gains;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        const ChunkSpan& c = chunks[i];
        if (zero[i]) {
            if (!fresh) HIODSFS_TRY(replace_range(*t, ino, in, c.off, c.len, nullptr));
            continue;
        }
        ExtentRecord e;
        HIODSFS_TRY(store_chunk(*t, c.data, static_cast<std::uint32_t>(c.len), digests[i], &e, &gains));
        if (fresh)
            HIODSFS_TRY(map_extent(*t, ino, in, c.off, e));
        else
            HIODSFS_TRY(replace_range(*t, ino, in, c.off, c.len, &e));
    }
    for (const auto& [seg, bytes] : gains)
        HIODSFS_TRY(add_segment_live(*t, seg, static_cast<std::int64_t>(bytes)));
    WriteUpdate pending = upd != nullptr ? *upd : WriteUpdate{};
    if (upd != nullptr) apply_update(in, &pending);
    HIODSFS_TRY(store_inode(*t, ino, in));
    HIODSFS_TRY(t->commit());
    if (upd != nullptr) *upd = pending;
    return Status::ok();
}

Status EngineImpl::emit(InodeId ino, std::uint64_t off, const std::uint8_t* data, std::size_t len) {
    return emit_chunks(ino, {ChunkSpan{off, data, len}});
}

Status EngineImpl::emit_raw(InodeId ino, std::uint64_t off, const std::uint8_t* data,
                            std::size_t len, WriteUpdate* upd) {
    // Raw records are bounded like chunks so reads of them stay cheap; all
    // of one request's records and its one dirty record commit together.
    const std::size_t piece = std::max<std::size_t>(chunking_.max_size, 64 * 1024);
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    // A deferred write's only metadata operation is this one: its check too.
    HIODSFS_TRY(check_regular(in));
    auto& sup = t->super();
    for (std::size_t done = 0; done < len; done += piece) {
        const auto n = static_cast<std::uint32_t>(std::min(piece, len - done));
        ChunkId id = sup.next_chunk++;
        ChunkLocation loc;
        HIODSFS_TRY(segs_->append(id, data + done, n, &loc));
        ChunkRecord rec;
        rec.segment = loc.segment;
        rec.offset = loc.offset;
        rec.length = n;
        rec.set_refs(1);
        rec.flags = 0;  // not fingerprinted: never shared until the background pass replaces it
        HIODSFS_TRY(t->put(Db::kChunks, key_u64(id), as_bytes(rec)));
        HIODSFS_TRY(add_segment_live(*t, loc.segment, n));
        sup.counters.stored_bytes += n;
        sup.counters.raw_bytes += n;
        sup.counters.chunk_count += 1;
        ExtentRecord e{id, 0, n};
        HIODSFS_TRY(replace_range(*t, ino, in, off + done, n, &e));
    }
    HIODSFS_TRY(queue_dirty(*t, ino, off, len));
    if (off + len > in.r.size) in.r.size = off + len;
    WriteUpdate pending = upd != nullptr ? *upd : WriteUpdate{};
    if (upd != nullptr) apply_update(in, &pending);
    HIODSFS_TRY(store_inode(*t, ino, in));
    HIODSFS_TRY(t->commit());
    if (upd != nullptr) *upd = pending;
    return Status::ok();
}

Status EngineImpl::write_deferred(InodeId ino, Stream& s, std::uint64_t off,
                                  const std::uint8_t* data, std::size_t len, WriteUpdate* upd) {
    HIODSFS_TRY(close_stream(ino, s));
    HIODSFS_TRY(emit_raw(ino, off, data, len, upd));
    if (pass_) pass_->wake();
    return Status::ok();
}

// Appends bytes to the stream and emits every chunk they complete. On a
// failure the stream is left holding only bytes that were acknowledged
// before this call, with the chunker state rebuilt to match.
Status EngineImpl::feed(InodeId ino, Stream& s, const std::uint8_t* data, std::size_t len,
                        WriteUpdate* upd) {
    // The bytes are chunked where they are: only the chunk that completes
    // the stream's tail, and the new tail, are copied into the stream.
    const std::size_t before = s.buf.size();
    std::vector<ChunkSpan> chunks;
    std::uint64_t off = s.off;
    std::size_t pos = 0;
    std::size_t n = s.chunker->next_cut(data, len);
    if (n != Chunker::kNoCut) {
        s.buf.insert(s.buf.end(), data, data + n);
        chunks.push_back(ChunkSpan{off, s.buf.data() + s.head, s.buf.size() - s.head});
        off += chunks.back().len;
        pos = n;
        while (pos < len && (n = s.chunker->next_cut(data + pos, len - pos)) != Chunker::kNoCut) {
            chunks.push_back(ChunkSpan{off, data + pos, n});
            off += n;
            pos += n;
        }
    }
    Status st = emit_chunks(ino, chunks, upd);
    if (st && chunks.empty()) {
        s.buf.insert(s.buf.end(), data, data + len);
    } else if (st) {
        s.buf.clear();
        s.head = 0;
        s.buf.insert(s.buf.end(), data + pos, data + len);
        s.off = off;
    } else {
        // Nothing of this call was emitted: drop its bytes and rebuild the
        // chunker's state over what the stream held before.
        s.buf.resize(before);
        s.chunker->reset(s.off);
        if (s.size() > 0) (void)s.chunker->next_cut(s.data(), s.size());
    }
    // Keep the buffer small: move the open chunk to the front.
    if (s.head > 0 && (s.head >= s.buf.size() / 2 || s.head > (1u << 20))) {
        s.buf.erase(s.buf.begin(), s.buf.begin() + static_cast<std::ptrdiff_t>(s.head));
        s.head = 0;
    }
    return st;
}

Status EngineImpl::close_stream(InodeId ino, Stream& s, bool force_inline) {
    if (!s.active) return Status::ok();
    if (s.size() > 0) {
        if (deferred_.load() && !force_inline)
            HIODSFS_TRY(emit_raw(ino, s.off, s.data(), s.size()));
        else
            HIODSFS_TRY(emit(ino, s.off, s.data(), s.size()));
    }
    s.clear();
    return Status::ok();
}

Status EngineImpl::starts_chunk(Txn& t, const MappedExtent& m, bool* out) {
    *out = false;
    if (m.e.chunk_off != 0) return Status::ok();
    std::string_view v;
    bool found = false;
    ChunkRecord rec;
    HIODSFS_TRY(t.get(Db::kChunks, key_u64(m.e.chunk), &v, &found));
    *out = found && from_bytes(v, &rec) && (rec.flags & ChunkRecord::kIndexed);
    return Status::ok();
}

// Opens a stream for a write at `off` that does not continue the current
// one: it starts at the cut point before `off` and is preloaded with the old
// bytes between that cut point and `off`. With CDC that is the start of the
// chunk holding the byte before off, even when that chunk ends at off (its
// end may be where the file ended when it was cut, not a content-defined
// cut); raw data and chunk tails are passed over back to a chunk's start, a
// hole or the file's start. If that lies more than `reach` before off, the
// stream starts at off.
Status EngineImpl::start_stream(InodeId ino, Stream& s, std::uint64_t off, std::uint64_t reach) {
    std::uint64_t start = off;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        Inode in;
        HIODSFS_TRY(load_inode(*t, ino, &in));
        if (chunking_.kind == ChunkingParams::Kind::kFixed) {
            // Fixed chunks sit at multiples of the size: restart at the one
            // that holds off, preloaded with the old bytes before off.
            start = off - off % chunking_.avg_size;
        } else if (off <= in.r.size) {  // past the end, the gap stays a hole: a cut point
            for (std::uint64_t pos = off; pos > 0 && off - pos <= reach;) {
                std::vector<MappedExtent> ex;
                HIODSFS_TRY(extents_in(*t, ino, pos - 1, pos, &ex));
                if (ex.empty()) break;  // a hole ends at pos: a cut point
                bool is_start = false;
                HIODSFS_TRY(starts_chunk(*t, ex.front(), &is_start));
                pos = ex.front().start;
                if (is_start) {
                    start = pos;
                    break;
                }
                start = pos;  // the file's start, if the walk ends there
            }
            if (off - start > reach) start = off;  // never preload unbounded
        }
    }
    s.active = true;
    s.off = start;
    s.buf.clear();
    s.head = 0;
    if (!s.chunker) s.chunker = Chunker::make(chunking_);
    s.chunker->reset(start);
    std::vector<std::uint8_t> old;
    for (std::uint64_t pos = start; pos < off;) {
        old.resize(static_cast<std::size_t>(std::min(off - pos, kRechunkPiece)));
        std::fill(old.begin(), old.end(), 0);  // past EOF stays zeros
        std::size_t got = 0;
        Status st = read_locked(ino, nullptr, pos, old.size(), old.data(), &got);
        if (st) st = feed(ino, s, old.data(), old.size());
        if (!st) {
            s.clear();
            return st;
        }
        pos += old.size();
    }
    return Status::ok();
}

// After an overwrite inside old data: keep chunking the old bytes that follow
// until a cut falls on an old extent boundary, so the chunks after it stay.
Status EngineImpl::realign(InodeId ino, Stream& s, std::uint64_t write_end, std::uint64_t reach) {
    const std::uint64_t give_up = write_end + std::min(reach, kMaxFileSize);
    std::vector<std::uint8_t> piece;
    for (;;) {
        std::uint64_t pos = s.end();
        std::uint64_t size = 0;
        bool at_boundary = false;
        bool next_starts_chunk = false;
        bool hole_at_pos = false;
        std::uint64_t piece_end = 0;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            Inode in;
            HIODSFS_TRY(load_inode(*t, ino, &in));
            size = in.r.size;
            if (pos >= size) return Status::ok();  // reached the end: the rest is the tail
            std::vector<MappedExtent> ex;
            HIODSFS_TRY(extents_in(*t, ino, pos, std::min(size, pos + kRechunkPiece), &ex));
            if (ex.empty()) {
                at_boundary = true;  // a hole
                piece_end = std::min(size, pos + kRechunkPiece);
            } else if (ex.front().start >= pos) {
                at_boundary = true;
                piece_end = ex.front().start > pos ? ex.front().start : ex.front().end();
            } else {
                piece_end = ex.front().end();
            }
            piece_end = std::min({piece_end, size, pos + kRechunkPiece});
            hole_at_pos = ex.empty() || ex.front().start > pos;
            // Raw (not yet deduplicated) data ahead, or the tail of a chunk
            // whose head was overwritten, is no boundary to stop at:
            // chunking on through it cuts it as inline mode would.
            if (!ex.empty()) HIODSFS_TRY(starts_chunk(*t, ex.front(), &next_starts_chunk));
        }
        // A hole is a cut point: its zeros are not chunked into the data. The
        // stream stays open, so a write that continues it (filling the hole,
        // as into a preallocated file) needs no restart.
        if (hole_at_pos) return Status::ok();
        if ((at_boundary && next_starts_chunk && s.size() == 0) ||
            (at_boundary && next_starts_chunk && pos >= give_up))
            return close_stream(ino, s, true);  // inline even when the pass runs this
        piece.resize(piece_end - pos);
        std::size_t got = 0;
        HIODSFS_TRY(read_locked(ino, nullptr, pos, piece.size(), piece.data(), &got));
        HIODSFS_TRY(feed(ino, s, piece.data(), piece.size()));
    }
}

// Waits until the stream reaches offset, while another write in flight may
// still take it there: one not itself waiting, or (when every one is) an
// earlier waiter, which goes on first.
void EngineImpl::wait_for_gap(Stream& s, std::unique_lock<std::mutex>& l, std::uint64_t offset) {
    auto me = s.waiting.insert(offset);
    const auto deadline = std::chrono::steady_clock::now() + kReorderWait;
    while (s.active && s.end() < offset) {
        const bool others_busy = s.writers.load() > static_cast<int>(s.waiting.size());
        if (!others_busy && *s.waiting.begin() == offset) break;
        if (s.moved.wait_until(l, deadline) == std::cv_status::timeout) break;
    }
    s.waiting.erase(me);
    s.moved.notify_all();  // the next waiter may be first now
}

Status EngineImpl::write(InodeId ino, std::uint64_t offset, const void* data, std::size_t len) {
    if (offset > kMaxFileSize || len > kMaxFileSize - offset)
        return Status::error(EFBIG, "write past the maximum file size");
    if (len == 0) return Status::ok();
    // Every write request is measured for the mode controller.
    struct Measured {
        LoadMonitor& m;
        std::uint64_t arrival, bytes;
        ~Measured() { m.request_finished(arrival, bytes); }
    } measured{controller_->monitor(), controller_->monitor().request_started(), len};
    std::optional<Admission> admission;
    HIODSFS_TRY(admit_write(len, &admission));
    auto s = stream(ino);
    s->writers.fetch_add(1);
    std::unique_lock<std::mutex> l(s->mu);
    struct Leave {
        Stream& s;
        ~Leave() {
            s.writers.fetch_sub(1);
            s.moved.notify_all();
        }
    } leave{*s};
    // The kernel's writeback sends one file's pages from several threads, so
    // a request may overtake the one before it. It waits briefly for the
    // others in flight: the stream then continues, with the cut points one
    // writer would make, instead of closing and restarting (an extra chunk
    // and a re-read of old bytes each time).
    // Only a stream being continued waits: random writers never do.
    if (!deferred_.load() && s->active && s->streak >= 2 && offset > s->end() &&
        offset - s->end() <= kReorderWindow)
        wait_for_gap(*s, l, offset);
    s->streak = s->active && offset == s->end() ? s->streak + 1 : 0;
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    WriteUpdate upd{offset + len, now_ts()};
    if (deferred_.load()) return write_deferred(ino, *s, offset, bytes, len, &upd);
    Inode in;
    HIODSFS_TRY(regular_file(ino, &in));
    std::uint64_t old_size = in.r.size;
    if (!(s->active && offset == s->end())) {
        HIODSFS_TRY(close_stream(ino, *s));
        HIODSFS_TRY(start_stream(ino, *s, offset, std::uint64_t{chunking_.max_size} * 4));
    }
    Status st = feed(ino, *s, bytes, len, &upd);
    // A failed feed accepted nothing of this write.
    std::uint64_t accepted_end = st ? offset + len : 0;
    if (!upd.applied) {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        Inode cur;
        HIODSFS_TRY(load_inode(*t, ino, &cur));
        if (accepted_end > cur.r.size) cur.r.size = accepted_end;
        auto now = now_ts();
        set_time(&cur.r.mtime_s, &cur.r.mtime_ns, now);
        set_time(&cur.r.ctime_s, &cur.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, ino, cur));
        HIODSFS_TRY(t->commit());
    }
    HIODSFS_TRY(st);
    if (offset + len < old_size)
        HIODSFS_TRY(realign(ino, *s, offset + len, std::uint64_t{chunking_.max_size} * 4));
    return Status::ok();
}

Status EngineImpl::read_locked(InodeId ino, Stream* s, std::uint64_t off, std::size_t len,
                               std::uint8_t* out, std::size_t* got, bool quiet) {
    struct Piece {
        std::uint64_t file_off;
        std::uint32_t chunk_off, length;
        ChunkId chunk;
        ChunkLocation loc;
    };
    std::vector<Piece> pieces;
    std::size_t n = 0;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        Inode in;
        HIODSFS_TRY(load_inode(*t, ino, &in));
        if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
        if (off >= in.r.size) {
            *got = 0;
            return Status::ok();
        }
        n = static_cast<std::size_t>(std::min<std::uint64_t>(len, in.r.size - off));
        std::vector<MappedExtent> ex;
        HIODSFS_TRY(extents_in(*t, ino, off, off + n, &ex));
        for (const auto& m : ex) {
            std::uint64_t a = std::max(m.start, off), b = std::min(m.end(), off + n);
            std::string_view v;
            bool found = false;
            HIODSFS_TRY(t->get(Db::kChunks, key_u64(m.e.chunk), &v, &found));
            ChunkRecord rec;
            if (!found || !from_bytes(v, &rec)) {
                if (!quiet) read_errors_.fetch_add(1);
                return Status::error(EIO, "file " + std::to_string(ino) + " maps missing chunk " +
                                              std::to_string(m.e.chunk));
            }
            pieces.push_back(Piece{a, static_cast<std::uint32_t>(m.e.chunk_off + (a - m.start)),
                                   static_cast<std::uint32_t>(b - a), m.e.chunk, rec.location()});
        }
    }
    std::memset(out, 0, n);
    thread_local std::vector<std::uint8_t> chunk_buf;
    for (const auto& p : pieces) {
        std::uint8_t* dst = out + (p.file_off - off);
        const bool whole = p.chunk_off == 0 && p.length == p.loc.length;
        if (!whole) chunk_buf.resize(p.loc.length);
        // A chunk that fails its checks is EIO for the whole request, never
        // wrong bytes; counted for hiodsfs-stat.
        bool damaged = false;
        Status st = read_chunk(p.chunk, p.loc, whole ? dst : chunk_buf.data(), &damaged);
        if (!st) {
            if (quiet) return st;
            read_errors_.fetch_add(1);
            if (damaged) mark_damaged(p.chunk);
            return Status::error(EIO, "file " + std::to_string(ino) + ": " + st.message());
        }
        if (!whole) std::memcpy(dst, chunk_buf.data() + p.chunk_off, p.length);
    }
    if (s != nullptr && s->active && s->size() > 0) {
        std::uint64_t a = std::max(off, s->off), b = std::min<std::uint64_t>(off + n, s->end());
        if (a < b) std::memcpy(out + (a - off), s->data() + (a - s->off), b - a);
    }
    *got = n;
    return Status::ok();
}

Status EngineImpl::read(InodeId ino, std::uint64_t offset, std::size_t len, void* out,
                        std::size_t* got) {
    // Measured so the background pass yields to streaming reads (the throttle).
    struct Measured {
        LoadMonitor& m;
        std::uint64_t arrival;
        std::size_t* got;
        ~Measured() { m.request_finished(arrival, *got); }
    } measured{controller_->read_monitor(), controller_->read_monitor().request_started(), got};
    *got = 0;
    auto s = stream(ino);
    std::unique_lock<std::mutex> l(s->mu, std::defer_lock);
    // The pass takes the lock a moment before its sweep begins: a read that
    // finds the lock taken looks again, a bounded while, before it queues
    // for it, so as not to queue behind a whole sweep.
    for (int polls = 0; !l.try_lock();) {
        if (s->sweeping.load(std::memory_order_acquire)) {
            // Beside the pass's sweep: each of its metadata operations maps
            // the same bytes anew, so any snapshot of the extents reads
            // right. A chunk it freed may be gone by the time it is read
            // (compaction): then the read is made again under the lock,
            // which has the last word.
            if (read_locked(ino, nullptr, offset, len, static_cast<std::uint8_t*>(out), got, true)) {
                reads_beside_sweep_.fetch_add(1, std::memory_order_relaxed);
                return Status::ok();
            }
            *got = 0;
            l.lock();
            break;
        }
        if (++polls > kReadLockPolls) {
            l.lock();
            break;
        }
        std::this_thread::sleep_for(kReadLockPoll);
    }
    return read_locked(ino, s.get(), offset, len, static_cast<std::uint8_t*>(out), got);
}

Status EngineImpl::truncate_locked(InodeId ino, Stream& s, std::uint64_t size) {
    HIODSFS_TRY(close_stream(ino, s));
    // The chunk that straddles the new end is rewritten shortened, so stored
    // bytes follow the content instead of keeping the whole old chunk alive.
    std::vector<std::uint8_t> keep;
    std::uint64_t keep_start = size;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        std::vector<MappedExtent> ex;
        if (size > 0) HIODSFS_TRY(extents_in(*t, ino, size - 1, size, &ex));
        if (!ex.empty() && ex.front().end() > size) keep_start = ex.front().start;
    }
    if (keep_start < size) {
        keep.resize(size - keep_start);
        std::size_t got = 0;
        HIODSFS_TRY(read_locked(ino, nullptr, keep_start, keep.size(), keep.data(), &got));
    }
    bool zero = keep.empty() || all_zero(keep.data(), keep.size());
    Digest digest;
    if (!zero) digest = thread_sha256().digest(keep.data(), keep.size());
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    HIODSFS_TRY(replace_range(*t, ino, in, keep_start, kMaxFileSize, nullptr));
    if (!zero) {
        ExtentRecord e;
        HIODSFS_TRY(store_chunk(*t, keep.data(), static_cast<std::uint32_t>(keep.size()), digest, &e));
        HIODSFS_TRY(replace_range(*t, ino, in, keep_start, keep.size(), &e));
    }
    in.r.size = size;
    auto now = now_ts();
    set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::flush(InodeId ino) {
    std::shared_ptr<Stream> s;
    {
        std::lock_guard<std::mutex> l(streams_mu_);
        auto it = streams_.find(ino);
        if (it == streams_.end()) return Status::ok();
        s = it->second;
    }
    std::lock_guard<std::mutex> l(s->mu);
    return close_stream(ino, *s);
}

Status EngineImpl::fsync(InodeId ino, bool /*datasync*/) {
    HIODSFS_TRY(flush(ino));
    return commit_now();
}

Status EngineImpl::sync_all() {
    std::vector<std::pair<InodeId, std::shared_ptr<Stream>>> all;
    {
        std::lock_guard<std::mutex> l(streams_mu_);
        all.assign(streams_.begin(), streams_.end());
    }
    for (auto& [ino, s] : all) {
        std::lock_guard<std::mutex> l(s->mu);
        HIODSFS_TRY(close_stream(ino, *s));
    }
    return commit_now();
}

Status EngineImpl::fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len) {
    if (len == 0) return Status::error(EINVAL, "fallocate of zero length");
    if (offset > kMaxFileSize || len > kMaxFileSize - offset)
        return Status::error(EFBIG, "fallocate past the maximum file size");
    const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE && mode != punch && mode != FALLOC_FL_ZERO_RANGE &&
        mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
        return Status::error(EOPNOTSUPP, "fallocate mode not supported");
    auto s = stream(ino);
    std::lock_guard<std::mutex> l(s->mu);
    Inode cur;
    HIODSFS_TRY(regular_file(ino, &cur));
    HIODSFS_TRY(close_stream(ino, *s));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    // Space is not reserved: chunks are stored when written, and holes read
    // as zeros, so allocation only extends the size.
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
        HIODSFS_TRY(replace_range(*t, ino, in, offset, len, nullptr));
    if (!(mode & FALLOC_FL_KEEP_SIZE) && offset + len > in.r.size) in.r.size = offset + len;
    auto now = now_ts();
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::clone_range(InodeId src, std::uint64_t src_off, InodeId dst,
                               std::uint64_t dst_off, std::uint64_t len, std::uint64_t* copied) {
    *copied = 0;
    if (src_off > kMaxFileSize || dst_off > kMaxFileSize || len > kMaxFileSize)
        return Status::error(EFBIG, "clone past the maximum file size");
    auto ss = stream(src);
    auto ds = stream(dst);
    // Lock both streams in inode order (once if they are the same file).
    std::unique_lock<std::mutex> l1, l2;
    if (src == dst) {
        l1 = std::unique_lock<std::mutex>(ss->mu);
        if (src_off < dst_off + len && dst_off < src_off + len)
            return Status::error(EINVAL, "overlapping clone within one file");
    } else if (src < dst) {
        l1 = std::unique_lock<std::mutex>(ss->mu);
        l2 = std::unique_lock<std::mutex>(ds->mu);
    } else {
        l1 = std::unique_lock<std::mutex>(ds->mu);
        l2 = std::unique_lock<std::mutex>(ss->mu);
    }
    Inode tmp;
    HIODSFS_TRY(regular_file(src, &tmp));
    HIODSFS_TRY(regular_file(dst, &tmp));
    HIODSFS_TRY(close_stream(src, *ss));
    if (src != dst) HIODSFS_TRY(close_stream(dst, *ds));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode sin, din;
    HIODSFS_TRY(load_inode(*t, src, &sin));
    if (src_off >= sin.r.size) return Status::ok();
    std::uint64_t n = std::min(len, sin.r.size - src_off);
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(*t, src, src_off, src_off + n, &ex));
    HIODSFS_TRY(load_inode(*t, dst, &din));
    HIODSFS_TRY(replace_range(*t, dst, din, dst_off, n, nullptr));
    std::uint64_t shared = 0;
    for (const auto& m : ex) {
        std::uint64_t a = std::max(m.start, src_off), b = std::min(m.end(), src_off + n);
        ExtentRecord e = m.e;
        e.chunk_off = static_cast<std::uint32_t>(m.e.chunk_off + (a - m.start));
        e.length = static_cast<std::uint32_t>(b - a);
        HIODSFS_TRY(chunk_ref(*t, e.chunk, +1));
        std::uint64_t at = dst_off + (a - src_off);
        HIODSFS_TRY(t->put(Db::kExtents, key_u64_u64(dst, at), as_bytes(e)));
        din.r.mapped += e.length;
        t->super().counters.logical_bytes += e.length;
        shared += e.length;
    }
    if (dst_off + n > din.r.size) din.r.size = dst_off + n;
    auto now = now_ts();
    set_time(&din.r.mtime_s, &din.r.mtime_ns, now);
    set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, dst, din));
    t->super().counters.cloned_bytes += shared;
    HIODSFS_TRY(t->commit());
    *copied = n;
    return Status::ok();
}

Status EngineImpl::seek(InodeId ino, std::uint64_t offset, SeekWhence whence, std::uint64_t* out) {
    auto s = stream(ino);
    std::lock_guard<std::mutex> l(s->mu);
    Inode cur;
    HIODSFS_TRY(regular_file(ino, &cur));
    HIODSFS_TRY(close_stream(ino, *s));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (offset >= in.r.size) return Status::error(ENXIO, "offset past end of file");
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(*t, ino, offset, in.r.size, &ex));
    if (whence == SeekWhence::kData) {
        if (ex.empty()) return Status::error(ENXIO, "no data after offset");
        *out = std::max(offset, ex.front().start);
        return Status::ok();
    }
    std::uint64_t pos = offset;
    for (const auto& m : ex) {
        if (m.start > pos) break;
        pos = std::max(pos, m.end());
    }
    *out = std::min(pos, in.r.size);
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Extended attributes

Status EngineImpl::setxattr(InodeId ino, std::string_view name, std::string_view value, int flags) {
    if (name.empty()) return Status::error(EINVAL, "empty attribute name");
    if (name.size() > kMaxXattrName) return Status::error(ERANGE, "attribute name too long");
    if (value.size() > kMaxXattrValue) return Status::error(E2BIG, "attribute value too large");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string k = key_u64_str(ino, name);
    std::string_view old;
    bool found = false;
    HIODSFS_TRY(t->get(Db::kXattrs, k, &old, &found));
    if ((flags & XATTR_CREATE) && found) return Status::error(EEXIST, "attribute exists");
    if ((flags & XATTR_REPLACE) && !found) return Status::error(ENODATA, "no such attribute");
    HIODSFS_TRY(t->put(Db::kXattrs, k, value));
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::getxattr(InodeId ino, std::string_view name, std::string* value) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t->get(Db::kXattrs, key_u64_str(ino, name), &v, &found));
    if (!found) return Status::error(ENODATA, "no such attribute");
    value->assign(v);
    return Status::ok();
}

Status EngineImpl::listxattr(InodeId ino, std::vector<std::string>* names) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string prefix = key_u64(ino);
    Cursor c = t->cursor(Db::kXattrs);
    for (bool ok = c.seek(prefix); ok && c.key().substr(0, 8) == prefix; ok = c.next())
        names->emplace_back(c.key().substr(8));
    return c.status();
}

Status EngineImpl::removexattr(InodeId ino, std::string_view name) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    bool existed = false;
    HIODSFS_TRY(t->del(Db::kXattrs, key_u64_str(ino, name), &existed));
    if (!existed) return Status::error(ENODATA, "no such attribute");
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

// ---------------------------------------------------------------------------
// Background pass (DedupTarget)

Status EngineImpl::take_dirty(std::size_t max, std::vector<DirtyRecord>* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Cursor c = t->cursor(Db::kDirty);
    for (bool ok = c.first(); ok && out->size() < max; ok = c.next()) {
        if (c.key().size() != 8 || c.value().size() != 24)
            return Status::error(EUCLEAN, "dirty-queue record is damaged");
        DirtyRecord r;
        r.seq = get_be64(c.key());
        r.ino = get_be64(c.value(), 0);
        r.offset = get_be64(c.value(), 8);
        r.length = get_be64(c.value(), 16);
        out->push_back(r);
    }
    return c.status();
}

Status EngineImpl::finish_dirty(const std::vector<DirtyRecord>& done) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    auto& c = t->super().counters;
    for (const auto& r : done) {
        bool existed = false;
        HIODSFS_TRY(t->del(Db::kDirty, key_u64(r.seq), &existed));
        if (existed) {
            c.backlog_records -= 1;
            c.backlog_bytes -= r.length;
        }
    }
    return t->commit();
}

Status EngineImpl::rechunk(InodeId ino, std::uint64_t offset, std::uint64_t length) {
    std::shared_ptr<Stream> s = stream(ino);
    Status st;
    bool gone = false;
    {
        std::lock_guard<std::mutex> l(s->mu);
        st = rechunk_locked(ino, *s, offset, length, &gone);
    }
    s.reset();
    drop_stream(ino, gone);  // a file nothing pins keeps no stream after its pass
    return st;
}

Status EngineImpl::rechunk_locked(InodeId ino, Stream& stream, std::uint64_t offset,
                                  std::uint64_t length, bool* gone) {
    Stream* s = &stream;
    Inode in;
    Status st = regular_file(ino, &in);
    // Stale work: the file is gone or is no longer a regular file.
    *gone = st.err() == ENOENT;
    if (st.err() == ENOENT || st.err() == EINVAL || st.err() == EISDIR) return Status::ok();
    HIODSFS_TRY(st);
    *gone = in.r.nlink == 0;
    if (in.r.nlink == 0 || offset >= in.r.size) return Status::ok();
    std::uint64_t end = std::min(in.r.size, offset + length);
    {
        // Nothing raw left in the range: an earlier sweep that chunked on
        // through it, or an inline overwrite, has done the work already.
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        std::vector<MappedExtent> ex;
        HIODSFS_TRY(extents_in(*t, ino, offset, end, &ex));
        bool any_raw = false;
        for (const auto& m : ex) {
            std::string_view v;
            bool found = false;
            ChunkRecord rec;
            HIODSFS_TRY(t->get(Db::kChunks, key_u64(m.e.chunk), &v, &found));
            if (found && from_bytes(v, &rec) && !(rec.flags & ChunkRecord::kIndexed)) {
                any_raw = true;
                break;
            }
        }
        if (!any_raw) return Status::ok();
    }
    HIODSFS_TRY(close_stream(ino, *s, true));
    // From here until the lock goes, every byte of the file is in its extents.
    s->sweeping.store(true, std::memory_order_release);
    struct Swept {
        Stream& s;
        ~Swept() { s.sweeping.store(false, std::memory_order_release); }
    } swept{*s};
    // The inline path over the current bytes of the range: start at the cut
    // point before it, and realign with the chunks after it. Unlike a write
    // it never gives up early: a cut left where the stream stopped would be
    // no content-defined one, and nothing would come back to fix it.
    Status result = start_stream(ino, *s, offset, kUnbounded);
    std::vector<std::uint8_t> buf;
    for (std::uint64_t pos = offset; result && pos < end;) {
        // The throttle paused the pass (reads or writes need the machine):
        // stop at this piece, after at least one so that every sweep gets
        // somewhere, and leave the rest for a later one.
        if (pos > offset && background_speed() <= 0) return requeue_sweep(ino, *s, end);
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(end - pos, 1u << 20));
        // The chunked copy is written before the raw bytes die: on a full
        // disk the sweep stops here (the record stays queued, the raw bytes
        // readable) instead of taking the room compaction and commits need.
        std::optional<Admission> admission;
        result = admit(n, &admission, true);
        if (!result) break;
        buf.resize(n);
        std::size_t got = 0;
        result = read_locked(ino, nullptr, pos, n, buf.data(), &got);
        if (result) result = feed(ino, *s, buf.data(), n);
        pos += n;
    }
    if (result) result = realign(ino, *s, end, kUnbounded);
    Status closed = close_stream(ino, *s, true);
    s->clear();
    return result ? closed : result;
}

Status EngineImpl::requeue_sweep(InodeId ino, Stream& s, std::uint64_t end) {
    // The stream's tail [s.off, ...) was read from the file and is mapped as
    // it was; s.off is a cut the chunker made, so a sweep from there (which
    // starts at the cut before it) cuts the rest as this one would have.
    const std::uint64_t from = s.off;
    s.clear();
    sweeps_yielded_.fetch_add(1, std::memory_order_relaxed);
    if (from >= end) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(queue_dirty(*t, ino, from, end - from));
    return t->commit();
}

Status EngineImpl::queue_dirty(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t len) {
    auto& sup = t.super();
    std::string v;
    put_be64(&v, ino);
    put_be64(&v, off);
    put_be64(&v, len);
    HIODSFS_TRY(t.put(Db::kDirty, key_u64(sup.next_dirty++), v));
    sup.counters.backlog_records += 1;
    sup.counters.backlog_bytes += len;
    return Status::ok();
}

Status EngineImpl::run_background() {
    return BackgroundPass::run_until_idle(this, std::max(1u, opts_.background_threads));
}

// ---------------------------------------------------------------------------
// Space reclaim: deleted files are freed in bounded steps, then segments are
// compacted (engine/compaction.h). One step at a time, from the reclaimer
// thread or run_reclaim().

namespace {
// Extents freed per step of a deleted file's purge: one short metadata
// operation (a few ms), so foreground requests barely wait for it.
constexpr std::size_t kPurgeExtentsPerStep = 4096;
}  // namespace

Status EngineImpl::run_reclaim() {
    if (!compactor_) return Status::error(EROFS, "store is open read-only");
    for (;;) {
        bool did_work = false;
        HIODSFS_TRY(reclaim_step(&did_work));
        if (!did_work) return Status::ok();
    }
}

Status EngineImpl::reclaim_step(bool* did_work) {
    std::lock_guard<std::mutex> l(reclaim_mu_);
    *did_work = false;
    if (!compactor_) return Status::ok();
    // Deleted files first: their chunks' death is what makes segments dead.
    HIODSFS_TRY(purge_step(did_work));
    if (*did_work) return Status::ok();
    const bool full_speed = !reclaimer_ || controller_->background_speed() >= 1.0;
    return compactor_->step(full_speed, did_work);
}

Status EngineImpl::free_inode(Txn& t, InodeId ino) {
    if (reclaim_mode_ != ReclaimMode::kOff) {
        Inode in;
        if (load_inode(t, ino, &in) && S_ISREG(in.r.mode) && in.r.mapped > opts_.async_delete_bytes) {
            HIODSFS_TRY(t.put(Db::kOrphans, key_u64(ino), ""));
            deletes_queued_ += 1;
            if (reclaimer_) reclaimer_->wake();
            return Status::ok();
        }
    }
    return purge_inode(t, ino);
}

Status EngineImpl::purge_step(bool* did_work) {
    *did_work = false;
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    InodeId ino = 0;
    {
        // Orphans still pinned (open, or known to the kernel) wait for unpin.
        Cursor c = t->cursor(Db::kOrphans);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeId cand = get_be64(c.key());
            if (!pinned(cand)) {
                ino = cand;
                break;
            }
        }
        HIODSFS_TRY(c.status());
    }
    if (ino == 0) return Status::ok();
    *did_work = true;
    Inode in;
    Status st = load_inode(*t, ino, &in);
    if (st && S_ISREG(in.r.mode)) {
        // Unmap the first extents of the file; the last step purges the inode.
        std::uint64_t first = 0, end = 0;
        std::size_t n = 0;
        {
            Cursor c = t->cursor(Db::kExtents);
            const std::string prefix = key_u64(ino);
            for (bool ok = c.seek(prefix); ok && n < kPurgeExtentsPerStep; ok = c.next()) {
                std::string_view k = c.key();
                if (k.size() != 16 || k.substr(0, 8) != prefix) break;
                ExtentRecord e;
                if (!from_bytes(c.value(), &e)) return Status::error(EUCLEAN, "extent record is damaged");
                if (n == 0) first = get_be64(k, 8);
                end = get_be64(k, 8) + e.length;
                ++n;
            }
            HIODSFS_TRY(c.status());
        }
        if (n == kPurgeExtentsPerStep) {
            HIODSFS_TRY(replace_range(*t, ino, in, first, end - first, nullptr));
            HIODSFS_TRY(store_inode(*t, ino, in));
            return t->commit();
        }
    }
    HIODSFS_TRY(purge_inode(*t, ino));
    HIODSFS_TRY(t->commit());
    deletes_done_ += 1;
    return Status::ok();
}

void EngineImpl::mark_damaged(ChunkId id) {
    if (meta_->read_only()) return;
    std::unique_ptr<Txn> t;
    if (!meta_->begin(&t)) return;
    std::string_view v;
    bool found = false;
    ChunkRecord rec;
    if (!t->get(Db::kChunks, key_u64(id), &v, &found) || !found || !from_bytes(v, &rec)) return;
    if (rec.flags & ChunkRecord::kDamaged) return;
    // Out of the index: the next write of this content stores a fresh copy
    // and takes the fingerprint over, instead of sharing bad bytes.
    if (flag_damaged(*t, id, &rec) && t->commit()) damaged_chunks_.fetch_add(1);
}

Status EngineImpl::read_chunk(ChunkId id, ChunkLocation loc, std::uint8_t* out, bool* damaged) {
    Status st = segs_->read(loc, id, out, damaged);
    // A failed read of a chunk that compaction moved (and whose old segment
    // it deleted) after our lookup: read the new place. A location that did
    // not change means the error is real.
    for (int attempt = 0; !st && attempt < 3; ++attempt) {
        ChunkRecord rec;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            std::string_view v;
            bool found = false;
            HIODSFS_TRY(t->get(Db::kChunks, key_u64(id), &v, &found));
            if (!found || !from_bytes(v, &rec)) return st;
        }
        if (rec.location() == loc) return st;
        loc = rec.location();
        st = segs_->read(loc, id, out, damaged);
    }
    return st;
}

// ---------------------------------------------------------------------------
// Status for hiodsfs-stat

std::string EngineImpl::status_json() {
    SpaceCounters c;
    (void)counters(&c);
    // nlohmann::json writes a number that is not finite (a rate over an
    // empty interval) as null, never as the invalid "nan"; ordered, so the
    // file reads in the order below.
    nlohmann::ordered_json j;
    j["logical_bytes"] = c.logical_bytes;
    j["stored_bytes"] = c.stored_bytes;
    j["disk_bytes"] = c.disk_bytes;
    j["dead_bytes"] = c.dead_bytes;
    j["raw_bytes"] = c.raw_bytes;
    j["chunk_count"] = c.chunk_count;
    j["inode_count"] = c.inode_count;
    j["dedup_hits"] = c.dedup_hits;
    j["cloned_bytes"] = c.cloned_bytes;
    j["backlog_records"] = c.backlog_records;
    j["backlog_bytes"] = c.backlog_bytes;
    j["read_errors"] = read_errors_.load();
    j["reads_beside_sweep"] = reads_beside_sweep_.load();
    j["sweeps_yielded"] = sweeps_yielded_.load();
    if (opts_.request_counts) {
        nlohmann::ordered_json r = nlohmann::ordered_json::object();
        for (const auto& [name, n] : opts_.request_counts()) r[name] = n;
        j["requests"] = std::move(r);
    }
    j["damaged_chunks"] = damaged_chunks_.load();
    {
        // What stopped the store, if anything did: it then refuses every
        // change (and fsync) with EIO until it is mounted again.
        Status failed = meta_->failure();
        j["store_error"] = failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(failed.message());
    }
    if (compactor_) {
        const CompactionStats cs = compactor_->stats();
        j["reclaim_deletes_queued"] = deletes_queued_.load();
        j["reclaim_deletes_done"] = deletes_done_.load();
        j["compaction_segments_deleted"] = cs.segments_deleted;
        j["compaction_bytes_moved"] = cs.bytes_moved;
        j["compaction_bytes_freed"] = cs.bytes_freed;
    }
    j["file_count"] = c.file_count;
    j["pid"] = static_cast<std::uint64_t>(::getpid());
    {
        std::vector<std::pair<SegmentId, std::uint64_t>> segs;
        (void)segs_->list_segments(&segs);
        j["segment_count"] = segs.size();
    }
    // Controller times (mode_since_ns, events) are on the monotonic clock of
    // now_ns; unix_time_ns is the wall clock at the same moment.
    j["now_ns"] = clock_->now_ns();
    j["unix_time_ns"] = wall_ns();
    j["interval_ms"] = opts_.control.interval_ms;
    j["target_ops"] = opts_.control.target_ops;
    j["target_bytes_per_s"] = opts_.control.target_bytes_per_s;
    j["chunking"] = chunking_.describe();
    j["setting"] = controller_->setting() == ModeController::Setting::kInline     ? "inline"
                   : controller_->setting() == ModeController::Setting::kDeferred ? "deferred"
                                                                                    : "hybrid";
    j["mode"] = deferred_.load() ? "deferred" : "inline";
    j["mode_since_ns"] = controller_->mode_since_ns();
    j["background_speed"] = controller_->background_speed();
    auto samples = controller_->samples();
    if (!samples.empty()) {
        j["ops_per_s"] = samples.back().ops_per_s();
        j["bytes_per_s"] = samples.back().bytes_per_s();
        const double secs = samples.back().seconds();
        j["background_bytes_per_s"] =
            secs > 0 ? static_cast<double>(samples.back().background_bytes) / secs : 0.0;
    }
    // The persisted history (history.h): the last samples and the last
    // sample of each recent day.
    {
        std::vector<HistoryEntry> tail, daily;
        std::unique_ptr<Txn> t;
        if (meta_->begin(&t)) {
            (void)read_history_tail(*t, 60, &tail);
            (void)read_history_daily(*t, 31, &daily);
        }
        auto list = [](const std::vector<HistoryEntry>& v) {
            nlohmann::ordered_json a = nlohmann::ordered_json::array();
            for (const auto& e : v) {
                a.push_back({{"unix_time_ns", e.time_ns},
                             {"period_ns", e.r.period_ns},
                             {"mode", e.r.mode == 1 ? "deferred" : "inline"},
                             {"ops_per_s", e.r.ops_per_s},
                             {"bytes_per_s", e.r.bytes_per_s},
                             {"background_bytes_per_s", e.r.background_bytes_per_s},
                             {"backlog_records", e.r.backlog_records},
                             {"backlog_bytes", e.r.backlog_bytes},
                             {"logical_bytes", e.r.logical_bytes},
                             {"stored_bytes", e.r.stored_bytes}});
            }
            return a;
        };
        j["history"] = list(tail);
        j["history_daily"] = list(daily);
    }
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    auto all = controller_->events();
    for (std::size_t i = all.size() > 32 ? all.size() - 32 : 0; i < all.size(); ++i) {
        const auto& e = all[i];
        events.push_back({{"time_ns", e.time_ns},
                          {"kind", e.kind == ControlEvent::Kind::kModeSwitch ? "mode_switch" : "throttle"},
                          {"mode", to_string(e.mode)},
                          {"ops_per_s", e.ops_per_s},
                          {"bytes_per_s", e.bytes_per_s},
                          {"speed", e.speed},
                          {"backlog_records", e.backlog_records},
                          {"backlog_bytes", e.backlog_bytes},
                          {"reason", e.reason}});
    }
    j["events"] = std::move(events);
    // Invalid UTF-8 in a message (a store path) is replaced, not thrown.
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

Status EngineImpl::publish_status() {
    std::string text = status_json();
    std::string path = opts_.store_dir + "/status.json";
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::from_errno(errno, "write " + tmp);
    ssize_t n = ::write(fd, text.data(), text.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) return Status::error(EIO, "short write of " + tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::from_errno(errno, "rename " + tmp);
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Space

Status EngineImpl::statfs(FsStats* out) {
    struct statvfs v {};
    if (::statvfs(opts_.store_dir.c_str(), &v) != 0)
        return Status::from_errno(errno, "statfs of store " + opts_.store_dir);
    // Figures of the backing file system, in its own block size: what df
    // shows is what the store can really still take.
    out->block_size = v.f_frsize;
    out->blocks = v.f_blocks;
    // What file data can still take: the reserve is kept back from it.
    const std::uint64_t reserve_blocks = v.f_frsize ? space_reserve_ / v.f_frsize : 0;
    out->blocks_free = v.f_bfree > reserve_blocks ? v.f_bfree - reserve_blocks : 0;
    out->blocks_avail = v.f_bavail > reserve_blocks ? v.f_bavail - reserve_blocks : 0;
    SpaceCounters c;
    HIODSFS_TRY(counters(&c));
    out->files = c.inode_count + v.f_favail;
    out->files_free = v.f_favail;
    out->name_max = kMaxName;
    return Status::ok();
}

std::uint64_t EngineImpl::data_room() {
    struct statvfs v {};
    if (::statvfs(opts_.store_dir.c_str(), &v) != 0) return UINT64_MAX;
    const std::uint64_t avail = std::uint64_t{v.f_bavail} * v.f_frsize;
    return avail > space_reserve_ ? avail - space_reserve_ : 0;
}

Status EngineImpl::counters(SpaceCounters* out) {
    // The in-memory state: readable even after a failed commit stopped the store.
    *out = meta_->super_snapshot().counters;
    out->disk_bytes = segs_->disk_bytes();
    return Status::ok();
}

}  // namespace

Status Engine::open(const EngineOptions& options, std::unique_ptr<Engine>* out) {
    auto e = std::make_unique<EngineImpl>();
    Status st = e->init(options);
    if (!st) {
        e->abandon();
        return st;
    }
    *out = std::move(e);
    return Status::ok();
}

}  // namespace hiodsfs
