#include "meta/meta_store.h"

#include "meta/journal.h"
#include "meta/lmdb_file_check.h"
#include "meta/lmdb_guard.h"
#include "meta/lmdb_support.h"
#include "meta/packed_copy.h"
#include "meta/records.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hiodsfs {
namespace {

__extension__ using Wide = unsigned __int128;  // for 64x64-bit scaling

// A journaled group whose captured changes reach this size asks to be
// committed early (on_group_full), so its record stays far below what one
// RADOS write takes.
constexpr std::size_t kJournalGroupBytes = 16u << 20;

// Regular files among the inodes (mode is an InodeRecord's first field).
// *rc: LMDB's code, on failure.
Status count_files(MDB_txn* txn, MDB_dbi inodes, const LmdbMap& map, bool read, std::uint64_t* out, int* rc_out) {
    MDB_cursor* c = nullptr;
    int& rc = *rc_out;
    rc = guarded_cursor_open(txn, inodes, &c);
    if (rc != 0) return lmdb_error(rc, "metadata cursor");
    MDB_val k{}, v{};
    *out = 0;
    for (rc = guarded_cursor_get(c, &k, &v, MDB_FIRST, map, read); rc == 0;
         rc = guarded_cursor_get(c, &k, &v, MDB_NEXT, map, read)) {
        InodeRecord r;
        if (decode(from_val(v), &r) && S_ISREG(r.mode)) ++*out;
    }
    if (rc != kLmdbFault || read) mdb_cursor_close(c);  // else the write transaction keeps it (lmdb_guard.h)
    else lmdb_park(c);
    if (rc != MDB_NOTFOUND) return lmdb_error(rc, "metadata inodes");
    rc = 0;
    return Status::ok();
}

}  // namespace

namespace {

// Bytes of file pages this process has mapped and resident (RssFile +
// RssShmem): the third field of /proc/self/statm (open as statm_fd), in
// pages. 0 if unknown. It runs every kTrimEveryWrites writes, so the file
// stays open rather than being opened and parsed with stdio each time.
std::uint64_t mapped_file_bytes(int statm_fd) {
    char buf[128];
    const ssize_t n = statm_fd < 0 ? -1 : ::pread(statm_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char* p = buf;
    std::strtoull(p, &p, 10);  // size
    std::strtoull(p, &p, 10);  // resident
    char* end = p;
    const unsigned long long shared = std::strtoull(p, &end, 10);
    return end == p ? 0 : shared * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

// ---- MetaStore ----

Status MetaStore::open(const std::string& dir, std::uint64_t map_bytes, bool read_only,
                       std::unique_ptr<MetaStore>* out) {
    MetaStoreOptions o;
    o.map_bytes = map_bytes;
    o.read_only = read_only;
    o.create = !read_only;
    return open(dir, o, out);
}

Status MetaStore::open(const std::string& dir, const MetaStoreOptions& options,
                       std::unique_ptr<MetaStore>* out) {
    const bool read_only = options.read_only;
    const std::uint64_t map_bytes = options.map_bytes;
    std::unique_ptr<MetaStore> m(new MetaStore());
    m->read_only_ = read_only;
    m->commit_fault_ = options.commit_fault;
    m->on_publish_ = options.on_publish;
    m->group_writes_limit_ = options.group_writes;
    m->on_group_full_ = options.on_group_full;
    m->resident_limit_ = options.resident_bytes;
    m->dir_ = dir;
    const std::string data = dir + "/data.mdb";
    struct stat st {};
    const bool exists = ::stat(data.c_str(), &st) == 0;
    if (!options.create || read_only) {
        // LMDB would make an empty data file in an empty directory.
        if (!exists) return Status::from_errno(errno, "metadata " + data);
        if (st.st_size == 0) return Status::error(EUCLEAN, "metadata " + data + " is empty");
    } else if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        return Status::from_errno(errno, "create metadata directory " + dir);
    }
    if (exists && st.st_size > 0) {
        // Before LMDB maps it: LMDB trusts the file, and a damaged one
        // crashes it or has it write over live pages (meta/lmdb_file_check.h).
        LmdbCheckOptions check;
        check.walk_bytes = options.check_bytes;
        HIODSFS_TRY(check_lmdb_file(data, check));
    }
    // A compaction that a crash interrupted: the file it would have replaced is intact.
    if (!read_only) ::unlink((dir + "/" + kCompactCopyName).c_str());
    int rc = mdb_env_create(&m->env_);
    if (rc != 0) return lmdb_error(rc, "metadata environment");
    HIODSFS_TRY(lmdb_guard_install(m->env_));
    rc = mdb_env_set_maxdbs(m->env_, static_cast<MDB_dbi>(Db::kCount));
    if (rc == 0) rc = mdb_env_set_mapsize(m->env_, map_bytes);
    if (rc != 0) return lmdb_error(rc, "metadata environment settings");
    m->map_.note_existing(data);  // a map of the same file may be there (lmdb_guard.h)
    unsigned flags = MDB_NOLOCK | MDB_NOTLS | (read_only ? MDB_RDONLY : 0u);
    rc = mdb_env_open(m->env_, dir.c_str(), flags, 0600);
    if (rc != 0) return lmdb_error(rc, "open metadata in " + dir);
    if (options.group_dirty_bytes != 0) {
        MDB_stat st{};
        rc = mdb_env_stat(m->env_, &st);
        if (rc != 0) return lmdb_error(rc, "metadata page size");
        m->page_bytes_ = std::max(1u, st.ms_psize);
        m->group_dirty_limit_ = std::max<std::uint64_t>(1, options.group_dirty_bytes / m->page_bytes_);
    }
    // Always: a read transaction's keys and values are checked against it.
    m->map_.locate(m->env_);  // if not found: no trimming, values only touched
    HIODSFS_TRY(m->map_.refresh(m->env_));
    if (m->resident_limit_ != 0) m->statm_fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

    MDB_txn* txn = nullptr;
    rc = guarded_txn_begin(m->env_, read_only ? MDB_RDONLY : 0u, &txn);
    if (rc != 0) {
        m->group_faulted_ = rc == kLmdbFault && !read_only;
        return lmdb_error(rc, "metadata transaction");
    }
    // A write transaction that faulted stays with the store (lmdb_guard.h).
    auto fail = [&m, &txn, read_only](int code, const std::string& what) {
        if (code == kLmdbFault && !read_only) m->group_faulted_ = true;
        else mdb_txn_abort(txn);
        return lmdb_error(code, what);
    };
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
        rc = guarded_dbi_open(txn, db_name(static_cast<Db>(i)), read_only ? 0u : MDB_CREATE, &m->dbi_[i]);
        if (rc != 0) return fail(rc, std::string("metadata database ") + db_name(static_cast<Db>(i)));
    }
    MDB_val k = to_val(kSuperKey), v{};
    rc = guarded_get(txn, m->dbi_[0], &k, &v, m->map_, read_only);
    m->had_super_ = rc == 0;
    if (rc == 0) {
        bool has_file_count = true;
        if (!decode_super(from_val(v), &m->super_, &has_file_count)) {
            mdb_txn_abort(txn);
            return Status::error(EUCLEAN, "metadata super record has the wrong size");
        }
        if (!has_file_count) {
            // Made before file_count existed: count the regular files once;
            // the next group commit writes the record in the current layout.
            Status st = count_files(txn, m->dbi_[static_cast<int>(Db::kInodes)], m->map_, read_only,
                                    &m->super_.counters.file_count, &rc);
            if (!st) return fail(rc, "metadata inodes");
        }
    } else if (rc != MDB_NOTFOUND) {
        return fail(rc, "metadata super record");
    }
    m->committed_seq_ = m->super_.journal_seq;
    m->logged_seq_ = m->prepared_seq_ = m->super_.journal_seq;
    if (read_only) {
        m->group_ = txn;  // one snapshot for the whole read-only session
    } else {
        rc = guarded_txn_commit(txn);
        if (rc == kLmdbFault) m->group_faulted_ = true;
        if (rc != 0) return lmdb_error(rc, "metadata initialisation");
        HIODSFS_TRY(m->map_.refresh(m->env_));
    }
    m->serving_ = true;
    *out = std::move(m);
    return Status::ok();
}

Status MetaStore::compact(double keep_ratio, std::uint64_t* before, std::uint64_t* after) {
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (read_only_ || group_ != nullptr || env_ == nullptr)
        return Status::error(EINVAL, "metadata compaction needs a writable store with nothing uncommitted");
    const std::string data = dir_ + "/data.mdb", copy = dir_ + "/" + kCompactCopyName;
    struct stat st {};
    if (::stat(data.c_str(), &st) != 0) return Status::from_errno(errno, "metadata " + data);
    *before = *after = static_cast<std::uint64_t>(st.st_size);
    ::unlink(copy.c_str());
    MDB_envinfo info{};
    if (const int rc = mdb_env_info(env_, &info); rc != 0)
        return lmdb_error(rc, "metadata map size");
    int damage = 0;
    Status result = copy_packed(env_, dbi_, map_, info.me_mapsize, copy, &damage);
    if (damage != 0) {
        ::unlink(copy.c_str());
        return damaged(damage, "metadata compaction");
    }
    if (result && ::stat(copy.c_str(), &st) != 0) result = Status::from_errno(errno, "stat " + copy);
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    if (!result || static_cast<double>(size) > keep_ratio * static_cast<double>(*before)) {
        ::unlink(copy.c_str());
        return result;
    }
    // The environment is closed first: its map and descriptor are of the old file.
    close_readers();
    stopped_ = true;
    mdb_env_close(env_);
    env_ = nullptr;
    failed_ = Status::error(EINVAL, "the metadata was compacted and closed");
    if (::rename(copy.c_str(), data.c_str()) != 0) {
        Status why = Status::from_errno(errno, "rename " + copy);
        ::unlink(copy.c_str());
        return why;
    }
    int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return Status::from_errno(errno, "open " + dir_);
    const bool synced = ::fsync(dfd) == 0;
    const int err = errno;
    ::close(dfd);
    if (!synced) return Status::from_errno(err, "sync " + dir_);
    *after = size;
    return Status::ok();
}

MetaStore::MetaStore() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&snapshot_lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
}

MetaStore::~MetaStore() {
    close_readers();
    pthread_rwlock_destroy(&snapshot_lock_);
    if (group_faulted_) {
        if (env_ != nullptr) lmdb_park(env_);  // with its write transaction (meta/lmdb_guard.h)
    } else {
        if (group_ != nullptr) mdb_txn_abort(group_);
        if (env_ != nullptr) mdb_env_close(env_);
    }
    if (statm_fd_ >= 0) ::close(statm_fd_);
}

Status MetaStore::ensure_group() {
    if (group_ != nullptr) return Status::ok();
    int rc = guarded_txn_begin(env_, 0, &group_);
    if (rc != 0) {
        group_ = nullptr;
        if (rc == kLmdbFault) group_faulted_ = true;
        return lmdb_damage(rc) ? damaged(rc, "metadata transaction") : lmdb_error(rc, "metadata transaction");
    }
    group_full_told_ = false;
    capture_group_ = capture_next_group_;
    if (group_dirty_limit_ != 0 && !read_only_) {
        MDB_stat fp{}, ch{};
        rc = guarded_stat(group_, dbi_[static_cast<int>(Db::kFingerprints)], &fp);
        if (rc == 0) rc = guarded_stat(group_, dbi_[static_cast<int>(Db::kChunks)], &ch);
        if (rc == kLmdbFault) {
            group_faulted_ = true;  // kept, as the store stops
            return damaged(rc, "metadata statistics");
        }
        if (rc != 0) {
            mdb_txn_abort(group_);  // nothing changed in it yet
            group_ = nullptr;
            return lmdb_damage(rc) ? damaged(rc, "metadata statistics") : lmdb_error(rc, "metadata statistics");
        }
        // Entry sizes with LMDB's node header: a fingerprint entry of about
        // 12 bytes in buckets of 16-32; a block of 16 chunk records of
        // about 40 bytes.
        fingerprint_pages_.reset(fp, 12, kFingerprintBucketMax * 3 / 4);
        chunk_pages_.reset(ch, 16 * 40 + 16);
        chunk_ids_at_start_ = std::min(super_.next_chunk, chunk_ids_taken_from_);
        blocks_appended_ = 0;
        last_block_appended_ = ~std::uint64_t{0};
    }
    return Status::ok();
}

void MetaStore::note_write(Db db, std::string_view key) {
    if (group_dirty_limit_ == 0 || group_ == nullptr) return;
    if (db == Db::kFingerprints && key.size() >= 8) {
        fingerprint_pages_.note(get_be64(key));
    } else if (std::uint64_t block = 0; db == Db::kChunks && parse_key_u64(key, &block)) {
        // Chunk ids are dense: new ones append at the end of the tree, a
        // block at a time; old ones (counts changed by duplicates, chunks
        // freed) lie anywhere.
        const std::uint64_t id = block * kChunksPerBlock;
        if (id + kChunksPerBlock > chunk_ids_at_start_) {
            if (block != last_block_appended_) ++blocks_appended_;
            last_block_appended_ = block;
        } else {
            chunk_pages_.note(static_cast<std::uint64_t>((static_cast<Wide>(id) << 64) /
                                                         chunk_ids_at_start_));
        }
    }
}

std::uint64_t MetaStore::dirty_pages_locked() const {
    if (group_dirty_limit_ == 0 || group_ == nullptr) return 0;
    return fingerprint_pages_.pages() + chunk_pages_.pages() + blocks_appended_ / chunk_pages_.per_leaf + 1;
}

void MetaStore::maybe_group_full() {
    if (group_full_told_ || !on_group_full_) return;
    const bool writes = group_writes_limit_ != 0 && pending_writes_ >= group_writes_limit_;
    // The overlay holds a copy of what the group changed, beside LMDB's
    // pages: it counts against the same bound.
    const bool pages = group_dirty_limit_ != 0 && (dirty_pages_locked() >= group_dirty_limit_ ||
                                                   overlay_bytes_ >= group_dirty_limit_ * page_bytes_);
    const bool journal = capturing() && group_journal_.size() >= kJournalGroupBytes;
    if (!writes && !pages && !journal) return;
    group_full_told_ = true;
    on_group_full_();
}

std::uint64_t MetaStore::overlay_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return overlay_bytes_;
}

std::uint64_t MetaStore::dirty_pages_estimate() {
    std::lock_guard<std::mutex> lock(mu_);
    return dirty_pages_locked();
}

Status MetaStore::check_running() {
    take_damage_locked();
    return failed_;
}

Status MetaStore::failure() {
    std::lock_guard<std::mutex> lock(mu_);
    take_damage_locked();
    return failed_;
}

void MetaStore::stop(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    take_damage_locked();
    if (failed_.is_ok()) failed_ = Status::error(EIO, why);
    stopped_ = true;
}

Status MetaStore::damaged(int rc, const std::string& what) {
    const std::string why = "metadata damaged (" + what + ": " + lmdb_damage_text(rc) + ")";
    if (!serving_) return Status::error(EUCLEAN, why);
    std::lock_guard<std::mutex> lock(damage_mu_);
    if (damage_.is_ok())
        damage_ = Status::error(EIO, why + "; the store stops: every request fails with EIO until it is mounted "
                                           "again, and hiodsfs-fsck tells more");
    stopped_ = true;
    return damage_;
}

void MetaStore::take_damage_locked() {
    if (!stopped_.load() || (!failed_.is_ok() && !failed_by_lost_group_)) return;
    std::lock_guard<std::mutex> lock(damage_mu_);
    if (failed_.is_ok()) failed_ = damage_;
    else if (!damage_.is_ok()) failed_ = Status::error(EIO, damage_.message() + " (then: " + failed_.message() + ")");
    failed_by_lost_group_ = failed_by_lost_group_ && damage_.is_ok();
}

SuperState MetaStore::super_snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return super_;
}

void MetaStore::apply_held_locked(bool for_commit) {
    if (held_ == nullptr || read_only_ || (!for_commit && !held_->holding())) return;
    applying_held_ = true;
    held_->apply(*this, for_commit);
    applying_held_ = false;
}

Status MetaStore::apply_held_back() {
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    apply_held_locked(false);
    return Status::ok();
}

Status MetaStore::begin_held(std::unique_ptr<Txn>* out) {
    if (!applying_held_) return Status::error(EINVAL, "begin_held outside HeldBack::apply");
    HIODSFS_TRY(ensure_group());
    // The caller of apply holds the lock: this Txn borrows it.
    return begin_op(std::unique_lock<std::mutex>(), out);
}

Status MetaStore::begin_op(std::unique_lock<std::mutex> lock, std::unique_ptr<Txn>* out) {
    std::unique_ptr<Txn> t(new Txn(this, std::move(lock)));
    t->txn_ = group_;
    t->direct_ = !read_only_;
    t->in_group_ = !read_only_;
    *out = std::move(t);
    return Status::ok();
}

void MetaStore::lose_group_locked(const std::string& why) {
    // After a failed commit the group is gone already (group_ is null); one
    // whose LMDB call faulted stays with the environment (lmdb_guard.h).
    if (group_ != nullptr && !group_faulted_) mdb_txn_abort(group_);
    group_ = nullptr;
    group_journal_.clear();
    logged_upto_ = 0;
    ++group_number_;
    end_group_capture();
    pending_ops_ = 0;
    pending_writes_ = 0;
    take_damage_locked();
    if (failed_.is_ok()) {
        failed_ = Status::error(EIO, why + "; the operations of the last interval are lost and the store " +
                                         "accepts nothing more until it is mounted again");
        failed_by_lost_group_ = true;
    }
    stopped_ = true;
    new_snapshot_locked(false);
}

void MetaStore::new_snapshot_locked(bool committed) {
    // Emptied by a swap: a group's overlay may hold a hundred thousand
    // entries, freed after the lock is let go. The empty hashed tables are
    // made first with the old ones' buckets, as clear() would leave them:
    // a table that grows again rehashes every entry under this lock.
    Overlay old_ordered[static_cast<int>(Db::kCount)];
    HashedOverlay old_hashed[static_cast<int>(Db::kCount)];
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) old_hashed[i].rehash(hashed_[i].bucket_count());
    pthread_rwlock_wrlock(&snapshot_lock_);
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
        overlay_[i].swap(old_ordered[i]);
        hashed_[i].swap(old_hashed[i]);
    }
    overlay_bytes_ = 0;
    if (committed) {
        std::lock_guard<std::mutex> pool(pool_mu_);
        std::vector<MDB_txn*> renewed;
        for (MDB_txn* t : pool_) {
            mdb_txn_reset(t);
            if (guarded_txn_renew(t) == 0) renewed.push_back(t);
            else mdb_txn_abort(t);
        }
        pool_ = std::move(renewed);
    }
    pthread_rwlock_unlock(&snapshot_lock_);
}

const std::optional<std::string>* MetaStore::overlay_find(Db db, std::string_view key) const {
    const int i = static_cast<int>(db);
    if (overlay_ordered(db)) {
        auto it = overlay_[i].find(key);
        return it == overlay_[i].end() ? nullptr : &it->second;
    }
    auto it = hashed_[i].find(key);
    return it == hashed_[i].end() ? nullptr : &it->second;
}

Status MetaStore::take_reader(MDB_txn** out) {
    {
        std::lock_guard<std::mutex> pool(pool_mu_);
        if (!pool_.empty()) {
            *out = pool_.back();
            pool_.pop_back();
            return Status::ok();
        }
    }
    std::lock_guard<std::mutex> meta_page(meta_page_mu_);
    const int rc = guarded_txn_begin(env_, MDB_RDONLY, out);
    if (rc == 0) return Status::ok();
    return lmdb_damage(rc) ? damaged(rc, "metadata read") : lmdb_error(rc, "metadata read");
}

void MetaStore::give_back_reader(MDB_txn* txn) {
    std::lock_guard<std::mutex> pool(pool_mu_);
    pool_.push_back(txn);
}

void MetaStore::close_readers() {
    std::lock_guard<std::mutex> pool(pool_mu_);
    for (MDB_txn* t : pool_) mdb_txn_abort(t);
    pool_.clear();
}

Status MetaStore::take_chunk_ids(std::uint64_t n, ChunkId* first) {
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (read_only_) return Status::error(EROFS, "store is open read-only");
    *first = super_.next_chunk;
    super_.next_chunk += n;
    chunk_ids_taken_from_ = *first;
    return Status::ok();
}

Status MetaStore::begin(std::unique_ptr<Txn>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    apply_held_locked(false);
    HIODSFS_TRY(ensure_group());
    return begin_op(std::move(lock), out);
}

Status MetaStore::begin_read(std::unique_ptr<Txn>* out, ReadFrom from) {
    if (!read_only_ && from == ReadFrom::kSnapshot) {
        // Writes held back, or a stopped store: the mutex first (see HeldBack).
        if (stopped_.load() || (held_ != nullptr && held_->holding())) {
            std::lock_guard<std::mutex> lock(mu_);
            HIODSFS_TRY(check_running());
            apply_held_locked(false);
        }
        pthread_rwlock_rdlock(&snapshot_lock_);
        MDB_txn* txn = nullptr;
        if (Status st = take_reader(&txn); !st) {
            pthread_rwlock_unlock(&snapshot_lock_);
            return st;
        }
        out->reset(new Txn(this, txn));
        return Status::ok();
    }
    // Under the mutex: the open group, or a read-only store's one snapshot
    // (which LMDB lets one thread use at a time).
    std::unique_lock<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (read_only_) HIODSFS_TRY(ensure_group());
    apply_held_locked(false);
    std::unique_ptr<Txn> t(new Txn(this, std::move(lock)));
    t->reading_ = true;
    if (group_ != nullptr) {
        t->txn_ = group_;
        t->in_group_ = !read_only_;
    } else {
        // No group open: the committed state is all there is. Opening a
        // group instead would cost a commit (and its syncs) for nothing.
        const int rc = guarded_txn_begin(env_, MDB_RDONLY, &t->txn_);
        if (rc != 0) {
            t->txn_ = nullptr;
            return lmdb_damage(rc) ? damaged(rc, "metadata read") : lmdb_error(rc, "metadata read");
        }
    }
    *out = std::move(t);
    return Status::ok();
}

Status MetaStore::commit_group(const std::function<Status(SuperState*)>& before, bool* reached_limit) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reached_limit != nullptr) *reached_limit = false;
    HIODSFS_TRY(check_running());
    if (read_only_) return Status::ok();
    apply_held_locked(true);
    if (reached_limit != nullptr) *reached_limit = group_ != nullptr && group_full_told_;
    const SuperState current = super_;
    SuperState next = super_;
    if (before) HIODSFS_TRY(before(&next));
    if (group_ == nullptr) {
        // Nothing pending, but a frontier that moved is committed all the
        // same: a segment that held the old one may be deleted next.
        if (next.frontier_segment == super_.frontier_segment &&
            next.frontier_offset == super_.frontier_offset)
            return Status::ok();
        HIODSFS_TRY(ensure_group());
    }
    super_ = next;
    if (journal_ != nullptr) super_.journal_seq = committed_seq_ + 1;
    // The log's records this group holds: the next record follows them.
    if (logging_) super_.journal_seq = prepared_seq_;
    const std::string state = encode_super(super_);
    MDB_val k = to_val(kSuperKey), v = to_val(state);
    int rc = guarded_put(group_, dbi_[0], &k, &v, 0);
    if (rc != 0) {
        // LMDB's transaction is in error now (a full map, a damaged page):
        // the group cannot commit, as if its commit had failed.
        if (rc == kLmdbFault) group_faulted_ = true;
        if (lmdb_damage(rc)) damaged(rc, "metadata super record");
        lose_group_locked(lmdb_error(rc, "metadata super record").message());
        return failed_;
    }
    int fault = commit_fault_ ? commit_fault_() : 0;
    Status journaled;
    if (fault == 0 && journal_ != nullptr) {
        // Beyond the machine before it is durable here: a commit reported
        // to fsync must be in the journal.
        journaled = journal_->write(super_.journal_seq, encode_journal_record(super_.journal_seq, state,
                                                                             coalesce_journal_ops(group_journal_)));
        if (!journaled) {
            // Nothing is committed here, so nothing is lost: the group stays
            // open and the next commit writes its record again, under the
            // same seq, with everything since. If this append did land (a
            // timeout after the write), that longer record supersedes it
            // (read_journal keeps the longest of a seq).
            super_ = current;
            return Status::error(EIO, "metadata journal: " + journaled.message() +
                                          "; the commit is tried again with the next");
        }
    }
    group_journal_.clear();
    logged_upto_ = 0;
    ++group_number_;
    end_group_capture();
    {
        // Reads go on meanwhile, from the state before and the overlay, in
        // the pool's transactions; only one that must begin a new read
        // transaction waits (LMDB writes the meta page last).
        std::lock_guard<std::mutex> meta_page(meta_page_mu_);
        if (fault != 0) {
            mdb_txn_abort(group_);  // what a failed mdb_txn_commit leaves: the group is gone
            rc = fault;
        } else {
            rc = guarded_txn_commit(group_);
            if (rc == kLmdbFault) group_faulted_ = true;
        }
    }
    group_ = nullptr;
    pending_ops_ = 0;
    pending_writes_ = 0;
    if (rc == 0) committed_seq_ = super_.journal_seq;
    if (rc == 0 && logging_) logged_seq_ = super_.journal_seq;
    if (rc != 0) {
        if (lmdb_damage(rc)) damaged(rc, "metadata commit");
        lose_group_locked(lmdb_error(rc, "metadata commit").message());
        return failed_;
    }
    (void)map_.refresh(env_);  // cannot fail with the environment open
    // Before the next write transaction can begin (it holds mu_): with
    // MDB_NOLOCK LMDB reuses the pages the commit before this one freed.
    new_snapshot_locked(true);
    return Status::ok();
}

std::uint64_t MetaStore::pending_ops() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_ops_;
}

bool MetaStore::trim_resident() {
    std::lock_guard<std::mutex> lock(mu_);  // the meta pages mdb_env_info reads
    return trim_resident_locked();
}

bool MetaStore::trim_resident_locked() {
    if (resident_limit_ == 0 || map_.base == nullptr || mapped_file_bytes(statm_fd_) <= resident_limit_)
        return false;
    MDB_envinfo info{};
    MDB_stat st{};
    if (env_ == nullptr || mdb_env_info(env_, &info) != 0 || mdb_env_stat(env_, &st) != 0) return false;
    // Pages past the last one in use were never touched. A shared file
    // mapping: dropping it loses nothing, the next read maps the page
    // cache's page again.
    const std::size_t used = (static_cast<std::size_t>(info.me_last_pgno) + 1) * st.ms_psize;
    return ::madvise(const_cast<char*>(map_.base), std::min(used, map_.length), MADV_DONTNEED) == 0;
}

std::uint64_t MetaStore::pending_writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_writes_;
}

std::uint64_t MetaStore::committed_journal_seq() {
    std::lock_guard<std::mutex> lock(mu_);
    return committed_seq_;
}

void MetaStore::capture_next_group() {
    std::lock_guard<std::mutex> lock(mu_);
    capture_next_group_ = true;
}

// The groups after one with an fsync capture; one without ends that.
void MetaStore::end_group_capture() {
    capture_next_group_ = fsync_in_group_;
    fsync_in_group_ = false;
    capture_group_ = false;
}

Status MetaStore::prepare_log(const std::function<Status(SuperState*)>& before, std::string* record,
                              LogMark* mark, bool* commit_instead) {
    record->clear();
    *commit_instead = false;
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (!logging_ || read_only_) return Status::error(EINVAL, "fsync log of a store that does not log");
    apply_held_locked(true);
    if (group_ == nullptr) {
        capture_next_group_ = true;
        return Status::ok();
    }
    fsync_in_group_ = true;
    if (!capture_group_) {
        *commit_instead = true;
        return Status::ok();
    }
    if (group_journal_.size() == logged_upto_) return Status::ok();
    SuperState next = super_;
    HIODSFS_TRY(before(&next));
    next.journal_seq = logged_seq_ + 1;
    *record = encode_journal_record(next.journal_seq, encode_super(next),
                                    coalesce_journal_ops(std::string_view(group_journal_).substr(logged_upto_)));
    *mark = LogMark{next.journal_seq, group_journal_.size(), group_number_};
    prepared_seq_ = std::max(prepared_seq_, next.journal_seq);
    return Status::ok();
}

void MetaStore::logged(const LogMark& mark) {
    std::lock_guard<std::mutex> lock(mu_);
    // A record of a group that has committed since is in the committed
    // state: the log goes on from that state's seq.
    if (mark.group != group_number_ || mark.seq != logged_seq_ + 1) return;
    logged_seq_ = mark.seq;
    logged_upto_ = mark.upto;
}

Status MetaStore::replay(const JournalRecord& record) {
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (read_only_ || group_ != nullptr || journal_ != nullptr)
        return Status::error(EINVAL, "journal replay needs a writable store with nothing uncommitted");
    SuperState next;
    bool has_file_count = true;
    if (!decode_super(record.super, &next, &has_file_count) || next.journal_seq != record.seq)
        return Status::error(EUCLEAN, "journal record " + std::to_string(record.seq) + " has a bad super record");
    // A log record made again after a failed write (0.4.0's first builds
    // did so) holds all the first held: applied over it, it leaves what it
    // alone would.
    const bool again = logging_ && record.seq == replayed_seq_ && record.seq != 0;
    if (record.seq != committed_seq_ + 1 && !again)
        return Status::error(EINVAL, "journal record " + std::to_string(record.seq) + " does not follow " +
                                         std::to_string(committed_seq_));
    MDB_txn* txn = nullptr;
    int rc = guarded_txn_begin(env_, 0, &txn);
    if (rc != 0) {
        if (rc == kLmdbFault) group_faulted_ = true;
        return lmdb_damage(rc) ? damaged(rc, "journal replay") : lmdb_error(rc, "metadata transaction");
    }
    const bool parsed = for_each_journal_op(record.ops, [&](const JournalOp& op) {
        MDB_val k = to_val(op.key), v = to_val(op.value);
        const MDB_dbi dbi = dbi_[static_cast<int>(op.db)];
        rc = op.put ? guarded_put(txn, dbi, &k, &v, 0) : guarded_del(txn, dbi, &k);
        if (rc == MDB_NOTFOUND) rc = 0;
        return rc == 0;
    });
    if (parsed && rc == 0) {
        MDB_val k = to_val(kSuperKey), v = to_val(record.super);
        rc = guarded_put(txn, dbi_[0], &k, &v, 0);
    }
    if (!parsed || rc != 0) {
        // A transaction that faulted stays with the environment (lmdb_guard.h).
        if (rc == kLmdbFault) group_faulted_ = true;
        else mdb_txn_abort(txn);
        if (lmdb_damage(rc)) return damaged(rc, "journal replay");
        return rc != 0 ? lmdb_error(rc, "journal replay")
                       : Status::error(EUCLEAN, "journal record " + std::to_string(record.seq) + " does not parse");
    }
    {
        std::lock_guard<std::mutex> meta_page(meta_page_mu_);
        rc = guarded_txn_commit(txn);
    }
    if (rc == kLmdbFault) group_faulted_ = true;
    if (rc != 0) return lmdb_damage(rc) ? damaged(rc, "journal replay commit") : lmdb_error(rc, "journal replay commit");
    (void)map_.refresh(env_);
    new_snapshot_locked(true);
    super_ = next;
    committed_seq_ = record.seq;
    logged_seq_ = prepared_seq_ = replayed_seq_ = record.seq;
    return Status::ok();
}

Status MetaStore::snapshot(const std::string& path, std::uint64_t* seq) {
    std::lock_guard<std::mutex> lock(mu_);
    HIODSFS_TRY(check_running());
    if (env_ == nullptr) return Status::error(EINVAL, "metadata snapshot of a closed store");
    ::unlink(path.c_str());
    MDB_envinfo info{};
    if (const int rc = mdb_env_info(env_, &info); rc != 0)
        return lmdb_error(rc, "metadata map size");
    // The lock keeps every commit out while the copy reads the committed
    // state, so that state is committed_seq_'s. (An open group's pages are
    // never the committed ones: LMDB writes a transaction's pages elsewhere.)
    int damage = 0;
    Status st = copy_packed(env_, dbi_, map_, info.me_mapsize, path, &damage);
    if (damage != 0) st = damaged(damage, "metadata snapshot");
    if (!st) {
        ::unlink(path.c_str());
        return st;
    }
    *seq = committed_seq_;
    return Status::ok();
}

}  // namespace hiodsfs
