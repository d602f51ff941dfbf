// The engine's life: opening a store and closing it, the group commit and
// the control loop, status for hiodsfs-stat, and space. The rest of
// EngineImpl is in the files engine_impl.h lists.
#include "engine/engine_impl.h"
#include "engine/fsync_log.h"

#include <filesystem>

#include "common/thread_name.h"
#include "common/units.h"

#include <malloc.h>

#include <nlohmann/json.hpp>

namespace hiodsfs {

// ---------------------------------------------------------------------------
// Opening and closing

Status EngineImpl::init(const EngineOptions& options) {
    opts_ = options;
    uid_ = ::getuid();
    gid_ = ::getgid();
    const std::string& dir = options.store_dir;
    // Opened once: every file of the store is reached from this descriptor,
    // never by its path again (store/store_dir.h).
    StoreDirOptions dir_options;
    dir_options.create = options.create_if_missing;
    dir_options.read_only = options.read_only;
    dir_options.check_owner = !options.any_store_owner;
    dir_options.waiver = "-o unsafe_store_dir accepts it";
    HIODSFS_TRY(StoreDir::open(dir, dir_options, &store_));
    env_ = options.env != nullptr ? options.env : store_->env();
    // An injected Env (tests) knows the store by its path alone.
    lib_dir_ = options.env != nullptr ? dir : store_->via_fd();

    HIODSFS_TRY(StoreLock::acquire(*store_, !options.read_only, options.lock_wait_ms, &lock_));
    // A metadata snapshot a crash left half-written (snapshot_to_tier).
    if (!options.read_only) ::unlinkat(store_->fd(), "snapshot.tmp", 0);
    struct statvfs fsv {};
    const std::uint64_t fs_bytes =
        store_->statvfs(&fsv) ? std::uint64_t{fsv.f_blocks} * fsv.f_frsize : 0;
    const SpaceBudget budget =
        plan_space(fs_bytes, options.segments.max_segment_bytes, options.space_reserve);
    space_.start(budget.reserve, [this](struct statvfs* v) { return store_->statvfs(v); });
    compaction_floor_ = budget.metadata_floor;

    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(env_, dir, &format, &exists));
    SegmentTier* const tier = options.read_only ? nullptr : options.segments.tier;
    // A directory with metadata but no FORMAT: the record is written again
    // from the metadata's copy, or an unfinished first open started again.
    if (!exists) HIODSFS_TRY(find_lost_format(dir, &format, &exists));
    if (!exists && tier != nullptr) {
        // A directory without FORMAT over a tier that holds the store: the
        // store lives on in the tier (this host's directory was lost, or
        // this is another host): its metadata is rebuilt from there.
        bool in_tier = false;
        HIODSFS_TRY(tier_has_metadata(tier, &in_tier));
        if (in_tier) {
            HIODSFS_TRY(recover_from_tier(dir));
            HIODSFS_TRY(read_store_format(env_, dir, &format, &exists));
        }
    }
    bool fresh = !exists;
    format_log_open_ = exists && format.log_open;
    if (exists) {
        HIODSFS_TRY(check_format_version(dir, format));
        if (options.chunking_given && !(options.chunking == format.chunking))
            return Status::error(EINVAL, "store " + dir + " was made with chunking " +
                                             format.chunking.describe() +
                                             " and cannot be opened with " +
                                             options.chunking.describe());
        chunking_ = format.chunking;
        HIODSFS_TRY(check_tier(format));
        backend_ = format.tier;
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

    if (backend_.empty()) backend_ = options.segments.tier != nullptr ? tier_name() : "local";
    // The metadata first: it says which segment bytes are committed, and a
    // store whose metadata is gone or damaged is refused before anything
    // of it is touched (a fresh environment would disown every segment).
    MetaStoreOptions meta_options;
    meta_options.map_bytes = options.lmdb_map_bytes;
    meta_options.read_only = options.read_only;
    meta_options.create = fresh;
    meta_options.commit_fault = options.commit_fault;
    meta_options.on_publish = options.on_publish;
    meta_options.group_writes = options.background_commit ? options.commit_writes : 0;
    meta_options.group_dirty_bytes = options.background_commit ? options.meta_dirty_bytes : 0;
    meta_options.resident_bytes = options.meta_resident_bytes;
    meta_options.on_group_full = [this] {
        // Under the metadata lock; the committer never waits for it while
        // holding committer_mu_.
        {
            std::lock_guard<std::mutex> l(committer_mu_);
            group_full_ = true;
        }
        committer_cv_.notify_all();  // the control loop shares the variable
    };
    const std::string fsck_hint = "; nothing was changed; hiodsfs-fsck " + dir + " tells more";
    Status opened = store_->library_dir("meta", fresh, &meta_dir_);
    if (opened) opened = store_->named(MetaStore::open(meta_dir_, meta_options, &meta_));
    if (!opened) {
        return Status::error(opened.err() == ENOENT ? EUCLEAN : opened.err(),
                             "store " + dir + " cannot be opened: its metadata is unreadable (" +
                                 opened.message() + ")" + fsck_hint);
    }
    if (!fresh && !meta_->had_super())
        return Status::error(EUCLEAN, "store " + dir + " cannot be opened: its metadata has no "
                                          "state record (made anew or damaged)" + fsck_hint);
    if (!fresh) HIODSFS_TRY(check_format_copy(dir, format));
    SegmentPosition tier_wins_from;
    if (tier != nullptr) {
        // The tier's journal may hold commits this directory never made
        // durable (a crash between the two): they are replayed. A directory
        // that is no continuation of the tier's copy is refused.
        if (!fresh) {
            const SuperState before = meta_->super_snapshot();
            CatchUp caught;
            opened = catch_up_from_tier(tier, *meta_, dir, &caught);
            if (!opened) return Status::error(opened.err(), "store " + tier_name() + " cannot be opened: " + opened.message());
            if (caught.replayed > 0 && opts_.log)
                opts_.log("hiodsfs: replayed " + std::to_string(caught.replayed) +
                          " journal records from " + tier_name() + " that " + dir +
                          " had not committed" +
                          (caught.foreign
                               ? " (another holder's: the pool's copies of this directory's newer "
                                 "segments are the store's)"
                               : ""));
            // Another host went on with the store: its records may refer to
            // segments this directory holds longer copies of (an older
            // hiodsfs reused ids); the pool's are the store's.
            if (caught.foreign)
                tier_wins_from = SegmentPosition{static_cast<SegmentId>(before.frontier_segment),
                                                 before.frontier_offset};
        }
        journal_ = std::make_unique<TierJournal>(tier);
        meta_->set_journal(journal_.get());
        last_snapshot_ = std::chrono::steady_clock::now();
    }
    const SuperState committed = meta_->super_snapshot();
    SegmentStoreOptions seg_options = options.segments;
    seg_options.max_segment_bytes = budget.segment_bytes;
    seg_options.read_only = options.read_only;  // a read-only open must not cut a torn tail under a daemon
    seg_options.committed = SegmentPosition{static_cast<SegmentId>(committed.frontier_segment),
                                            committed.frontier_offset};
    if (!seg_options.log) seg_options.log = opts_.log;
    if (tier != nullptr && !fresh && format.tier == tier_name()) {
        // Every committed byte reached the tier before its commit: a local
        // segment the tier lacks is missing there (live chunks) or no
        // record's (a crash's leftover, a stale holder's active segment).
        seg_options.tier_wins_from = tier_wins_from;
        seg_options.has_live_chunks = [this](SegmentId seg) {
            std::unique_ptr<Txn> t;
            std::string_view v;
            bool found = false;
            // Unreadable or damaged: kept, for fsck to judge.
            if (!meta_->begin_read(&t) || !t->get(Db::kSegments, key_u64(seg), &v, &found))
                return true;
            return found && (v.size() != 8 || get_be64(v) > 0);
        };
    }
    opened = SegmentStore::open(env_, dir + "/segments", seg_options, &segs_);
    if (opened.err() == EUCLEAN)
        return Status::error(EUCLEAN, "store " + dir + " cannot be opened read-write: " + opened.message() +
                                          fsck_hint + " (mount with -o ro to copy out the rest)");
    HIODSFS_TRY(opened);
    // Always: a commit's frontier comes from apply() (commit_now).
    meta_->set_held_back(this);
    if (tier == nullptr && !options.read_only && options.fsync_log) meta_->set_logging(true);
    if (!fresh && options.segments.tier == nullptr) HIODSFS_TRY(replay_log(dir));
    // With the frontier committed before the replay: a segment after it
    // that the replayed records do not refer to either (one holding only
    // log records, or writes no fsync covered) is a crash's leftover.
    if (!fresh) HIODSFS_TRY(check_segment_files(committed, fsck_hint));
    // After the replay: its records carry the frontier of their own state.
    if (!fresh && !options.read_only) HIODSFS_TRY(count_crash_leftovers(meta_->super_snapshot()));

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
        HIODSFS_TRY(write_format_copy(*t, StoreFormat{kFormatVersion, chunking_, tier_name()}));
        t->super() = SuperState{};
        t->super().counters.inode_count = 1;
        HIODSFS_TRY(t->commit());
        t.reset();
        // The tier's copy of FORMAT first: a host recovering the store
        // from the tier needs its chunking.
        if (tier != nullptr)
            HIODSFS_TRY(put_format(tier, store_format_text(StoreFormat{kFormatVersion, chunking_, tier_name()})));
        HIODSFS_TRY(commit_now());
        // FORMAT last: a store without it is unfinished and may be made again.
        HIODSFS_TRY(write_store_format(env_, dir, StoreFormat{kFormatVersion, chunking_, tier_name()}));
    } else if (format.tier.empty() && options.segments.tier != nullptr && !options.read_only) {
        // A store that kept every segment here now has a tier: its sealed
        // segments are on their way there, and it must not be opened
        // without the tier again.
        HIODSFS_TRY(write_store_format(env_, dir, StoreFormat{kFormatVersion, chunking_, tier_name()}));
    }
    if (tier != nullptr && !fresh) {
        // A store made before its metadata was journaled: a first snapshot
        // (and FORMAT) in the tier, which the journal continues.
        std::uint64_t seq = 0;
        bool have_snapshot = false;
        HIODSFS_TRY(snapshot_seq(tier, &seq, &have_snapshot));
        if (!have_snapshot && meta_->committed_journal_seq() == 0) {
            HIODSFS_TRY(put_format(tier, store_format_text(StoreFormat{kFormatVersion, chunking_, tier_name()})));
            HIODSFS_TRY(snapshot_to_tier(false));
        }
    }
    // A store an older hiodsfs made gets its copy of FORMAT now, one given
    // a tier its new tier line (after the first snapshot: this commit is
    // the journal's first record past it).
    if (!fresh && !options.read_only) HIODSFS_TRY(keep_format_copy());
    // Opened and accepted: files left more open than 0600/0700 are tightened.
    if (!options.read_only) HIODSFS_TRY(make_store_private(*store_));
    // Before the first fsync can write a log record. Where FORMAT cannot be
    // rewritten (a full disk), fsyncs commit instead this time: a store
    // without the mark must hold no record.
    if (meta_->logging()) {
        Status marked = mark_log_open(true);
        if (!marked) {
            meta_->set_logging(false);
            if (opts_.log)
                opts_.log("hiodsfs: fsyncs of " + dir + " commit the metadata this time: FORMAT could not be marked (" +
                          marked.message() + ")");
        }
    }
    reclaim_mode_ = options.reclaim;
    if (reclaim_mode_ == ReclaimMode::kBackground && !options.background_commit)
        reclaim_mode_ = ReclaimMode::kOff;
    if (!options.read_only)
        compactor_ = std::make_unique<Compactor>(meta_.get(), segs_.get(),
                                                 [this] { return commit_now(); },
                                                 options.compact_threshold);
    if (compactor_)
        compactor_->set_room_for(
            [this](std::uint64_t bytes) { return space_.check(bytes, compaction_floor_).is_ok(); });
    if (!fresh && !options.read_only) {
        // Inodes unlinked while open when the store was last closed or
        // crashed, and large deletes still queued: freed now, except that
        // large files are left to the reclaimer when it runs.
        std::vector<InodeId> orphans;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            Cursor c = t->cursor(Db::kOrphans);
            for (bool ok = c.first(); ok; ok = c.next()) {
                InodeId ino = 0;
                if (parse_key_u64(c.key(), &ino)) orphans.push_back(ino);  // else fsck's to report
            }
            HIODSFS_TRY(c.status());
        }
        for (InodeId ino : orphans) {
            // Those set aside before are tried again; one that fails is set
            // aside (again) rather than refusing the store.
            Status st;
            {
                std::unique_ptr<Txn> t;
                st = meta_->begin(&t);
                if (st) st = free_inode(*t, ino);
                if (st) st = t->commit();
            }
            if (!st) HIODSFS_TRY(set_aside_orphan(ino, st));
        }
        HIODSFS_TRY(requeue_set_aside());
        if (!orphans.empty()) HIODSFS_TRY(commit_now());
    }
    // The open's own commits are done: the users' first group captures.
    if (meta_->logging()) meta_->capture_next_group();

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
    if (options.background_commit)
        committer_ = std::thread([this] {
            name_this_thread("committer");
            committer_loop();
        });
    if (options.background_threads > 0) {
        pass_ = std::make_unique<BackgroundPass>(
            static_cast<DedupTarget*>(this), [this] { return background_speed(); },
            options.background_threads);
        pass_->start();
    }
    if (options.background_commit)
        control_ = std::thread([this] {
            name_this_thread("mode-control");
            control_loop();
        });
    if (reclaim_mode_ == ReclaimMode::kBackground) {
        reclaimer_ = std::make_unique<Reclaimer>(static_cast<ReclaimTarget*>(this),
                                                 [this] { return background_speed(); });
        SpaceAdmission::Reclaim reclaim;
        reclaim.wake = [this] { reclaimer_->wake(); };
        reclaim.disk_bytes = [this] { return segs_->disk_bytes(); };
        reclaim.files_freed = [this] { return deletes_done_.load(); };
        space_.set_reclaim(std::move(reclaim));
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

std::string EngineImpl::tier_name() const {
    return opts_.segments.tier != nullptr ? opts_.segments.tier->describe() : "";
}

Status EngineImpl::check_tier(const StoreFormat& format) const {
    const std::string& dir = opts_.store_dir;
    if (format.tier.empty() || format.tier == tier_name()) return Status::ok();
    // Read-only tools (hiodsfs-stat, counters) see what the directory holds.
    if (opts_.segments.tier == nullptr && opts_.read_only) return Status::ok();
    if (opts_.segments.tier == nullptr)
        return Status::error(EINVAL, "store " + dir + " keeps its segments in " + format.tier +
                                         ": mount it as " + format.tier + " -o cache_dir=" + dir);
    return Status::error(EINVAL, "store " + dir + " keeps its segments in " + format.tier +
                                     ", not in " + tier_name());
}

Status EngineImpl::check_tier_unchanged() {
    if (!journal_) return Status::ok();
    return journal_->check_unchanged(meta_->committed_journal_seq());
}

void EngineImpl::stop(const std::string& why) {
    if (meta_) meta_->stop(why);
}

bool EngineImpl::stop_with_segments() {
    if (!segs_) return false;
    const Status why = segs_->failure();
    if (why.is_ok()) return false;
    meta_->stop(why.message());
    if (!segments_stop_logged_.exchange(true) && opts_.log)
        opts_.log("hiodsfs: the store stopped: " + why.message() +
                  "; every request fails with EIO until it is mounted again");
    return true;
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
        // A half-copied segment stays; the copies made of it are dead.
        if (compactor_) {
            Status st = compactor_->abandon_job();
            if (!st && result) result = st;
        }
        // With a tier, the active segment is sealed so that everything
        // written is uploaded before the daemon exits; the next open
        // appends to a new segment.
        const bool tiered = opts_.segments.tier != nullptr && meta_->failure().is_ok();
        if (tiered && result) {
            Status sealed = segs_->seal();
            if (!sealed && result) result = sealed;
        }
        Status st = commit_now();
        if (!st && result) result = st;
        if (result && format_log_open_) {
            // Everything is committed: no record is left to apply. Not an
            // error of the close: a FORMAT still marked refuses 0.3.0 only.
            Status marked = mark_log_open(false);
            if (!marked && opts_.log) opts_.log("hiodsfs: FORMAT still marks an open fsync log: " + marked.message());
        }
        if (result && journal_) {
            // Not an error of the close: the journal holds every commit.
            Status snap = snapshot_to_tier(true);
            if (!snap && opts_.log) opts_.log("hiodsfs: no metadata snapshot at unmount: " + snap.message());
        }
        if (result) compact_metadata();
        if (tiered) {
            // Not an error of the close: what is not uploaded stays here and
            // goes at the next open.
            Status uploaded = segs_->finish_uploads();
            if (!uploaded && opts_.log) opts_.log("hiodsfs: " + uploaded.message());
        }
    }
    closed_ = true;
    compactor_.reset();
    meta_.reset();
    segs_.reset();
    lock_.reset();
    // The pass is stopped: nothing of the engine runs once close returns
    // (unless another engine of this process still has the threads).
    pool_threads_.join();
    return result;
}

void EngineImpl::compact_metadata() {
    const std::uint64_t limit = opts_.meta_compact_max_bytes;
    struct stat st {};
    const std::string data = meta_dir_ + "/data.mdb";
    if (limit == 0 || ::stat(data.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) > limit) return;
    std::uint64_t before = 0, after = 0;
    Status c = meta_->compact(0.9, &before, &after);
    // Not an error of the close: a failed compaction leaves the file as it was.
    if (!c && opts_.log) opts_.log("hiodsfs: metadata not compacted: " + c.message());
    if (c && after < before && opts_.log)
        opts_.log("hiodsfs: metadata compacted: " + human_bytes(static_cast<double>(before)) + " -> " +
                  human_bytes(static_cast<double>(after)));
}

// STORE/FORMAT is missing. An empty directory is a new store. One with
// committed metadata is opened with the metadata's copy of the record (and
// FORMAT written again from it, unless read-only). A first open that
// crashed before it wrote FORMAT committed nothing and wrote no segment
// byte: it is cleared and made again. Anything else is refused, untouched.
Status EngineImpl::find_lost_format(const std::string& dir, StoreFormat* format, bool* exists) {
    const bool read_only = opts_.read_only;
    std::vector<std::string> names;
    HIODSFS_TRY(env_->list_dir(dir, &names));
    bool empty = true, has_meta = false, foreign = false;
    for (const auto& n : names) {
        if (n == "." || n == ".." || n == "lock") continue;
        empty = false;
        if (n == "meta") has_meta = true;
        else if (n != "segments" && n != "status.json" && n != "FORMAT.tmp" && n != "snapshot.tmp") foreign = true;
    }
    if (foreign) return Status::error(EEXIST, "store " + dir + " is not empty and is not a hiodsfs store");
    // No metadata here: a new store, or one its tier holds (the caller's).
    if (empty || !has_meta) return Status::ok();
    const std::string untouched = "; nothing was changed; ";

    std::unique_ptr<MetaStore> probe;
    MetaStoreOptions mo;
    mo.map_bytes = opts_.lmdb_map_bytes;
    mo.read_only = true;
    mo.create = false;
    std::string probe_dir;
    Status opened = store_->library_dir("meta", false, &probe_dir);
    if (opened) opened = store_->named(MetaStore::open(probe_dir, mo, &probe));
    if (opened && probe->had_super()) {
        StoreFormat copy;
        bool found = false;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(probe->begin_read(&t));
            HIODSFS_TRY(read_format_copy(*t, &copy, &found));
        }
        probe.reset();
        if (!found)
            return Status::error(EUCLEAN, "store " + dir + " has metadata but no FORMAT record, and its metadata (from an "
                                          "older hiodsfs) holds no copy of it" + untouched + "`hiodsfs-fsck --repair "
                                          "--chunking SPEC " + dir + "` writes it again with the chunking it was made with");
        HIODSFS_TRY(check_format_version(dir, copy));
        *format = copy;
        *exists = true;
        if (read_only) return Status::ok();
        HIODSFS_TRY(write_store_format(env_, dir, copy));
        if (opts_.log)
            opts_.log("hiodsfs: " + dir + "/FORMAT was missing; written again from the metadata's copy (format " +
                      std::to_string(copy.version) + ", chunking " + copy.chunking.describe() + ")");
        return Status::ok();
    }
    probe.reset();
    // Nothing committed. An environment that does not open is damaged,
    // unless it is the few pages (or none) LMDB writes when it makes one.
    struct stat data {};
    const bool small_env =
        ::fstatat(store_->fd(), "meta/data.mdb", &data, AT_SYMLINK_NOFOLLOW) != 0 ||
        data.st_size <= 16384;
    if (!opened && !small_env)
        return Status::error(EUCLEAN, "store " + dir + " has no FORMAT record and its metadata is unreadable (" +
                                          opened.message() + ")" + untouched + "hiodsfs-fsck " + dir + " tells more");
    std::vector<std::string> segments;
    if (env_->list_dir(dir + "/segments", &segments)) {
        for (const std::string& n : segments) {
            std::unique_ptr<File> f;
            std::uint64_t size = 0;
            if (env_->open(dir + "/segments/" + n, OpenMode::kRead, &f) && f->size(&size) &&
                size > 0)
                return Status::error(EUCLEAN,
                                     "store " + dir +
                                         " has segment data but neither a FORMAT record nor "
                                         "committed metadata" +
                                         untouched + "hiodsfs-fsck " + dir + " tells more");
        }
    }
    if (read_only)
        return Status::error(ENOENT, "store " + dir + " was left unfinished by an interrupted first mount; "
                                     "mount it read-write to make it");
    for (const char* n : {"meta", "segments", "status.json", "FORMAT.tmp", "snapshot.tmp"}) {
        // Through the descriptor; remove_all removes a link, never what it points to.
        std::error_code ec;
        std::filesystem::remove_all(lib_dir_ + "/" + n, ec);
        if (ec) return Status::error(ec.value(), "removing " + dir + "/" + n + ": " + ec.message());
    }
    if (opts_.log)
        opts_.log("hiodsfs: " + dir + " was left unfinished by an interrupted first mount (nothing committed); "
                  "starting it again");
    return Status::ok();
}

// The metadata's copy of FORMAT, where it has one, must say what FORMAT
// says: a FORMAT edited or restored from elsewhere is not trusted over it.
Status EngineImpl::check_format_copy(const std::string& dir, const StoreFormat& format) {
    StoreFormat copy;
    bool found = false;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    }
    if (!found || same_format(copy, format)) return Status::ok();
    return Status::error(EUCLEAN, "store " + dir + ": FORMAT says format " + std::to_string(format.version) +
                                      ", chunking " + format.chunking.describe() + ", but the metadata's copy says format " +
                                      std::to_string(copy.version) + ", chunking " + copy.chunking.describe() +
                                      "; nothing was changed; `hiodsfs-fsck --repair " + dir +
                                      "` writes FORMAT again from the metadata");
}

// Records this open's FORMAT in the metadata, durably, if it is not there.
Status EngineImpl::keep_format_copy() {
    const StoreFormat want{kFormatVersion, chunking_, tier_name()};
    StoreFormat copy;
    bool found = false;
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    if (found && store_format_text(copy) == store_format_text(want)) return Status::ok();
    HIODSFS_TRY(write_format_copy(*t, want));
    HIODSFS_TRY(t->commit());
    t.reset();
    return commit_now();
}

Status EngineImpl::mark_log_open(bool open) {
    if (format_log_open_ == open) return Status::ok();
    StoreFormat format{kFormatVersion, chunking_, tier_name()};
    format.log_open = open;
    HIODSFS_TRY(write_store_format(env_, opts_.store_dir, format));
    format_log_open_ = open;
    return Status::ok();
}

Status EngineImpl::recover_from_tier(const std::string& dir) {
    std::string summary;
    HIODSFS_TRY(store_->named(
        recover_store_dir(env_, opts_.segments.tier, lib_dir_, opts_.lmdb_map_bytes, &summary)));
    if (opts_.log) opts_.log("hiodsfs: recovered the metadata of " + tier_name() + " into " + dir + ": " + summary);
    return Status::ok();
}

Status EngineImpl::snapshot_to_tier(bool closing) {
    std::uint64_t seq = 0;
    Status st = put_snapshot(env_, opts_.segments.tier, *meta_, journal_.get(),
                             lib_dir_ + "/snapshot.tmp", closing, &seq);
    last_snapshot_ = std::chrono::steady_clock::now();
    return store_->named(st);
}

// After a background commit: a snapshot once the journal has grown by
// kSnapshotJournalBytes, or every 10 minutes while it grows at all, so
// that a recovery replays little and the journal objects can go.
void EngineImpl::maybe_snapshot() {
    if (!journal_) return;
    const std::uint64_t grown = journal_->bytes_since_snapshot();
    const bool due = grown >= kSnapshotJournalBytes ||
                     (grown > 0 && std::chrono::steady_clock::now() - last_snapshot_ > std::chrono::minutes(10));
    if (!due) return;
    Status st = snapshot_to_tier(false);
    if (!st && opts_.log) opts_.log("hiodsfs: metadata snapshot failed (retried later): " + st.message());
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

// What fsyncs left in the log after the last commit (a crash): applied
// before anything reads the metadata. A read-only open cannot, and refuses.
Status EngineImpl::replay_log(const std::string& dir) {
    LogReplay replay;
    HIODSFS_TRY(replay_fsync_log(*meta_, *segs_, !opts_.read_only, &replay));
    if (opts_.read_only && replay.records > 0 && !opts_.read_only_at_last_commit)
        return Status::error(EUCLEAN, "store " + dir + " holds " + std::to_string(replay.records) +
                                          " fsynced changes its metadata does not have yet (it was not "
                                          "unmounted): open it read-write once to apply them");
    if (!replay.stopped.empty() && opts_.log)
        opts_.log("hiodsfs: the fsync log of " + dir + " stops early: " + replay.stopped +
                  "; what was fsynced after it is lost (hiodsfs-fsck " + dir + " checks the rest)");
    if (replay.records == 0 || opts_.read_only) return Status::ok();
    if (opts_.log)
        opts_.log("hiodsfs: applied " + std::to_string(replay.records) + " fsync log records that " + dir +
                  " had not committed");
    return Status::ok();
}

// An fsync of a logging store: the group's changes since the last record,
// appended to the segments as one record, then synced with them. Records
// take their seqs and places in the stream under commit_mu_; the sync runs
// after it is released, so fsyncs of several threads share one: a sync that
// covers a record covers every record before it, as the stream is written
// in order (a failed write keeps its bytes for the next, a failed sync stops
// the store), and one that finds its record already covered returns at once.
Status EngineImpl::log_now() {
    SegmentPosition through;
    {
        std::lock_guard<std::mutex> serial(commit_mu_);
        std::string record;
        LogMark mark;
        bool commit_instead = false;
        HIODSFS_TRY(meta_->prepare_log(
            [this](SuperState* state) {
                // Every chunk the group refers to was appended before this
                // point (held writes were applied just now, under the lock).
                const SegmentPosition p = segs_->append_position();
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
                segs_->append(kLogRecord, record.data(), static_cast<std::uint32_t>(record.size()), &loc));
            // In the stream now: the next record follows this one.
            meta_->logged(mark);
            HIODSFS_TRY(note_log_segment(loc.segment));
            through = SegmentPosition{loc.segment, loc.offset + loc.length};
        } else {
            // Nothing new: the records before may still wait for their sync.
            through = segs_->append_position();
        }
    }
    return segs_->sync_through(through);
}

// The entry is a change of the open group after the record: the next record
// or commit has it. A crash before either leaves the segment after the
// committed frontier, which the next open records (check_segment_files).
Status EngineImpl::note_log_segment(SegmentId seg) {
    if (seg == log_segment_noted_) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(note_segment(*t, seg));
    HIODSFS_TRY(t->commit());
    log_segment_noted_ = seg;
    return Status::ok();
}

Status EngineImpl::commit_now(bool* reached_limit) {
    std::lock_guard<std::mutex> serial(commit_mu_);
    return commit_locked(reached_limit);
}

// An entry of 0 live bytes, unless it has one: a damaged one is fsck's to
// repair, never to be read as "dead" here.
Status EngineImpl::note_segment(Txn& t, SegmentId seg) {
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kSegments, key_u64(seg), &v, &found));
    return found ? Status::ok() : add_segment_live(t, seg, 0);
}

Status EngineImpl::note_new_segments() {
    if (opts_.read_only || segs_->active_segment() <= segments_noted_) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    // Listed under the metadata lock: compaction deletes a file before it
    // drops the file's entry, in an operation of its own, so a file listed
    // here still has its entry unless it never got one.
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    const SegmentId active = segs_->active_segment();
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

Status EngineImpl::commit_locked(bool* reached_limit) {
    HIODSFS_TRY(note_new_segments());
    // Most data is synced before taking the metadata lock; the sync under
    // it covers what was appended meanwhile. A fast writer appends tens of
    // MiB during a sync of that much (whole segments, 60-70 ms each here),
    // so this syncs again while the last round left more than
    // kLockedSyncBytes behind it. With a journal, the same for the synced
    // bytes the tier needs first.
    SegmentPosition early;
    HIODSFS_TRY(segs_->sync(&early));
    for (int round = 1; round < kPreSyncRounds; ++round) {
        const SegmentPosition now = segs_->append_position();
        if (now.segment == early.segment && now.offset - std::min(now.offset, early.offset) <= kLockedSyncBytes)
            break;
        HIODSFS_TRY(segs_->sync(&early));
    }
    Status st = journal_ ? segs_->push_to_tier(early) : Status::ok();
    if (st) st = meta_->commit_group([this](SuperState* state) {
        SegmentPosition synced;
        HIODSFS_TRY(segs_->sync(&synced));
        // Writes held back after the group took the last ones appended
        // past drained_at_: their bytes are not the group's, crash leftovers
        // if it is the last commit.
        const bool drained_first = drained_at_.segment < synced.segment ||
                                   (drained_at_.segment == synced.segment && drained_at_.offset < synced.offset);
        const SegmentPosition frontier = drained_first ? drained_at_ : synced;
        state->frontier_segment = frontier.segment;
        state->frontier_offset = frontier.offset;
        // Every byte the journal record will refer to is in the tier before it.
        if (journal_) HIODSFS_TRY(segs_->push_to_tier(frontier));
        return Status::ok();
    }, reached_limit);
    // Logged once: the failure that stopped the store. With a journal, a
    // commit whose bytes could not be pushed leaves the store running (the
    // next commit tries again): logged once per run of such failures.
    const bool segments_stopped = !st && stop_with_segments();  // logged there
    const bool stopped = !journal_ || !meta_->failure().is_ok();
    if (!st && st.err() == EIO && stopped && !segments_stopped && !commit_failed_.exchange(true) &&
        opts_.log)
        opts_.log("hiodsfs: " + st.message());
    if (!st && !stopped && !push_failing_.exchange(true) && opts_.log)
        opts_.log("hiodsfs: a commit failed and is tried again with the next: " + st.message());
    if (st) push_failing_.store(false);
    if (st && meta_->trim_resident()) resident_trims_.fetch_add(1, std::memory_order_relaxed);
    return st;
}

// Chunk records a crash left after the frontier of the state the store
// opened with (the last commit's, or the last fsync log record's it
// replayed) are dead, unless something refers to them: counted once, as the
// next commit's frontier lies past them. A store that has no frontier yet
// (made before it was recorded) is left to hiodsfs-fsck. With a tier, a
// segment there only is read too (fetched: after a crash on another host,
// the pool's copy of its last segment holds what it wrote after its last
// commit).
Status EngineImpl::count_crash_leftovers(const SuperState& committed) {
    if (committed.frontier_segment == 0) return Status::ok();
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    std::vector<std::pair<ChunkId, ChunkLocation>> after;
    for (const auto& [seg, size] : files) {
        if (seg < committed.frontier_segment || size == 0) continue;
        HIODSFS_TRY(segs_->scan(seg, false, [&, seg = seg](const SegmentRecord& r) {
            if (r.chunk != kLogRecord && committed.after_frontier(seg, r.header_offset))
                after.emplace_back(r.chunk, r.location);
            return true;
        }));
    }
    if (after.empty()) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    std::uint64_t dead = 0;
    for (const auto& [id, loc] : after) {
        ChunkRecord rec;
        bool found = false;
        HIODSFS_TRY(get_chunk(*t, id, &rec, &found));
        if (!(found && rec.location() == loc)) dead += loc.length;
    }
    if (dead == 0) return Status::ok();
    t->super().counters.dead_bytes += dead;
    return t->commit();
}

// Segment files against what committed metadata says of them, at open.
Status EngineImpl::check_segment_files(const SuperState& committed, const std::string& hint) {
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    std::map<SegmentId, std::uint64_t> on_disk(files.begin(), files.end());
    for (const auto& [seg, size] : files)
        if (size > 0) segments_noted_ = std::max(segments_noted_, seg);
    std::vector<SegmentId> gone, beyond;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        std::set<SegmentId> known;
        Cursor c = t->cursor(Db::kSegments);
        for (bool ok = c.first(); ok; ok = c.next()) {
            std::uint64_t seg_id = 0;
            if (!parse_key_u64(c.key(), &seg_id) || seg_id > std::numeric_limits<SegmentId>::max() ||
                c.value().size() != 8)
                continue;  // fsck's to repair
            const auto seg = static_cast<SegmentId>(seg_id);
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
        for (const auto& [seg, size] : on_disk)
            if (known.count(seg) == 0 && committed.written_after(seg)) beyond.push_back(seg);
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
            stop_with_segments();        // a write refused since: stop now, not at the next commit
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
        committer_cv_.wait_for(l, interval, [this] { return stop_ || group_full_; });
        if (stop_) break;
        group_full_ = false;
        l.unlock();
        if (meta_->pending_ops() > 0) {
            // Counted by the group it commits: one an fsync committed
            // first, whose request woke this loop, is not counted again.
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
        l.lock();
    }
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
    j["read_replans"] = read_replans_.load();
    j["syncs_beside_sweep"] = syncs_beside_sweep_.load();
    j["reads_coalesced"] = reads_coalesced_.load();
    j["sweeps_yielded"] = sweeps_yielded_.load();
    j["sweeps_yielded_to_requests"] = sweeps_yielded_to_requests_.load();
    j["overwrites_in_windows"] = overwrites_in_windows_.load();
    j["overwrites_beside_others"] = overwrites_beside_others_.load();
    j["window_retries"] = window_retries_.load();
    j["early_commits"] = early_commits_.load();
    j["resident_trims"] = resident_trims_.load();
    j["held_writes_applied"] = held_applied_.load();
    j["held_write_batches"] = held_batches_.load();
    j["held_writes_lost"] = held_lost_.load();
    if (opts_.request_counts) {
        nlohmann::ordered_json r = nlohmann::ordered_json::object();
        for (const auto& [name, n] : opts_.request_counts()) r[name] = n;
        j["requests"] = std::move(r);
    }
    j["damaged_chunks"] = damaged_chunks_.load();
    {
        // Work set aside (engine/quarantine.h): the reason of the last one
        // this run set aside, else of one kept from an earlier run.
        std::uint64_t dirty = 0, deletes = 0;
        std::string why;
        std::unique_ptr<Txn> t;
        if (meta_->begin_read(&t)) count_set_aside(*t, &dirty, &deletes, &why);
        if (const std::string last = quarantine_.last(); !last.empty()) why = last;
        j["quarantined_dirty_records"] = dirty;
        j["quarantined_deletes"] = deletes;
        j["quarantine_error"] =
            why.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(why);
    }
    {
        // What stopped the store, if anything did: it then refuses every
        // change (and fsync) with EIO until it is mounted again.
        Status failed = meta_->failure();
        if (failed) failed = segs_->failure();  // stopped, and the engine is about to
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
    {
        // Where the segments live, and the local cache in front of a tier.
        // (An unmounted store's backend is what FORMAT says; the tier's
        // figures only while a daemon has it.)
        j["backend"] = backend_;
        SegmentTierStats ts;
        if (segs_->tier_stats(&ts)) {
            nlohmann::ordered_json t;
            t["segments"] = ts.tier_segments;
            t["bytes"] = ts.tier_bytes;
            t["cached_segments"] = ts.cached_segments;
            t["cached_bytes"] = ts.cached_bytes;
            t["cache_limit"] = ts.cache_limit;
            t["cache_hits"] = ts.cache_hits;
            t["cache_misses"] = ts.cache_misses;
            t["fetched_bytes"] = ts.fetched_bytes;
            t["evictions"] = ts.evictions;
            t["uploads"] = ts.uploads;
            t["pending_uploads"] = ts.pending_uploads;
            t["upload_failures"] = ts.upload_failures;
            t["upload_error"] = ts.upload_error.empty() ? nlohmann::ordered_json(nullptr)
                                                        : nlohmann::ordered_json(ts.upload_error);
            j["tier"] = std::move(t);
        }
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
        if (meta_->begin_read(&t)) {
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
    const std::string tmp = opts_.store_dir + "/status.json.tmp";
    // A new file, never one found there (a link someone put in its place).
    if (::unlinkat(store_->fd(), "status.json.tmp", 0) != 0 && errno != ENOENT)
        return Status::from_errno(errno, "unlink " + tmp);
    UniqueFd fd(::openat(store_->fd(), "status.json.tmp",
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return Status::from_errno(errno, "write " + tmp);
    ssize_t n = ::write(fd.get(), text.data(), text.size());
    fd.reset();
    if (n != static_cast<ssize_t>(text.size())) return Status::error(EIO, "short write of " + tmp);
    if (::renameat(store_->fd(), "status.json.tmp", store_->fd(), "status.json") != 0)
        return Status::from_errno(errno, "rename " + tmp);
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Space

Status EngineImpl::statfs(FsStats* out) {
    struct statvfs v {};
    HIODSFS_TRY(store_->statvfs(&v));
    // Figures of the backing file system, in its own block size: what df
    // shows is what the store can really still take.
    out->block_size = v.f_frsize;
    out->blocks = v.f_blocks;
    // What file data can still take: the reserve is kept back from it.
    const std::uint64_t reserve_blocks = v.f_frsize ? space_.reserve() / v.f_frsize : 0;
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
    if (!store_->statvfs(&v)) return UINT64_MAX;
    const std::uint64_t avail = std::uint64_t{v.f_bavail} * v.f_frsize;
    return avail > space_.reserve() ? avail - space_.reserve() : 0;
}

Status EngineImpl::counters(SpaceCounters* out) {
    // The in-memory state: readable even after a failed commit stopped the
    // store (when applying held writes fails too).
    (void)meta_->apply_held_back();
    *out = meta_->super_snapshot().counters;
    out->disk_bytes = segs_->disk_bytes();
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Opening

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
