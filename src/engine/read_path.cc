// The read path: a read is planned in one metadata operation (the chunk
// pieces that cover it) and its bytes fetched after that operation ends,
// so no I/O runs under the metadata lock; runs of chunks back to back in
// a segment are read with one pread.
#include "engine/engine_impl.h"

namespace hiodsfs {

Status EngineImpl::plan_read(Txn& t, InodeId ino, const Inode& in, std::uint64_t off,
                             std::size_t len, ReadPlan* plan, bool quiet) {
    plan->off = off;
    plan->n = 0;
    plan->pieces.clear();
    if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
    if (off >= in.r.size) return Status::ok();
    plan->n = static_cast<std::size_t>(std::min<std::uint64_t>(len, in.r.size - off));
    const std::uint64_t end = off + plan->n;
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(t, ino, in, off, end, &ex));
    for (const auto& m : ex) {
        std::uint64_t a = std::max(m.start, off), b = std::min(m.end(), end);
        bool found = false;
        ChunkRecord rec;
        HIODSFS_TRY(get_chunk(t, m.e.chunk, &rec, &found));
        if (!found) {
            if (!quiet) read_errors_.fetch_add(1);
            return Status::error(EIO, "file " + std::to_string(ino) + " maps missing chunk " +
                                          std::to_string(m.e.chunk));
        }
        plan->pieces.push_back(ReadPlan::Piece{a, static_cast<std::uint32_t>(m.e.chunk_off + (a - m.start)),
                                               static_cast<std::uint32_t>(b - a), m.e.chunk, rec.location(),
                                               rec.length});
    }
    return Status::ok();
}

Status EngineImpl::read_locked(InodeId ino, Stream* s, std::uint64_t off, std::size_t len,
                               std::uint8_t* out, std::size_t* got, bool quiet,
                               MetaStore::ReadFrom from) {
    *got = 0;
    // A chunk freed between the plan and its read (an overwrite in a window
    // holds no stream lock, and compaction may delete the freed chunk's
    // segment) is a plan grown old, not damage: the file maps other chunks
    // now. The last attempt's error stands, counted as any other.
    for (int attempt = 1;; ++attempt) {
        ReadPlan plan;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin_read(&t, from));
            Inode in;
            HIODSFS_TRY(load_inode(*t, ino, &in));
            HIODSFS_TRY(plan_read(*t, ino, in, off, len, &plan, quiet));
        }
        bool replan = false;
        Status st = fetch_read(ino, s, plan, out, quiet, attempt < kReadPlans ? &replan : nullptr);
        if (replan) {
            read_replans_.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        HIODSFS_TRY(st);
        *got = plan.n;
        return Status::ok();
    }
}

Status EngineImpl::fetch_read(InodeId ino, Stream* s, const ReadPlan& plan, std::uint8_t* out,
                              bool quiet, bool* replan) {
    using Piece = ReadPlan::Piece;
    const std::uint64_t off = plan.off;
    const std::size_t n = plan.n;
    const std::vector<Piece>& pieces = plan.pieces;
    if (n == 0) return Status::ok();
    // Holes read as zeros; the rest of out is overwritten by the chunks.
    {
        std::uint64_t at = off;
        bool ordered = true;
        for (const auto& p : pieces) {
            if (p.file_off < at) {
                ordered = false;
                break;
            }
            std::memset(out + (at - off), 0, p.file_off - at);
            at = p.file_off + p.length;
        }
        if (ordered)
            std::memset(out + (at - off), 0, off + n - at);
        else
            std::memset(out, 0, n);
    }
    thread_local std::vector<std::uint8_t> chunk_buf;
    // A chunk that fails its checks is EIO for the whole request, never
    // wrong bytes; counted for hiodsfs-stat.
    auto failed = [&](const Piece& p, const Status& st, bool damaged) {
        if (quiet) return st;
        read_errors_.fetch_add(1);
        if (damaged) mark_damaged(p.chunk);
        return Status::error(EIO, "file " + std::to_string(ino) + ": " + st.message());
    };
    // The part of a piece's chunk the request wants, from the chunk's bytes.
    auto take = [&](const Piece& p, const std::uint8_t* chunk) {
        std::memcpy(out + (p.file_off - off), chunk + p.chunk_off, p.length);
    };
    auto read_piece = [&](const Piece& p) {
        std::uint8_t* dst = out + (p.file_off - off);
        if (!p.whole()) chunk_buf.resize(p.chunk_length);
        bool damaged = false, freed = false;
        Status st = read_chunk(p.chunk, p.loc, p.chunk_length, p.whole() ? dst : chunk_buf.data(), &damaged, &freed);
        if (!st) {
            if (freed && replan != nullptr) {
                *replan = true;
                return st;
            }
            return failed(p, st, damaged);
        }
        if (!p.whole()) take(p, chunk_buf.data());
        return Status::ok();
    };
    // A file written in order has its chunks back to back in a segment:
    // each run of them is read with one system call, whole chunks stored
    // as they are straight into out, the payloads of the others (encoded,
    // or wanted in part) into a buffer, then decoded. A run that fails (a
    // damaged record, a chunk compaction moved, bytes still in the write
    // buffer, an encoding that does not decode) is read again chunk by
    // chunk, which says what failed and acts on it.
    thread_local std::vector<ChunkLocation> run_locs;
    thread_local std::vector<ChunkId> run_ids;
    thread_local std::vector<char*> run_dests;
    thread_local std::vector<char> payloads;  // the run's records not read straight into out
    for (std::size_t i = 0; i < pieces.size();) {
        std::size_t j = i + 1;
        std::uint64_t run_bytes = pieces[i].loc.length;
        while (j < pieces.size() && SegmentStore::adjacent(pieces[j - 1].loc, pieces[j].loc) &&
               run_bytes + pieces[j].loc.length + SegmentStore::kHeaderBytes <= kReadRunBytes) {
            run_bytes += pieces[j].loc.length + SegmentStore::kHeaderBytes;
            ++j;
        }
        bool run_ok = false;
        if (j - i > 1) {
            std::size_t payload_bytes = 0;
            for (std::size_t k = i; k < j; ++k)
                if (!pieces[k].whole()) payload_bytes += pieces[k].loc.length;
            payloads.resize(payload_bytes);
            run_locs.clear();
            run_ids.clear();
            run_dests.clear();
            std::size_t at = 0;
            for (std::size_t k = i; k < j; ++k) {
                const Piece& p = pieces[k];
                run_locs.push_back(p.loc);
                run_ids.push_back(p.chunk);
                if (p.whole()) {
                    run_dests.push_back(reinterpret_cast<char*>(out + (p.file_off - off)));
                } else {
                    run_dests.push_back(payloads.data() + at);
                    at += p.loc.length;
                }
            }
            run_ok = segs_->read_run(run_locs.data(), run_ids.data(), j - i, run_dests.data()).is_ok();
            for (std::size_t k = i; run_ok && k < j; ++k) {
                const Piece& p = pieces[k];
                const char* payload = run_dests[k - i];
                if (p.whole()) continue;
                if (!p.loc.encoded) {
                    take(p, reinterpret_cast<const std::uint8_t*>(payload));
                    continue;
                }
                // A whole chunk decodes straight into out.
                const bool all = p.chunk_off == 0 && p.length == p.chunk_length;
                if (!all) chunk_buf.resize(p.chunk_length);
                std::uint8_t* dst = all ? out + (p.file_off - off) : chunk_buf.data();
                run_ok = decode_chunk_content(&dicts_, cipher_.get(), p.chunk, p.loc, payload, p.chunk_length, dst).is_ok();
                if (run_ok && !all) take(p, chunk_buf.data());
            }
            if (run_ok) reads_coalesced_.fetch_add(1, std::memory_order_relaxed);
        }
        if (!run_ok) {
            for (std::size_t k = i; k < j; ++k) HIODSFS_TRY(read_piece(pieces[k]));
        }
        i = j;
    }
    if (s != nullptr && s->active && s->size() > 0) {
        std::uint64_t a = std::max(off, s->off), b = std::min<std::uint64_t>(off + n, s->end());
        if (a < b) std::memcpy(out + (a - off), s->data() + (a - s->off), b - a);
    }
    return Status::ok();
}

Status EngineImpl::read(InodeId ino, std::uint64_t offset, std::size_t len, void* out,
                        std::size_t* got) {
    // Measured so the background pass yields to streaming reads (the throttle).
    *got = 0;
    const MeasuredRequest measured(controller_->read_monitor(), ino, got);
    auto s = streams_.get(ino);
    std::unique_lock<std::mutex> l(s->mu, std::defer_lock);
    // The pass takes the lock a moment before its sweep begins: a read that
    // finds the lock taken looks again, a bounded while, before it queues
    // for it, so as not to queue behind a whole sweep.
    for (int polls = 0; !l.try_lock();) {
        const std::uint64_t seq = s->sweep_seq.load(std::memory_order_acquire);
        if (seq % 2 == 1) {
            // Beside the pass's sweep: each of its metadata operations maps
            // the same bytes anew, so any snapshot of the extents reads
            // right. A chunk it freed may be gone by the time it is read
            // (compaction), or the sweep may have ended and a writer come,
            // whose stream holds bytes its extents do not show yet: then
            // the read is made again under the lock, which has the last word.
            // (A writer's operations come after the sweep's end, and each
            // publishes under the store's snapshot lock, which the read's
            // lookups hold: if the read saw any of them, this load sees the end.)
            const bool ok = read_locked(ino, nullptr, offset, len, static_cast<std::uint8_t*>(out), got, true).is_ok();
            if (ok && s->sweep_seq.load(std::memory_order_acquire) == seq) {
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

}  // namespace hiodsfs
