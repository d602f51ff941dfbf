// Write-behind of deferred writes (engine/write_behind.h).
#include "engine/write_behind.h"

#include <algorithm>
#include <utility>

#include "chunk/fingerprint.h"
#include "engine/compaction.h"
#include "engine/inode_ops.h"
#include "meta/chunk_table.h"
#include "meta/records.h"

namespace hiodsfs {

namespace {

// A writer that finds this many writes held applies them (the others go
// on appending meanwhile); at kHeldMost every writer waits for the
// metadata lock, so what is held stays bounded when applying falls behind.
constexpr std::size_t kHeldBatch = 256;
constexpr std::size_t kHeldMost = 16 * kHeldBatch;
// Chunk ids reserved per MetaStore::take_chunk_ids (one lock per this many).
constexpr std::uint64_t kRawIdBlock = 1024;

}  // namespace

Status WriteBehind::next_raw_chunk_id(ChunkId* out) {
    std::lock_guard<std::mutex> g(raw_ids_mu_);
    if (raw_ids_next_ == raw_ids_end_) {
        ChunkId first = 0;
        HIODSFS_TRY(p_.meta->take_chunk_ids(kRawIdBlock, &first));
        raw_ids_next_ = first;
        raw_ids_end_ = first + kRawIdBlock;
    }
    *out = raw_ids_next_++;
    return Status::ok();
}

Status WriteBehind::hold(InodeId ino, std::uint64_t off, const std::uint8_t* data, std::size_t len,
                         std::size_t piece, const struct timespec* touched) {
    const std::size_t pieces = (len + piece - 1) / piece;
    // Ids first: reserving them may take the metadata lock, which an
    // apply holds while it waits for held_mu_.
    ChunkId one_id = 0;
    std::vector<ChunkId> more_ids;
    ChunkId* ids = &one_id;
    if (pieces > 1) {
        more_ids.resize(pieces);
        ids = more_ids.data();
    }
    for (std::size_t i = 0; i < pieces; ++i) HIODSFS_TRY(next_raw_chunk_id(&ids[i]));
    // An encrypted store's pieces are sealed as their chunks, before the
    // lock the appends take.
    // Their checksums too: nothing but the appends runs under that lock.
    std::vector<std::vector<std::uint8_t>> sealed(p_.cipher != nullptr ? pieces : 0);
    std::vector<std::uint32_t> sealed_crc(sealed.size());
    for (std::size_t i = 0; i < sealed.size(); ++i) {
        const std::size_t at = i * piece;
        HIODSFS_TRY(seal_chunk_payload(*p_.cipher, ids[i], reinterpret_cast<const char*>(data + at),
                                       static_cast<std::uint32_t>(std::min(piece, len - at)), false, &sealed[i]));
        sealed_crc[i] = crc32c(sealed[i].data(), sealed[i].size());
    }
    const struct timespec time = touched != nullptr ? *touched : timespec{};
    // Under way from before the first append until held_count_ says what
    // it held (or it failed): see holding().
    holds_under_way_.fetch_add(1);
    struct UnderWay {
        std::atomic<std::size_t>& n;
        ~UnderWay() { n.fetch_sub(1); }
    } under_way{holds_under_way_};
    {
        // Appends and holds under one lock, so an apply that empties held_
        // has every write appended before it, and a commit's frontier
        // (drained_at_) lies after every byte the group refers to.
        std::lock_guard<std::mutex> g(held_mu_);
        const std::size_t before = held_.size();
        std::uint64_t appended = 0;  // stored bytes: sealed pieces are longer than they are
        for (std::size_t i = 0, done = 0; i < pieces; ++i, done += piece) {
            const auto n = static_cast<std::uint32_t>(std::min(piece, len - done));
            ChunkLocation loc;
            Status st = p_.cipher == nullptr
                            ? p_.segs->append(ids[i], data + done, n, &loc)
                            : p_.segs->append(ids[i], sealed[i].data(), static_cast<std::uint32_t>(sealed[i].size()),
                                              sealed_crc[i], true, &loc);
            if (!st) {
                // Nothing of the request is held; bytes it appended are
                // dead, as a failed operation's are.
                held_.resize(before);
                held_dead_ += appended;
                return st;
            }
            appended += loc.length;
            held_.push_back(HeldWrite{ino, off + done, ids[i], loc, n, off + len, touched != nullptr, time});
        }
        held_count_.store(held_.size(), std::memory_order_release);
    }
    if (p_.wake_pass) p_.wake_pass();
    return Status::ok();
}

Status WriteBehind::apply_if_full() {
    const std::size_t held = held_count_.load(std::memory_order_relaxed);
    if (held >= kHeldMost) return p_.meta->apply_held_back();
    if (held >= kHeldBatch && !held_applying_.exchange(true)) {
        Status st = p_.meta->apply_held_back();
        held_applying_.store(false);
        return st;
    }
    return Status::ok();
}

void WriteBehind::apply(MetaStore& store, bool for_commit) {
    std::vector<HeldWrite> batch;
    std::uint64_t dead = 0;
    {
        std::lock_guard<std::mutex> g(held_mu_);
        batch.swap(held_spare_);
        batch.swap(held_);
        dead = std::exchange(held_dead_, 0);
        // Still "holding" until the batch is applied: a read that finds
        // neither count set sees every write in the metadata.
        held_in_apply_.store(batch.size(), std::memory_order_release);
        held_count_.store(0, std::memory_order_release);
        // The caller holds the metadata lock, so every other append the
        // group refers to was made before this point too.
        if (for_commit) drained_at_ = p_.segs->append_position();
    }
    if (!batch.empty()) {
        // One file's writes stay in their order; files need none between them.
        std::stable_sort(batch.begin(), batch.end(),
                         [](const HeldWrite& a, const HeldWrite& b) { return a.ino < b.ino; });
        batches_.fetch_add(1, std::memory_order_relaxed);
        if (!apply_held(store, batch.data(), batch.size())) {
            // One file's failure must not take the others' writes with it.
            for (std::size_t i = 0, j = 0; i < batch.size(); i = j) {
                while (j < batch.size() && batch[j].ino == batch[i].ino) ++j;
                Status st = apply_held(store, &batch[i], j - i);
                if (st) continue;
                lost_.fetch_add(j - i, std::memory_order_relaxed);
                for (std::size_t k = i; k < j; ++k) dead += batch[k].loc.length;
                if (p_.log)
                    p_.log("hiodsfs: " + std::to_string(j - i) + " acknowledged writes to inode " +
                              std::to_string(batch[i].ino) + " are lost: " + st.message());
                p_.errors->record(batch[i].ino, st);
                if (p_.attrs_changed) p_.attrs_changed(batch[i].ino);
            }
        }
        applied_.fetch_add(batch.size(), std::memory_order_relaxed);
    }
    // In this group, before its frontier passes the bytes; if even this
    // fails the store has stopped, and the next open counts them.
    if (dead > 0) {
        std::unique_ptr<Txn> t;
        Status st = store.begin_held(&t);
        if (st) {
            t->super().counters.dead_bytes += dead;
            st = t->commit();
        }
        if (!st) {
            std::lock_guard<std::mutex> g(held_mu_);
            held_dead_ += dead;
        }
    }
    held_in_apply_.store(0, std::memory_order_release);
    batch.clear();
    std::lock_guard<std::mutex> g(held_mu_);
    if (held_spare_.capacity() < batch.capacity()) held_spare_.swap(batch);
}

Status WriteBehind::apply_held(MetaStore& store, const HeldWrite* w, std::size_t n) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(store.begin_held(&t));
    auto& sup = t->super();
    // Each file's writes w[first, end), with its inode, read once.
    struct FileWrites {
        std::size_t first, end;
        Inode in;
    };
    std::vector<FileWrites> files;
    for (std::size_t i = 0, j = 0; i < n; i = j) {
        const InodeId ino = w[i].ino;
        while (j < n && w[j].ino == ino) ++j;
        if (p_.held_write_fault)
            if (int e = p_.held_write_fault(ino); e != 0)
                return Status::error(e, "metadata write (injected)");
        FileWrites f{i, j, {}};
        Status found = load_inode(*t, ino, &f.in);
        // A file freed with bytes still in its stream (close_stream): they
        // belong to no file any more, and get no chunk records either.
        if (found.err() == ENOENT) {
            for (std::size_t k = i; k < j; ++k) sup.counters.dead_bytes += w[k].loc.length;
            continue;
        }
        HIODSFS_TRY(found);
        files.push_back(std::move(f));
    }
    // Every chunk and its segment's live bytes first: a later write of the
    // batch may overwrite an earlier one, freeing its chunk, and a
    // segment's count never goes below zero.
    SegmentGains gains;
    for (const FileWrites& f : files) {
        for (std::size_t k = f.first; k < f.end; ++k) {
            const HeldWrite& h = w[k];
            ChunkRecord rec;
            rec.length = h.length;  // stored as it came (sealed, in an encrypted store)
            rec.sealed = p_.cipher != nullptr;
            rec.set_location(h.loc);
            rec.set_refs(1);
            rec.flags = 0;  // not fingerprinted: never shared until the pass replaces it
            HIODSFS_TRY(put_chunk(*t, h.chunk, rec));
            if (gains.empty() || gains.back().first != h.loc.segment) gains.emplace_back(h.loc.segment, 0);
            gains.back().second += h.loc.length;
            sup.counters.stored_bytes += h.loc.length;
            sup.counters.content_bytes += h.length;
            sup.counters.raw_bytes += h.loc.length;
            sup.counters.chunk_count += 1;
        }
    }
    for (const auto& [seg, bytes] : gains)
        HIODSFS_TRY(add_segment_live(*t, seg, static_cast<std::int64_t>(bytes)));
    // Until the operation has committed: a record relied on here is not
    // taken by the pass before these writes are in the group (pending_dirty.h).
    std::lock_guard<std::mutex> pending_lock(p_.pending->mu);
    std::vector<PendingDirty::Range> queued;
    PendingDirty this_batch;  // the same records, looked up (no lock: this thread's)
    std::uint64_t covered = 0;
    for (FileWrites& f : files) {
        const InodeId ino = w[f.first].ino;
        Inode& in = f.in;
        // The pass gets one range per run of writes that follow each other,
        // leaving out the writes a record it has yet to take covers (one of
        // this batch as well as one of an earlier): a run across two blocks
        // that have records of their own is not queued again as a third.
        auto queue_run = [&](std::uint64_t off, std::uint64_t len) -> Status {
            if (len == 0) return Status::ok();
            PendingDirty::Range r{ino, off, len, 0};
            HIODSFS_TRY(queue_dirty(*t, ino, off, len, &r.seq));
            queued.push_back(r);
            this_batch.add({r});
            return Status::ok();
        };
        std::uint64_t run_off = w[f.first].off, run_end = w[f.first].off;
        for (std::size_t k = f.first; k < f.end; ++k) {
            const HeldWrite& h = w[k];
            ExtentRecord e{h.chunk, 0, h.length};
            HIODSFS_TRY(replace_range(*t, ino, in, h.off, h.length, &e));
            if (h.off != run_end) {  // the run so far first: it may cover this write
                HIODSFS_TRY(queue_run(run_off, run_end - run_off));
                run_off = run_end = h.off;
            }
            if (this_batch.covers(ino, h.off, h.length) || p_.pending->covers(ino, h.off, h.length)) {
                ++covered;
                HIODSFS_TRY(queue_run(run_off, run_end - run_off));
                run_off = h.off + h.length;
            }
            run_end = h.off + h.length;
            if (h.end > in.r.size) in.r.size = h.end;
            if (h.touch) {
                set_time(&in.r.mtime_s, &in.r.mtime_ns, h.time);
                set_time(&in.r.ctime_s, &in.r.ctime_ns, h.time);
            }
        }
        HIODSFS_TRY(queue_run(run_off, run_end - run_off));
        HIODSFS_TRY(store_inode(*t, ino, in));
    }
    HIODSFS_TRY(t->commit());
    p_.pending->add(queued);
    covered_.fetch_add(covered, std::memory_order_relaxed);
    return Status::ok();
}

}  // namespace hiodsfs
