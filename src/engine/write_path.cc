// The write path, inline and deferred (reads: read_path.cc; truncate,
// fsync, fallocate, clone and seek: file_ops.cc).
//
// Each regular file being written has a Stream: the bytes since
// the last cut point, kept in memory with the chunker's state, so chunk
// boundaries do not depend on how writes are split. A complete chunk is
// fingerprinted, looked up, stored once, and mapped in one metadata
// operation. A write that does not continue the stream first closes it, then
// re-chunks from the start of the chunk holding the byte before the write
// (the cut point before it) and goes on through the old data after it until
// a new cut falls on an old chunk boundary again, so a small overwrite
// re-chunks only its region.
//
// Deferred writes store their bytes raw and queue them for the background
// pass (background.cc).
#include "engine/engine_impl.h"

namespace hiodsfs {

Status EngineImpl::regular_file(InodeId ino, Inode* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    HIODSFS_TRY(load_inode(*t, ino, out));
    return check_regular(*out);
}

// Chunks of file ino: fingerprinted outside the lock, then stored or shared
// and mapped in ONE metadata operation (a request's chunks commit together).
void EngineImpl::apply_update(Inode& in, WriteUpdate* u) {
    if (u->end > in.r.size) in.r.size = u->end;
    if (u->touch) {
        set_time(&in.r.mtime_s, &in.r.mtime_ns, u->now);
        set_time(&in.r.ctime_s, &in.r.ctime_ns, u->now);
    }
    u->applied = true;
}

void EngineImpl::ChunkPrints::resize(std::size_t n) {
    digests.resize(n);
    crcs.resize(n);
    zero.resize(n);
    if (encode_with != nullptr) {
        payloads.resize(n);
        bytes.resize(n);
    }
}

void EngineImpl::ChunkPrints::compute(std::size_t i, const ChunkSpan& c) {
    // Zeros are not stored: they read back from a hole.
    zero[i] = all_zero(c.data, c.len);
    if (zero[i]) return;
    digests[i] = chunk_fingerprint(keyed, c.data, c.len);
    // An encrypted store's CRC is of the sealed bytes (store_chunk): one of
    // the plain ones would be thrown away.
    if (keyed == nullptr) crcs[i] = crc32c(c.data, c.len);
    if (encode_with == nullptr) return;
    const ChunkEncoder::Payload p = thread_chunk_encoder().encode(
        reinterpret_cast<const char*>(c.data), static_cast<std::uint32_t>(c.len), *encode_with,
        encode_with->method == CompressionMethod::kZstd ? dictionary : nullptr);
    if (!p.encoded) return;
    bytes[i].assign(p.data, p.data + p.length);
    payloads[i] = ChunkPayload{bytes[i].data(), p.length, keyed == nullptr ? crc32c(bytes[i].data(), bytes[i].size()) : 0,
                               true, ChunkRecord::codec_byte(*encode_with, p.dictionary != 0)};
}

namespace {
// The pass's threads store with compression_background (BackgroundScope).
thread_local int background_scopes = 0;
}  // namespace

EngineImpl::BackgroundScope::BackgroundScope() { ++background_scopes; }
EngineImpl::BackgroundScope::~BackgroundScope() { --background_scopes; }

const Compression& EngineImpl::write_compression() const {
    return background_scopes > 0 ? opts_.compression_background : opts_.compression;
}

Status EngineImpl::encode_new_chunks(const std::vector<ChunkSpan>& chunks, const ChunkPrints& prints,
                                     const Compression& how, ChunkEncodings* out) {
    const std::size_t n = chunks.size();
    out->payloads.assign(n, ChunkPayload{});
    out->bytes.resize(n);
    // Which chunks the store lacks, in a read of the metadata: compressing
    // a duplicate would be work thrown away. One that another writer
    // stores meanwhile is shared all the same (store_chunk looks again).
    // Chunks whose sample says random are not looked up: the encoder would
    // store them as they are anyway, and random data then costs no lookup.
    // The samples are taken on every core, as the fingerprints were, and
    // once: the encoder is told they were.
    std::vector<char> compressible(n, 0);
    auto sample = [&](std::size_t i) {
        compressible[i] = !prints.zero[i] && !looks_incompressible(reinterpret_cast<const char*>(chunks[i].data),
                                                                   static_cast<std::uint32_t>(chunks[i].len));
    };
    if (n >= 8) {
        digest_loop_.run(n, sample);
    } else {
        for (std::size_t i = 0; i < n; ++i) sample(i);
    }
    std::vector<std::size_t> fresh;
    std::vector<std::size_t> maybe;
    for (std::size_t i = 0; i < n; ++i)
        if (compressible[i]) maybe.push_back(i);
    if (!maybe.empty()) {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t, MetaStore::ReadFrom::kGroup));
        for (std::size_t i : maybe) {
            ChunkId same = 0;
            ChunkRecord rec;
            HIODSFS_TRY(find_indexed_chunk(*t, prints.digests[i], &same, &rec));
            if (same == 0) fresh.push_back(i);
        }
    }
    const std::shared_ptr<const Dictionary> dict =
        how.method == CompressionMethod::kZstd ? dicts_.newest() : nullptr;
    auto encode = [&](std::size_t k) {
        const std::size_t i = fresh[k];
        const ChunkSpan& c = chunks[i];
        const ChunkEncoder::Payload p = thread_chunk_encoder().encode(
            reinterpret_cast<const char*>(c.data), static_cast<std::uint32_t>(c.len), how, dict.get(), true);
        if (!p.encoded) return;
        std::vector<std::uint8_t>& b = out->bytes[i];
        b.assign(p.data, p.data + p.length);
        out->payloads[i] = ChunkPayload{b.data(), p.length, cipher_ == nullptr ? crc32c(b.data(), b.size()) : 0, true,
                                        ChunkRecord::codec_byte(how, p.dictionary != 0)};
    };
    if (fresh.size() >= 2) {
        digest_loop_.run(fresh.size(), encode);
    } else {
        for (std::size_t k = 0; k < fresh.size(); ++k) encode(k);
    }
    return Status::ok();
}

Status EngineImpl::emit_chunks(InodeId ino, const std::vector<ChunkSpan>& chunks,
                               WriteUpdate* upd, const ChunkPrints* prints, std::size_t* shared) {
    if (chunks.empty()) return Status::ok();
    ChunkPrints computed(cipher_.get());
    if (prints == nullptr) {
        computed.resize(chunks.size());
        auto fingerprint = [&](std::size_t i) { computed.compute(i, chunks[i]); };
        // A large request's chunks are hashed on every core: one file's
        // stream is serial, and SHA-256 is most of its CPU time.
        if (chunks.size() >= 8) {
            digest_loop_.run(chunks.size(), fingerprint);
        } else {
            for (std::size_t i = 0; i < chunks.size(); ++i) fingerprint(i);
        }
        prints = &computed;
    }
    const std::vector<Digest>& digests = prints->digests;
    const std::vector<char>& zero = prints->zero;
    ChunkEncodings encodings;
    const Compression& how = write_compression();
    if (!how.none() && prints->encode_with == nullptr) HIODSFS_TRY(encode_new_chunks(chunks, *prints, how, &encodings));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    const std::uint64_t hits_before = t->super().counters.dedup_hits;
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    // Appending (or filling a hole) replaces nothing: one lookup for the
    // whole request instead of one per chunk.
    std::vector<MappedExtent> old;
    HIODSFS_TRY(extents_in(*t, ino, in, chunks.front().off, chunks.back().off + chunks.back().len, &old));
    const bool fresh = old.empty();
    SegmentGains gains;
    // Chunks that follow each other are mapped with one splice per run, so
    // an extent block is read and written once per request, not per chunk.
    // Stored first, mapped after: a chunk a run shares gains its reference
    // before the run's old extents drop theirs.
    std::vector<ExtentRecord> run;
    std::uint64_t run_off = 0, run_end = 0;
    auto map_run = [&]() -> Status {
        if (run.empty()) return Status::ok();
        Status st = replace_range(*t, ino, in, run_off, run_end - run_off, std::span<const ExtentRecord>(run));
        run.clear();
        return st;
    };
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        const ChunkSpan& c = chunks[i];
        if (zero[i]) {
            HIODSFS_TRY(map_run());
            if (!fresh) HIODSFS_TRY(replace_range(*t, ino, in, c.off, c.len, nullptr));
            continue;
        }
        ExtentRecord e;
        const ChunkPayload* payload = nullptr;
        if (!encodings.payloads.empty() && encodings.payloads[i].data != nullptr) payload = &encodings.payloads[i];
        if (prints->encode_with != nullptr && prints->payloads[i].data != nullptr) payload = &prints->payloads[i];
        HIODSFS_TRY(store_chunk(*t, c.data, static_cast<std::uint32_t>(c.len), digests[i], &e, &gains,
                                &prints->crcs[i], payload));
        if (!run.empty() && c.off != run_end) HIODSFS_TRY(map_run());
        if (run.empty()) run_off = run_end = c.off;
        run.push_back(e);
        run_end += c.len;
    }
    HIODSFS_TRY(map_run());
    if (shared != nullptr) *shared = static_cast<std::size_t>(t->super().counters.dedup_hits - hits_before);
    for (const auto& [seg, bytes] : gains)
        HIODSFS_TRY(add_segment_live(*t, seg, static_cast<std::int64_t>(bytes)));
    WriteUpdate pending = upd != nullptr ? *upd : WriteUpdate{};
    if (upd != nullptr) apply_update(in, &pending);
    HIODSFS_TRY(store_inode(*t, ino, in));
    HIODSFS_TRY(t->commit());
    if (upd != nullptr) *upd = pending;
    return Status::ok();
}

void EngineImpl::ChunkBatch::add(const ChunkSpan& c, bool stable) {
    if (stable) {
        chunks_.push_back(Held{c.off, c.data, 0, c.len});
        return;
    }
    chunks_.push_back(Held{c.off, nullptr, bytes_.size(), c.len});
    bytes_.insert(bytes_.end(), c.data, c.data + c.len);
}

std::vector<EngineImpl::ChunkSpan> EngineImpl::ChunkBatch::spans() const {
    std::vector<ChunkSpan> out;
    out.reserve(chunks_.size());
    for (const Held& h : chunks_)
        out.push_back(ChunkSpan{h.off, h.stable != nullptr ? h.stable : bytes_.data() + h.at, h.len});
    return out;
}

Status EngineImpl::flush_batch(InodeId ino, Stream& s, ChunkBatch& batch, WriteUpdate* upd) {
    if (batch.empty()) return Status::ok();
    Status st = emit_chunks(ino, batch.spans(), upd);
    // The stream moved past the batch's bytes, and what it still holds is
    // this request's: dropping it loses nothing acknowledged (the old bytes
    // are still mapped), while keeping it would store part of a failed write.
    if (!st) s.clear();
    return st;
}

// Appends bytes to the stream and emits every chunk they complete. On a
// failure the stream is left holding only bytes that were acknowledged
// before this call, with the chunker state rebuilt to match.
Status EngineImpl::feed(InodeId ino, Stream& s, const std::uint8_t* data, std::size_t len,
                        WriteUpdate* upd, ChunkBatch* batch, bool data_stable) {
    // The bytes are chunked where they are: only the chunk that completes
    // the stream's tail, and the new tail, are copied into the stream.
    const std::size_t before = s.buf.size();
    std::vector<ChunkSpan> chunks;
    std::uint64_t off = s.off;
    std::size_t pos = 0;
    // A large request stored at once is hashed while it is cut: a helper
    // fingerprints each chunk as soon as its end is found, instead of the
    // cut running alone before the hashing.
    ChunkPrints prints(cipher_.get());
    std::shared_ptr<const Dictionary> dictionary;
    std::optional<ParallelLoop::Open> hashing;
    std::size_t found = 0;
    if (batch == nullptr && len >= kHashWhileCutting && digest_loop_.has_helpers()) {
        // Every chunk after the first takes at least min_size bytes of data;
        // the slots are made now, so a helper's slot never moves.
        const std::size_t most = len / std::max<std::size_t>(chunking_.min_size, 1) + 2;
        chunks.resize(most);
        const Compression& how = write_compression();
        if (!how.none() && !s.mostly_shared) {
            prints.encode_with = &how;
            if (how.method == CompressionMethod::kZstd) dictionary = dicts_.newest();
            prints.dictionary = dictionary.get();
        }
        prints.resize(most);
        hashing.emplace(digest_loop_, [&](std::size_t i) { prints.compute(i, chunks[i]); });
    }
    auto add = [&](const ChunkSpan& c) {
        off += c.len;
        if (!hashing) {
            chunks.push_back(c);
            return;
        }
        chunks[found++] = c;
        hashing->publish(found);
    };
    std::size_t n = s.chunker->next_cut(data, len);
    if (n != Chunker::kNoCut) {
        s.buf.insert(s.buf.end(), data, data + n);
        add(ChunkSpan{off, s.buf.data() + s.head, s.buf.size() - s.head});
        pos = n;
        while (pos < len && (n = s.chunker->next_cut(data + pos, len - pos)) != Chunker::kNoCut) {
            add(ChunkSpan{off, data + pos, n});
            pos += n;
        }
    }
    if (hashing) {
        hashing->finish();
        chunks.resize(found);
        prints.resize(found);
    }
    Status st = Status::ok();
    if (batch != nullptr) {
        // The chunk that completes the stream's tail lies in s.buf, which is
        // overwritten below: only chunks within data can stay where they are.
        for (const ChunkSpan& c : chunks)
            batch->add(c, data_stable && c.data >= data && c.data + c.len <= data + len);
    } else {
        std::size_t shared = 0;
        st = emit_chunks(ino, chunks, upd, hashing ? &prints : nullptr, &shared);
        if (st && hashing) s.mostly_shared = 2 * shared > chunks.size();
    }
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

Status EngineImpl::close_stream(InodeId ino, Stream& s, bool force_inline, WriteUpdate* upd,
                                ChunkBatch* batch) {
    if (!s.active) return Status::ok();
    if (s.size() > 0 && batch != nullptr && (force_inline || !deferred_.load())) {
        batch->add(ChunkSpan{s.off, s.data(), s.size()}, false);
    } else if (s.size() > 0) {
        // The bytes' writes set the file's size and times when they came.
        Status st = deferred_.load() && !force_inline
                        ? write_behind_->hold(ino, s.off, s.data(), s.size(), raw_piece_bytes(), nullptr)
                        : emit_chunks(ino, {ChunkSpan{s.off, s.data(), s.size()}},
                                      upd != nullptr && !upd->applied ? upd : nullptr);
        // The file was deleted and freed (no handle held it) with bytes
        // still in its stream, which release_inode could not drop because
        // a reader held the stream then: they belong to no file any more.
        if (st.err() == ENOENT) st = Status::ok();
        HIODSFS_TRY(st);
    }
    s.clear();
    return Status::ok();
}

Status EngineImpl::starts_chunk(Txn& t, const MappedExtent& m, bool* out) {
    *out = false;
    if (m.e.chunk_off != 0) return Status::ok();
    bool found = false;
    ChunkRecord rec;
    HIODSFS_TRY(get_chunk(t, m.e.chunk, &rec, &found));
    *out = found && (rec.flags & ChunkRecord::kIndexed);
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
Status EngineImpl::cut_before(Txn& t, InodeId ino, const Inode& in, std::uint64_t off, std::uint64_t reach,
                              std::uint64_t* start, bool* beyond) {
    *start = off;
    if (beyond != nullptr) *beyond = false;
    if (off > in.r.size) return Status::ok();  // past the end, the gap stays a hole: a cut point
    for (std::uint64_t pos = off; pos > 0 && off - pos <= reach;) {
        std::vector<MappedExtent> ex;
        HIODSFS_TRY(extents_in(t, ino, in, pos - 1, pos, &ex));
        if (ex.empty()) break;  // a hole ends at pos: a cut point
        bool is_start = false;
        HIODSFS_TRY(starts_chunk(t, ex.front(), &is_start));
        pos = ex.front().start;
        *start = pos;  // the file's start, if the walk ends there
        if (is_start) break;
    }
    if (off - *start > reach) {
        *start = off;  // never preload unbounded
        if (beyond != nullptr) *beyond = true;
    }
    return Status::ok();
}

Status EngineImpl::start_stream(InodeId ino, Stream& s, std::uint64_t off, std::uint64_t reach,
                                 std::uint64_t* size, std::uint64_t ahead_from,
                                 std::vector<RealignStep>* ahead, ChunkBatch* batch) {
    std::uint64_t start = off;
    // The first piece of old bytes is looked up in the walk's operation:
    // one pass through the metadata lock instead of two for a small write.
    ReadPlan first;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t, MetaStore::ReadFrom::kGroup));
        Inode in;
        HIODSFS_TRY(load_inode(*t, ino, &in));
        HIODSFS_TRY(check_regular(in));
        if (size != nullptr) *size = in.r.size;
        if (chunking_.kind == ChunkingParams::Kind::kFixed) {
            // Fixed chunks sit at multiples of the size: restart at the one
            // that holds off, preloaded with the old bytes before off.
            start = off - off % chunking_.avg_size;
        } else {
            HIODSFS_TRY(cut_before(*t, ino, in, off, reach, &start));
        }
        if (start < off)
            HIODSFS_TRY(plan_read(*t, ino, in, start,
                                  static_cast<std::size_t>(std::min(off - start, kRechunkPiece)), &first));
        // An overwrite's realignment usually takes two steps: through the
        // rest of the chunk the write ends in, then a stop where the next
        // one starts. Both are looked up here, in this operation.
        if (ahead != nullptr) {
            constexpr std::size_t kAheadSteps = 2;
            ahead->clear();
            for (std::uint64_t pos = ahead_from; ahead->size() < kAheadSteps && pos < in.r.size;) {
                RealignStep step;
                HIODSFS_TRY(plan_realign_step(*t, ino, in, pos, false, &step));
                const bool more = step.planned;
                pos = step.piece_end;
                ahead->push_back(std::move(step));
                if (!more) break;
            }
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
        Status st = pos == start ? fetch_read(ino, nullptr, first, old.data())
                                 : read_locked(ino, nullptr, pos, old.size(), old.data(), &got, false,
                                               MetaStore::ReadFrom::kGroup);
        if (st) st = feed(ino, s, old.data(), old.size(), nullptr, batch);
        if (!st) {
            s.clear();
            return st;
        }
        pos += old.size();
    }
    return Status::ok();
}

Status EngineImpl::plan_realign_step(Txn& t, InodeId ino, const Inode& in, std::uint64_t pos,
                                     bool may_stop, RealignStep* step) {
    *step = RealignStep{};
    step->pos = pos;
    const std::uint64_t size = in.r.size;
    if (pos >= size) {
        step->past_end = true;  // reached the end: the rest is the tail
        return Status::ok();
    }
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(t, ino, in, pos, std::min(size, pos + kRechunkPiece), &ex));
    std::uint64_t piece_end = 0;
    if (ex.empty()) {
        step->at_boundary = true;  // a hole
        piece_end = std::min(size, pos + kRechunkPiece);
    } else if (ex.front().start >= pos) {
        step->at_boundary = true;
        piece_end = ex.front().start > pos ? ex.front().start : ex.front().end();
    } else {
        piece_end = ex.front().end();
    }
    step->piece_end = std::min({piece_end, size, pos + kRechunkPiece});
    step->hole_at_pos = ex.empty() || ex.front().start > pos;
    // Raw (not yet deduplicated) data ahead, or the tail of a chunk whose
    // head was overwritten, is no boundary to stop at: chunking on through
    // it cuts it as inline mode would.
    if (!ex.empty()) HIODSFS_TRY(starts_chunk(t, ex.front(), &step->next_starts_chunk));
    const bool stops = may_stop && step->at_boundary && step->next_starts_chunk;
    if (!step->hole_at_pos && !stops) {
        HIODSFS_TRY(plan_read(t, ino, in, pos, static_cast<std::size_t>(step->piece_end - pos), &step->plan));
        step->planned = true;
    }
    return Status::ok();
}

// After an overwrite inside old data: keep chunking the old bytes that follow
// until a cut falls on an old extent boundary, so the chunks after it stay.
Status EngineImpl::realign(InodeId ino, Stream& s, std::uint64_t write_end, std::uint64_t reach,
                           WriteUpdate* upd, ChunkBatch* batch, std::vector<RealignStep>* ahead,
                           std::uint64_t window_end, bool* left_window) {
    const std::uint64_t give_up = write_end + std::min(reach, kMaxFileSize);
    std::vector<std::uint8_t> piece;
    for (;;) {
        const std::uint64_t pos = s.end();
        const bool may_stop = s.size() == 0 || pos >= give_up;
        RealignStep step;
        if (ahead != nullptr && !ahead->empty() && ahead->front().pos == pos) {
            step = std::move(ahead->front());
            ahead->erase(ahead->begin());
        } else {
            if (ahead != nullptr) ahead->clear();  // the stream went elsewhere
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin_read(&t, MetaStore::ReadFrom::kGroup));
            Inode in;
            HIODSFS_TRY(load_inode(*t, ino, &in));
            HIODSFS_TRY(plan_realign_step(*t, ino, in, pos, may_stop, &step));
        }
        if (step.past_end) return Status::ok();
        // A hole is a cut point: its zeros are not chunked into the data. The
        // stream stays open, so a write that continues it (filling the hole,
        // as into a preallocated file) needs no restart.
        if (step.hole_at_pos) return Status::ok();
        if (may_stop && step.at_boundary && step.next_starts_chunk)
            return close_stream(ino, s, true, upd, batch);  // inline even when the pass runs this
        if (step.piece_end > window_end) {
            *left_window = true;
            return Status::ok();
        }
        piece.resize(step.piece_end - pos);
        HIODSFS_TRY(fetch_read(ino, nullptr, step.plan, piece.data()));
        HIODSFS_TRY(feed(ino, s, piece.data(), piece.size(), upd != nullptr && !upd->applied ? upd : nullptr,
                         batch));
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

std::unique_lock<std::mutex> EngineImpl::lock_stream(Stream& s) {
    s.waiters.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> l(s.mu);
    s.waiters.fetch_sub(1, std::memory_order_relaxed);
    whole(s, l);
    return l;
}

void EngineImpl::whole(Stream& s, std::unique_lock<std::mutex>& l) {
    if (s.windows.empty()) return;
    ++s.whole_waiting;
    s.window_left.wait(l, [&] { return s.windows.empty(); });
    --s.whole_waiting;
}

// Overwrites in windows. A write inside a file that does not continue its
// stream re-cuts only the region around it: from the cut point before it
// (at most `reach` back) to where a new cut meets an old chunk boundary
// again (at most `reach` and one chunk past its end, else it is retried).
// That window is all it reads or remaps, and its chunks are mapped in one
// metadata operation at the end, so overwrites whose windows do not meet
// run at once, each with a stream of its own, as a database's random
// writes come. The file's stream is idle meanwhile; everyone who would
// use it, or change the file's size or bytes (writes that extend or
// continue, truncate, fallocate, clone, the pass's sweep), waits for the
// windows to close (whole()), and no new window opens while one waits.
Status EngineImpl::write_in_window(InodeId ino, Stream& s, std::unique_lock<std::mutex>& l,
                                   std::uint64_t offset, const std::uint8_t* data, std::size_t len,
                                   WriteUpdate* upd, bool* done) {
    *done = false;
    const std::uint64_t reach = std::uint64_t{chunking_.max_size} * 4;
    const std::uint64_t lo = offset - std::min(offset, reach);
    const std::uint64_t hi = offset + len + reach + chunking_.max_size;
    auto meets = [&](const std::pair<std::uint64_t, std::uint64_t>& w) { return w.first < hi && lo < w.second; };
    for (;;) {
        if (deferred_.load() || s.active || s.whole_waiting > 0 || offset == s.last_end) return Status::ok();
        if (std::none_of(s.windows.begin(), s.windows.end(), meets)) break;
        s.window_left.wait(l);
    }
    const bool beside = !s.windows.empty();
    s.windows.emplace_back(lo, hi);
    s.streak = 0;
    s.last_end = offset + len;
    bool inside = false, left_window = false;
    Status st;
    {
        // The window closes, under the lock, however the work ends.
        struct Close {
            Stream& s;
            std::unique_lock<std::mutex>& l;
            std::pair<std::uint64_t, std::uint64_t> w;
            ~Close() {
                if (!l.owns_lock()) l.lock();
                s.windows.erase(std::find(s.windows.begin(), s.windows.end(), w));
                s.window_left.notify_all();
            }
        } close{s, l, {lo, hi}};
        l.unlock();

        Stream own;
        ChunkBatch batch;
        std::vector<RealignStep> ahead;
        std::uint64_t size = 0;
        st = start_stream(ino, own, offset, reach, &size, offset + len, &ahead, &batch);
        // Only inside the file, whose size then stays while windows are
        // open: a write that reaches its end is made under the lock.
        inside = st && offset + len < size;
        if (inside) st = feed(ino, own, data, len, nullptr, &batch, true);
        if (inside && st) st = realign(ino, own, offset + len, reach, nullptr, &batch, &ahead, hi, &left_window);
        // A tail the realignment left open (at a hole or the file's end)
        // is chunked now: no later write continues this stream.
        if (inside && st && !left_window) st = close_stream(ino, own, true, nullptr, &batch);
        // Nothing is mapped before this one operation: a write that fails
        // or leaves its window has changed nothing.
        if (inside && st && !left_window) st = flush_batch(ino, own, batch, upd);
    }
    if (!st) return st;
    if (!inside) return Status::ok();
    overwrites_in_windows_.fetch_add(1, std::memory_order_relaxed);
    if (beside) overwrites_beside_others_.fetch_add(1, std::memory_order_relaxed);
    if (left_window) {
        window_retries_.fetch_add(1, std::memory_order_relaxed);
        return Status::ok();
    }
    *done = true;
    return Status::ok();
}

Status EngineImpl::write(InodeId ino, std::uint64_t offset, const void* data, std::size_t len,
                         WriteTimes times) {
    Status st = write_request(ino, offset, data, len, times);
    if (st.err() == EIO) stop_with_segments();  // a stop says so at once, not at the next interval
    return st;
}

Status EngineImpl::write_request(InodeId ino, std::uint64_t offset, const void* data,
                                 std::size_t len, WriteTimes times) {
    if (offset > kMaxFileSize || len > kMaxFileSize - offset)
        return Status::error(EFBIG, "write past the maximum file size");
    if (len == 0) return Status::ok();
    // Every write request is measured for the mode controller.
    const MeasuredRequest measured(controller_->monitor(), ino, std::uint64_t{len});
    std::optional<Admission> admission;
    HIODSFS_TRY(space_.admit_write(len, &admission));
    auto s = streams_.get(ino);
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
    upd.touch = times == WriteTimes::kSet;
    if (!s->active) {
        bool done = false;
        Status st = write_in_window(ino, *s, l, offset, bytes, len, &upd, &done);
        if (!st) return st;
        if (done) {
            l.unlock();
            return apply_unless_applied(ino, &upd);
        }
    }
    whole(*s, l);
    s->last_end = offset + len;
    if (deferred_.load()) {
        HIODSFS_TRY(hold_write(ino, *s, offset, bytes, len, upd.touch ? &upd.now : nullptr));
        l.unlock();
        return write_behind_->apply_if_full();
    }
    std::uint64_t old_size = 0;
    const std::uint64_t reach = std::uint64_t{chunking_.max_size} * 4;
    // A write that restarts the stream (a random or first write) batches
    // its chunks and looks up its realignment with the restart: with the
    // emit at the end, one read and one write operation in all, where
    // every piece of the re-cut took one of each.
    ChunkBatch batch;
    ChunkBatch* restart = nullptr;
    std::vector<RealignStep> ahead;
    if (s->active && offset == s->end()) {
        Inode in;
        HIODSFS_TRY(regular_file(ino, &in));
        old_size = in.r.size;
    } else {
        // The stream's tail was acknowledged: closing it leaves the size.
        HIODSFS_TRY(close_stream(ino, *s));
        restart = &batch;
        HIODSFS_TRY(start_stream(ino, *s, offset, reach, &old_size, offset + len, &ahead, restart));
    }
    Status st = feed(ino, *s, bytes, len, restart != nullptr ? nullptr : &upd, restart, true);
    // A failed feed accepted nothing of this write.
    std::uint64_t accepted_end = st ? offset + len : 0;
    // An overwrite inside the file: the first chunks the realignment emits
    // carry the write's times (its size does not change), which saves the
    // metadata operation below for most random overwrites.
    if (st && offset + len < old_size)
        st = realign(ino, *s, offset + len, reach, restart != nullptr || upd.applied ? nullptr : &upd,
                     restart, &ahead);
    if (restart != nullptr) {
        // A realignment that failed (old bytes after the write that do not
        // read) fails the write whole: the stream held only its bytes and
        // old ones, and goes with the batch.
        Status flushed = st ? flush_batch(ino, *s, batch, &upd) : Status::ok();
        if (!st) s->clear();
        if (!flushed) st = flushed;
        if (!st) accepted_end = 0;
    }
    // A write that took nothing leaves the times as they were too.
    if (accepted_end != 0) HIODSFS_TRY(apply_unless_applied(ino, &upd));
    return st;
}

Status EngineImpl::apply_unless_applied(InodeId ino, WriteUpdate* upd) {
    if (upd->applied) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode cur;
    HIODSFS_TRY(load_inode(*t, ino, &cur));
    apply_update(cur, upd);
    HIODSFS_TRY(store_inode(*t, ino, cur));
    return t->commit();
}

Status EngineImpl::hold_write(InodeId ino, Stream& s, std::uint64_t off, const std::uint8_t* data,
                              std::size_t len, const struct timespec* touched) {
    HIODSFS_TRY(close_stream(ino, s));
    if (!s.regular) {
        Inode in;
        HIODSFS_TRY(regular_file(ino, &in));
        s.regular = true;
    }
    return write_behind_->hold(ino, off, data, len, raw_piece_bytes(), touched);
}

}  // namespace hiodsfs
