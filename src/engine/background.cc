// What the background pass and the reclaimer do to the store: the dirty
// queue and re-chunking (DedupTarget, driven by dedup/background_pass.h),
// and space reclaim (ReclaimTarget: purging deleted files, compaction).
#include "engine/engine_impl.h"

namespace hiodsfs {

// ---------------------------------------------------------------------------
// Background pass (DedupTarget)

Status EngineImpl::take_dirty(std::size_t max, std::vector<DirtyRecord>* out) {
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        Cursor c = t->cursor(Db::kDirty);
        // From the floor: the records below it are finished, and their
        // deletions wait in the commit overlay, where stepping over each
        // one costs a key comparison per take.
        const std::uint64_t floor = dirty_floor_.load();
        for (bool ok = floor > 0 ? c.seek(key_u64(floor)) : c.first();
             ok && out->size() < max && !past_dirty_queue(c.key()); ok = c.next()) {
            DirtyRecord r;
            DirtyRange range;
            if (!parse_key_u64(c.key(), &r.seq) || !decode_dirty(c.value(), &range))
                return Status::error(EUCLEAN, "dirty-queue record is damaged");
            r.ino = range.ino;
            r.offset = range.offset;
            r.length = range.length;
            out->push_back(r);
        }
        HIODSFS_TRY(c.status());
    }
    // Records get rising numbers, so none will appear below the oldest
    // left (a set-aside record requeued at open keeps its number: that
    // happens before the pass starts, and lowers the floor).
    if (!out->empty()) dirty_floor_.store(out->front().seq);
    // Taken: writes over these ranges from now on queue records of their own.
    std::lock_guard<std::mutex> l(pending_dirty_.mu);
    pending_dirty_.taken(*out);
    // A record still queued covers it (a write's run inside a sweep's
    // remainder, a block written again after its record was put back):
    // that record's sweep re-chunks these bytes, whatever they are then.
    for (DirtyRecord& r : *out)
        if (pending_dirty_.covers(r.ino, r.offset, r.length)) {
            r.covered = true;
            dirty_records_covered_.fetch_add(1, std::memory_order_relaxed);
        }
    return Status::ok();
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

Status EngineImpl::set_aside(const std::vector<DirtyRecord>& records, const Status& why) {
    if (records.empty() || !may_set_aside(why)) return why;
    const std::string reason = Quarantine::reason(why);
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    auto& c = t->super().counters;
    for (const auto& r : records) {
        bool existed = false;
        HIODSFS_TRY(t->del(Db::kDirty, key_u64(r.seq), &existed));
        if (!existed) continue;
        // Out of the backlog: the pass will not take it in this run.
        c.backlog_records -= 1;
        c.backlog_bytes -= r.length;
        HIODSFS_TRY(t->put(Db::kDirty, set_aside_key(r.seq),
                           encode_set_aside({r.ino, r.offset, r.length}, reason)));
    }
    HIODSFS_TRY(t->commit());
    quarantine_.note(Quarantine::Work::kDedup, records.front().ino, reason);
    return Status::ok();
}

bool EngineImpl::may_set_aside(const Status& why) {
    return Quarantine::set_aside(why) && meta_->failure().is_ok() && segs_->failure().is_ok();
}

Status EngineImpl::requeue_set_aside() {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    std::vector<std::pair<std::string, std::string>> aside;  // key, value
    {
        Cursor c = t->cursor(Db::kDirty);
        for (bool ok = c.seek(std::string(1, kSetAsideMark)); ok && c.key()[0] == kSetAsideMark;
             ok = c.next())
            aside.emplace_back(c.key(), c.value());
        HIODSFS_TRY(c.status());
    }
    std::uint64_t requeued = 0;
    auto& counters = t->super().counters;
    for (const auto& [key, value] : aside) {
        std::uint64_t seq = 0;
        DirtyRange r;
        std::string_view why;
        if (!parse_set_aside_key(key, &seq) || !decode_set_aside(value, &r, &why))
            continue;  // fsck's
        HIODSFS_TRY(t->put(Db::kDirty, key_u64(seq), encode_dirty(r)));
        HIODSFS_TRY(t->del(Db::kDirty, key));
        counters.backlog_records += 1;
        counters.backlog_bytes += r.length;
        dirty_floor_.store(0);
        ++requeued;
    }
    HIODSFS_TRY(t->commit());
    if (requeued > 0 && opts_.log)
        opts_.log("hiodsfs: " + std::to_string(requeued) +
                  " dirty-queue records the background pass set aside before are tried again");
    return Status::ok();
}

void EngineImpl::count_set_aside(Txn& t, std::uint64_t* dirty, std::uint64_t* deletes,
                                 std::string* why) {
    *dirty = *deletes = 0;
    Cursor d = t.cursor(Db::kDirty);
    for (bool ok = d.seek(std::string(1, kSetAsideMark)); ok && d.key()[0] == kSetAsideMark;
         ok = d.next()) {
        DirtyRange r;
        std::string_view reason;
        if (!decode_set_aside(d.value(), &r, &reason)) continue;
        ++*dirty;
        *why = Quarantine::describe(Quarantine::Work::kDedup, r.ino, reason);
    }
    Cursor o = t.cursor(Db::kOrphans);
    for (bool ok = o.first(); ok; ok = o.next()) {
        InodeId ino = 0;
        if (o.value().empty() || !parse_key_u64(o.key(), &ino)) continue;
        ++*deletes;
        *why = Quarantine::describe(Quarantine::Work::kDelete, ino, o.value());
    }
}

Status EngineImpl::rechunk(InodeId ino, std::uint64_t offset, std::uint64_t length) {
    // What the pass stores, it stores with the background compression.
    const BackgroundScope background;
    std::shared_ptr<Stream> s = streams_.get(ino);
    Status st;
    bool gone = false;
    s->pass_at_lock.store(true, std::memory_order_relaxed);
    {
        std::unique_lock<std::mutex> l(s->mu);
        // A write waiting for the file goes first. The lock is not fair:
        // taking it back at once, record after record of a batch, the pass
        // kept a steady random writer out for a whole batch (writes of
        // 100 ms and more). Bounded, so a file written without a pause
        // still gets its records done.
        s->moved.wait_for(l, kYieldToWriters, [&] { return s->writers.load(std::memory_order_relaxed) == 0; });
        whole(*s, l);
        st = rechunk_locked(ino, *s, offset, length, &gone);
    }
    s->pass_at_lock.store(false, std::memory_order_relaxed);
    s.reset();
    streams_.drop(ino, gone);  // a file nothing pins keeps no stream after its pass
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
        HIODSFS_TRY(meta_->begin_read(&t));
        std::vector<MappedExtent> ex;
        HIODSFS_TRY(extents_in(*t, ino, offset, end, &ex));
        bool any_raw = false;
        for (const auto& m : ex) {
            bool found = false;
            ChunkRecord rec;
            HIODSFS_TRY(get_chunk(*t, m.e.chunk, &rec, &found));
            if (found && !(rec.flags & ChunkRecord::kIndexed)) {
                any_raw = true;
                break;
            }
        }
        if (!any_raw) return Status::ok();
        // The sweep starts at the cut before the range. Behind raw bytes (a
        // file written whole in deferred mode, not yet swept) that may be
        // hundreds of MiB back, all to be read before the range, with the
        // file's lock held: the record waits at the back of the queue
        // instead, for the records of those bytes to sweep them first.
        // Not when the file's work was set aside this run: its raw bytes
        // are out of the queue until the next mount, and the record would
        // come back behind them on every batch.
        if (chunking_.kind != ChunkingParams::Kind::kFixed && !quarantine_.noted(Quarantine::Work::kDedup, ino)) {
            std::uint64_t cut = offset;
            bool beyond = false;
            HIODSFS_TRY(cut_before(*t, ino, in, offset, kSweepReach, &cut, &beyond));
            if (beyond) {
                t.reset();
                sweeps_deferred_.fetch_add(1, std::memory_order_relaxed);
                return requeue_range(ino, offset, end);
            }
        }
    }
    HIODSFS_TRY(close_stream(ino, *s, true));
    // From here until the lock goes, every byte of the file is in its extents.
    s->sweep_seq.fetch_add(1, std::memory_order_release);
    struct Swept {
        Stream& s;
        ~Swept() { s.sweep_seq.fetch_add(1, std::memory_order_release); }
    } swept{*s};
    // The inline path over the current bytes of the range: start at the cut
    // point before it, and realign with the chunks after it. Unlike a write
    // it never gives up early: a cut left where the stream stopped would be
    // no content-defined one, and nothing would come back to fix it.
    // The throttle paused the pass (reads or writes need the machine), or a
    // write or another operation on this file waits for the lock (a lone
    // append, truncate or lseek would otherwise wait out the whole re-cut,
    // seconds for a large file): the sweep stops at a piece, after at least
    // one so that every sweep gets somewhere, and leaves the rest for a
    // later one.
    auto must_yield = [&] {
        if (background_speed() <= 0) return true;
        if (s->writers.load(std::memory_order_relaxed) == 0 && s->waiters.load(std::memory_order_relaxed) == 0)
            return false;
        sweeps_yielded_to_requests_.fetch_add(1, std::memory_order_relaxed);
        return true;
    };
    Status result = start_stream(ino, *s, offset, kUnbounded);
    std::vector<std::uint8_t> buf;
    for (std::uint64_t pos = offset; result && pos < end;) {
        if (pos > offset && must_yield()) return requeue_sweep(ino, *s, offset, end);
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(end - pos, kSweepStep));
        // The chunked copy is written before the raw bytes die: on a full
        // disk the sweep stops here (the record stays queued, the raw bytes
        // readable) instead of taking the room compaction and commits need.
        std::optional<Admission> admission;
        result = space_.admit(n, &admission, true);
        if (!result) break;
        buf.resize(n);
        std::size_t got = 0;
        result = read_locked(ino, nullptr, pos, n, buf.data(), &got, false, MetaStore::ReadFrom::kGroup);
        if (result) result = feed(ino, *s, buf.data(), n);
        pos += n;
    }
    // After the range the re-cut goes on until a cut meets an old chunk
    // boundary. Through bytes still raw (a file written whole in deferred
    // mode) that is a sweep of its own, hundreds of MiB, and it yields as
    // the one above does, in steps: those bytes are other records' to
    // sweep, so what it queues again is only what is left of its range.
    for (std::uint64_t step = kSweepStep; result;) {
        const std::uint64_t at = s->end();
        bool left = false;
        result = realign(ino, *s, end, kUnbounded, nullptr, nullptr, nullptr, at + step, &left);
        if (!result || !left) break;
        if (s->end() == at) {  // one piece longer than the step
            step *= 2;
            continue;
        }
        if (must_yield()) return requeue_sweep(ino, *s, offset, end);
    }
    Status closed = close_stream(ino, *s, true);
    s->clear();
    return result ? closed : result;
}

Status EngineImpl::requeue_sweep(InodeId ino, Stream& s, std::uint64_t offset, std::uint64_t end) {
    // The stream's tail [s.off, ...) was read from the file and is mapped as
    // it was; s.off is a cut the chunker made, so a sweep from there (which
    // starts at the cut before it) cuts the rest as this one would have.
    // Raw bytes outside [offset, end) are other records' (every raw byte
    // is in a queued record's range, or in one a sweep holds, or its
    // file's work was set aside: rechunk_locked sweeps those from the far cut).
    const std::uint64_t from = std::max(s.off, offset);
    s.clear();
    sweeps_yielded_.fetch_add(1, std::memory_order_relaxed);
    return requeue_range(ino, from, end);
}

Status EngineImpl::requeue_range(InodeId ino, std::uint64_t from, std::uint64_t end) {
    if (from >= end) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    PendingDirty::Range r{ino, from, end - from, 0};
    HIODSFS_TRY(queue_dirty(*t, ino, from, end - from, &r.seq));
    // Pending like a write's record (pending_dirty.h: locked from before the
    // commit, after the transaction began, as write-behind does), so the
    // writes that go on over these bytes queue no records of their own.
    std::lock_guard<std::mutex> l(pending_dirty_.mu);
    HIODSFS_TRY(t->commit());
    pending_dirty_.add({r});
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
    // Forced by dead space (dead_space_over_bound) it runs flat out, but
    // with the usual threshold and no recompression: the foreground is busy.
    const bool full_speed = !reclaimer_ || controller_->background_speed() >= 1.0;
    return compactor_->step(full_speed, did_work);
}

Status EngineImpl::free_inode(Txn& t, InodeId ino) {
    write_errors_.forget(ino);  // no file is left to be told of writes it lost
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
    InodeId ino = 0;
    const Status st = purge_next(&ino);
    *did_work = ino != 0;
    // One file that cannot be freed (a missing chunk record) must not stop
    // every delete and compaction after it.
    return st || ino == 0 ? st : set_aside_orphan(ino, st);
}

Status EngineImpl::set_aside_orphan(InodeId ino, const Status& why) {
    if (!may_set_aside(why)) return why;
    const std::string reason = Quarantine::reason(why);
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(t->put(Db::kOrphans, key_u64(ino), reason));
    HIODSFS_TRY(t->commit());
    quarantine_.note(Quarantine::Work::kDelete, ino, reason);
    return Status::ok();
}

Status EngineImpl::purge_next(InodeId* chosen) {
    *chosen = 0;
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    InodeId ino = 0;
    {
        // Orphans still pinned (open, or known to the kernel) wait for
        // unpin; those set aside (a reason as value) for the next open; a
        // damaged key is fsck's.
        Cursor c = t->cursor(Db::kOrphans);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeId cand = 0;
            if (c.value().empty() && parse_key_u64(c.key(), &cand) && !pinned(cand)) {
                ino = cand;
                break;
            }
        }
        HIODSFS_TRY(c.status());
    }
    if (ino == 0) return Status::ok();
    *chosen = ino;
    Inode in;
    Status st = load_inode(*t, ino, &in);
    if (st && S_ISREG(in.r.mode)) {
        // Unmap the first extents of the file; the last step purges the inode.
        std::vector<MappedExtent> ex;
        HIODSFS_TRY(first_extents(*t, ino, kPurgeExtentsPerStep, &ex));
        const std::size_t n = ex.size();
        const std::uint64_t first = n ? ex.front().start : 0, end = n ? ex.back().end() : 0;
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
    bool found = false;
    ChunkRecord rec;
    if (!get_chunk(*t, id, &rec, &found) || !found) return;
    if (rec.flags & ChunkRecord::kDamaged) return;
    // Out of the index: the next write of this content stores a fresh copy
    // and takes the fingerprint over, instead of sharing bad bytes.
    if (flag_damaged(*t, id, &rec) && t->commit()) damaged_chunks_.fetch_add(1);
}

Status EngineImpl::read_chunk(ChunkId id, ChunkLocation loc, std::uint32_t length, std::uint8_t* out,
                              bool* damaged, bool* freed) {
    if (freed != nullptr) *freed = false;
    if (loc.segment == kLostSegment) {
        if (damaged != nullptr) *damaged = true;
        return Status::error(
            EIO, "chunk " + std::to_string(id) +
                     "'s bytes were lost with their segment "
                     "(hiodsfs-fsck --repair found it missing or cut short): write the file again");
    }
    Status st = read_chunk_content(*segs_, &dicts_, cipher_.get(), id, loc, length, out, damaged);
    // A failed read of a chunk that compaction moved (and whose old segment
    // it deleted) after our lookup: read the new place. A location that did
    // not change means the error is real.
    for (int attempt = 0; !st && attempt < 3; ++attempt) {
        ChunkRecord rec;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin_read(&t));
            bool found = false;
            HIODSFS_TRY(get_chunk(*t, id, &rec, &found));
            if (!found) {
                if (freed != nullptr) *freed = true;
                return st;
            }
        }
        if (rec.location() == loc) return st;
        loc = rec.location();
        st = read_chunk_content(*segs_, &dicts_, cipher_.get(), id, loc, length, out, damaged);
    }
    return st;
}

}  // namespace hiodsfs
