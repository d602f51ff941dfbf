// The engine's life: opening a store and closing it, and the control loop.
// The rest of EngineImpl is in the files engine_impl.h lists.
#include "engine/engine_impl.h"
#include "engine/key_slot.h"

#include "common/units.h"
#include "meta/dictionaries.h"
#include "meta/segment_entry.h"

namespace hiodsfs {

// ---------------------------------------------------------------------------
// Opening and closing

Status EngineImpl::init(const EngineOptions& options, const EngineHooks& hooks) {
    opts_ = options;
    hooks_ = hooks;
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
    SegmentTier* tier = options.read_only ? nullptr : options.segments.tier;
    // An encrypted store's pool holds sealed metadata: its tier seals and
    // opens from here on (the key checked against the pool's FORMAT).
    HIODSFS_TRY(seal_tier(&tier));
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
            // A key slot is written before the metadata (new_encrypted_store):
            // alone, it is an unfinished first open's, made again.
            if (n != "." && n != ".." && n != "lock" && n != kKeySlotName && n != std::string(kKeySlotName) + ".tmp")
                return Status::error(EEXIST, "store " + dir +
                                                 " is not empty and is not a hiodsfs store");
        if (options.read_only) return Status::error(ENOENT, "store " + dir + " is not a hiodsfs store");
        HIODSFS_TRY(options.chunking.validate());
        chunking_ = options.chunking;
    }
    HIODSFS_TRY(open_encryption(dir, exists ? &format : nullptr));
    HIODSFS_TRY(seal_tier(&tier));  // a new encrypted store's

    if (backend_.empty()) backend_ = options.segments.tier != nullptr ? tier_name() : "local";
    // The metadata first: it says which segment bytes are committed, and a
    // store whose metadata is gone or damaged is refused before anything
    // of it is touched (a fresh environment would disown every segment).
    MetaStoreOptions meta_options;
    meta_options.map_bytes = options.lmdb_map_bytes;
    meta_options.read_only = options.read_only;
    meta_options.create = fresh;
    meta_options.commit_fault = hooks.commit_fault;
    meta_options.on_publish = hooks.on_publish;
    meta_options.group_writes = options.background_commit ? options.commit_writes : 0;
    meta_options.group_dirty_bytes = options.background_commit ? options.meta_dirty_bytes : 0;
    meta_options.resident_bytes = options.meta_resident_bytes;
    // Under the metadata lock; the committer never waits for it while
    // holding its own (IntervalThread).
    meta_options.on_group_full = [this] { committer_.wake(); };
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
    }
    const SuperState committed = meta_->super_snapshot();
    SegmentStoreOptions seg_options = opts_.segments;  // the sealed tier, for an encrypted store
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
            SegmentEntry e;
            return found && (!decode_segment_entry(v, &e) || e.live > 0);
        };
    }
    opened = SegmentStore::open(env_, dir + "/segments", seg_options, &segs_);
    if (opened.err() == EUCLEAN)
        return Status::error(EUCLEAN, "store " + dir + " cannot be opened read-write: " + opened.message() +
                                          fsck_hint + " (mount with -o ro to copy out the rest)");
    HIODSFS_TRY(opened);
    // Always: a commit's frontier comes from apply() (commit_now).
    WriteBehindParts held;
    held.meta = meta_.get();
    held.segs = segs_.get();
    held.pending = &pending_dirty_;
    held.errors = &write_errors_;
    held.log = opts_.log;
    held.attrs_changed = opts_.attrs_changed;
    held.held_write_fault = hooks_.held_write_fault;
    held.cipher = cipher_.get();
    held.wake_pass = [this] {
        if (pass_) pass_->wake();
    };
    write_behind_ = std::make_unique<WriteBehind>(std::move(held));
    meta_->set_held_back(write_behind_.get());
    CommitterParts commits;
    commits.meta = meta_.get();
    commits.segs = segs_.get();
    commits.write_behind = write_behind_.get();
    commits.journal = journal_.get();
    commits.tier = opts_.segments.tier;
    commits.env = env_;
    commits.snapshot_tmp = lib_dir_ + "/snapshot.tmp";
    commits.store = store_.get();
    commits.read_only = options.read_only;
    commits.log = opts_.log;
    commits.stop_with_segments = [this] { return stop_with_segments(); };
    commit_ = std::make_unique<Committer>(std::move(commits));
    if (tier == nullptr && !options.read_only && options.fsync_log) meta_->set_logging(true);
    if (!fresh && options.segments.tier == nullptr) HIODSFS_TRY(replay_log(dir));
    // With the frontier committed before the replay: a segment after it
    // that the replayed records do not refer to either (one holding only
    // log records, or writes no fsync covered) is a crash's leftover.
    if (!fresh) HIODSFS_TRY(check_segment_files(committed, fsck_hint));
    // After the replay: its records carry the frontier of their own state.
    if (!fresh && !options.read_only) HIODSFS_TRY(count_crash_leftovers(meta_->super_snapshot()));
    // Before anything reads a chunk: the metadata as the replay left it.
    HIODSFS_TRY(open_dictionaries());

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
        HIODSFS_TRY(write_format_copy(*t, current_format()));
        t->super() = SuperState{};
        t->super().counters.inode_count = 1;
        HIODSFS_TRY(t->commit());
        t.reset();
        // The tier's copy of FORMAT first: a host recovering the store
        // from the tier needs its chunking.
        if (tier != nullptr)
            HIODSFS_TRY(put_format(tier, store_format_text(current_format())));
        HIODSFS_TRY(commit_now());
        // FORMAT last: a store without it is unfinished and may be made again.
        HIODSFS_TRY(write_store_format(env_, dir, current_format()));
    } else if (format.tier.empty() && options.segments.tier != nullptr && !options.read_only) {
        // A store that kept every segment here now has a tier: its sealed
        // segments are on their way there, and it must not be opened
        // without the tier again.
        HIODSFS_TRY(write_store_format(env_, dir, current_format()));
    }
    if (tier != nullptr && !fresh) {
        // A store made before its metadata was journaled: a first snapshot
        // (and FORMAT) in the tier, which the journal continues.
        std::uint64_t seq = 0;
        bool have_snapshot = false;
        HIODSFS_TRY(snapshot_seq(tier, &seq, &have_snapshot));
        if (!have_snapshot && meta_->committed_journal_seq() == 0) {
            HIODSFS_TRY(put_format(tier, store_format_text(current_format())));
            HIODSFS_TRY(commit_->snapshot_to_tier(false));
        }
    }
    // A format-4 store becomes 5 at its first read-write open, before it
    // can hold an encoded chunk that an older hiodsfs would misread:
    // FORMAT (and the tier's copy) first, then the metadata's copy below.
    if (!fresh && !options.read_only && format.version < kFormatVersion) {
        StoreFormat marked = current_format();
        if (tier != nullptr) HIODSFS_TRY(put_format(tier, store_format_text(marked)));
        marked.log_open = format_log_open_;
        HIODSFS_TRY(write_store_format(env_, dir, marked));
        if (opts_.log)
            opts_.log("hiodsfs: " + dir + " is now format " + std::to_string(kFormatVersion) + " (from " +
                      std::to_string(format.version) + "): its new chunks may be compressed, and hiodsfs "
                      "older than 0.6.0 refuses it");
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
    if (compactor_) {
        compactor_->set_room_for(
            [this](std::uint64_t bytes) { return space_.check(bytes, compaction_floor_).is_ok(); });
        compactor_->set_recompression(options.compression_background, &dicts_, cipher_.get());
    }
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
    if (options.background_nice < 0 || options.background_nice > 19)
        return Status::error(EINVAL, "background_nice must be between 0 and 19, not " +
                                         std::to_string(options.background_nice));
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
    ControlConfig control = options.control;
    if (options.policy == "hiods") control.spare_capacity = false;
    controller_ = std::make_unique<ModeController>(clock, control, setting, std::move(policy));
    deferred_.store(controller_->mode() == WriteMode::kDeferred);
    if (options.read_only) return Status::ok();
    if (options.background_commit)
        committer_.start(
            "committer",
            std::chrono::milliseconds(std::max<std::uint32_t>(opts_.commit_interval_ms, 1)),
            [this] { commit_->round(); });
    if (options.background_threads > 0) {
        pass_ = std::make_unique<BackgroundPass>(
            static_cast<DedupTarget*>(this), [this] { return background_speed(); },
            options.background_threads);
        pass_->set_nice([this] { return background_nice(); });
        pass_->start();
    }
    if (options.background_commit)
        control_.start(
            "mode-control",
            std::chrono::milliseconds(std::max<std::uint64_t>(opts_.control.interval_ms, 10)),
            [this, last_processed = std::uint64_t{0}]() mutable {
                control_round(&last_processed);
            });
    if (reclaim_mode_ == ReclaimMode::kBackground) {
        reclaimer_ = std::make_unique<Reclaimer>(static_cast<ReclaimTarget*>(this), [this] {
            return reclaim_forced_.load(std::memory_order_relaxed) ? 1.0 : background_speed();
        });
        SpaceAdmission::Reclaim reclaim;
        reclaim.wake = [this] { reclaimer_->wake(); };
        reclaim.disk_bytes = [this] { return segs_->disk_bytes(); };
        reclaim.files_freed = [this] { return deletes_done_.load(); };
        space_.set_reclaim(std::move(reclaim));
        // Forced reclaim (the disk is full) is a writer's to wait for: at 0.
        reclaimer_->set_nice([this] { return reclaim_forced_.load(std::memory_order_relaxed) ? 0 : background_nice(); });
        reclaimer_->start();
    }
    if (trainer_ && options.dictionary_min_bytes > 0 && options.background_threads > 0 &&
        options.background_commit) {
        trainer_thread_ = std::make_unique<PacedWorker>(
            "dict-train", [this](bool* did_work) { return trainer_->step(did_work); },
            [this] { return background_speed(); }, std::chrono::seconds(1));
        trainer_thread_->set_nice([this] { return background_nice(); });
        trainer_thread_->start();
    }
    return Status::ok();
}

Status EngineImpl::open_dictionaries() {
    StoredDictionaries stored;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        HIODSFS_TRY(load_dictionaries(*t, &dicts_, &stored, DictionarySealing{encryption_.on(), cipher_.get()}));
    }
    // No reason to refuse the store: what was stored with it reads as EIO.
    for (const std::string& line : stored.damaged)
        if (opts_.log)
            opts_.log("hiodsfs: " + line +
                      ": the chunks stored with it cannot be read; hiodsfs-fsck --scrub " +
                      opts_.store_dir + " names their files");
    if (opts_.read_only) return Status::ok();
    DictionaryPolicy policy;
    policy.min_bytes = opts_.dictionary_min_bytes;
    auto read = [this](ChunkId id, const ChunkRecord& rec, std::uint8_t* out, bool* skip) {
        bool damaged = false, freed = false;
        const Status st = read_chunk(id, rec.location(), rec.length, out, &damaged, &freed);
        if (st) return st;
        // Damaged (flagged, as a read would) or freed meanwhile: no sample.
        // Another error may pass: the round stops, and begins again later.
        if (damaged && !freed) mark_damaged(id);
        *skip = damaged || freed;
        return *skip ? Status::ok() : st;
    };
    // An encrypted store's dictionaries, made of its chunks' bytes, are
    // sealed before they go into the metadata, which stays plain.
    trainer_ = std::make_unique<DictionaryTrainer>(*meta_, dicts_, stored, policy, read, opts_.log, cipher_.get());
    return Status::ok();
}

Status EngineImpl::train_dictionary(bool* trained) {
    *trained = false;
    if (!trainer_) return Status::error(EROFS, "store is open read-only");
    return trainer_->train_now(trained);
}

void EngineImpl::stop_committer() {
    committer_.request_stop();
    control_.request_stop();
    committer_.join();
    control_.join();
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
    if (trainer_thread_) trainer_thread_->stop();  // a round under way is dropped
    if (pass_) pass_->stop();  // unfinished records stay queued for the next open
    stop_committer();
    Status result;
    if (meta_ && !meta_->read_only()) {
        const auto all = streams_.all();
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
            Status snap = commit_->snapshot_to_tier(true);
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
    trainer_.reset();
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

void EngineImpl::abandon() {
    if (reclaimer_) reclaimer_->stop();
    if (trainer_thread_) trainer_thread_->stop();
    if (pass_) pass_->stop();
    stop_committer();
    closed_ = true;
    streams_.clear();
    trainer_.reset();
    compactor_.reset();
    meta_.reset();  // aborts the open group
    segs_.reset();
    lock_.reset();
}

// Every control interval: sample the load, let the controller pick the write
// path and the background speed, and publish the status for hiodsfs-stat.
void EngineImpl::control_round(std::uint64_t* last_processed) {
    SpaceCounters c;
    if (counters(&c)) {
        std::uint64_t processed = pass_ ? pass_->processed_bytes() : 0;
        const std::uint64_t limit = backlog_limit(c.backlog_bytes);
        backlog_limit_.store(limit, std::memory_order_relaxed);
        reclaim_forced_.store(dead_space_over_bound(c), std::memory_order_relaxed);
        IntervalSample s =
            controller_->tick(c.backlog_records, c.backlog_bytes, processed - *last_processed, limit);
        *last_processed = processed;
        if (controller_->setting() == ModeController::Setting::kHybrid)
            deferred_.store(controller_->mode() == WriteMode::kDeferred);
        (void)record_history(s, c);  // best effort: history is informational
        stop_with_segments();        // a write refused since: stop now, not at the next commit
        if (opts_.publish_status) (void)publish_status();
    }
}

bool EngineImpl::dead_space_over_bound(const SpaceCounters& c) const {
    const std::uint64_t floor = hooks_.dead_space_floor != 0 ? hooks_.dead_space_floor : kDeadSpaceFloor;
    return c.dead_bytes > floor && c.dead_bytes > kDeadSpacePerLive * c.stored_bytes;
}

std::uint64_t EngineImpl::backlog_limit(std::uint64_t backlog_bytes) const {
    if (opts_.backlog_max_bytes != 0) return opts_.backlog_max_bytes;
    if (opts_.backlog_max_percent == 0) return 0;
    struct statvfs v {};
    if (!store_->statvfs(&v)) return 0;  // unknown: no limit this interval
    const std::uint64_t room = std::uint64_t{v.f_bavail} * v.f_frsize + backlog_bytes;
    return std::max<std::uint64_t>(1, room / 100 * opts_.backlog_max_percent);
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

// ---------------------------------------------------------------------------
// Opening

Status Engine::open(const EngineOptions& options, std::unique_ptr<Engine>* out) {
    return open_engine_with_hooks(options, EngineHooks{}, out);
}

void abandon_engine(Engine& e) { static_cast<EngineImpl&>(e).abandon(); }

Status open_engine_with_hooks(const EngineOptions& options, const EngineHooks& hooks,
                              std::unique_ptr<Engine>* out) {
    auto e = std::make_unique<EngineImpl>();
    Status st = e->init(options, hooks);
    if (!st) {
        e->abandon();
        return st;
    }
    *out = std::move(e);
    return Status::ok();
}

}  // namespace hiodsfs
