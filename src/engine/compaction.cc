#include "engine/compaction.h"

#include <algorithm>
#include <map>

#include "chunk/codec.h"
#include "chunk/fingerprint.h"
#include "engine/fsync_log.h"
#include "meta/chunk_table.h"
#include "meta/records.h"
#include "meta/segment_entry.h"

namespace hiodsfs {
namespace {
// Chunk records looked up per metadata operation while classifying a scan,
// so foreground operations wait at most for one batch of lookups.
constexpr std::size_t kLookupsPerTxn = 2048;

std::string seg_name(SegmentId seg) { return "segment " + std::to_string(seg); }

// A segment's entry; *present false when it has none (or a damaged one,
// which fsck repairs).
Status segment_entry(Txn& t, SegmentId seg, SegmentEntry* e, bool* present) {
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kSegments, key_u64(seg), &v, &found));
    *present = found && decode_segment_entry(v, e);
    if (!*present) *e = SegmentEntry{};
    return Status::ok();
}

Status segment_live(Txn& t, SegmentId seg, std::uint64_t* live, bool* present) {
    SegmentEntry e;
    HIODSFS_TRY(segment_entry(t, seg, &e, present));
    *live = e.live;
    return Status::ok();
}

// Whether chunk `id`'s record points exactly at `loc` (it is live there).
Status points_at(Txn& t, ChunkId id, const ChunkLocation& loc, ChunkRecord* rec, bool* yes) {
    bool found = false;
    HIODSFS_TRY(get_chunk(t, id, rec, &found));
    *yes = found && rec->location() == loc;
    return Status::ok();
}
}  // namespace

Status add_segment_live(Txn& t, SegmentId seg, std::int64_t delta) {
    SegmentEntry e;
    bool present = false;
    HIODSFS_TRY(segment_entry(t, seg, &e, &present));
    const auto live = std::max<std::int64_t>(0, static_cast<std::int64_t>(e.live) + delta);
    e.live = static_cast<std::uint64_t>(live);
    // A settled mark's weak bytes stay an upper bound while chunks die
    // (they are weighed against the live bytes left); new chunks, which
    // only the open segment takes, void it.
    if (delta > 0) e.settled.reset();
    return t.put(Db::kSegments, key_u64(seg), encode_segment_entry(e));
}

Compactor::Compactor(MetaStore* meta, SegmentStore* segs, std::function<Status()> commit,
                     double threshold)
    : meta_(meta), segs_(segs), commit_(std::move(commit)), threshold_(threshold) {}

CompactionStats Compactor::stats() const {
    CompactionStats s;
    s.segments_deleted = segments_deleted_.load();
    s.segments_compacted = segments_compacted_.load();
    s.chunks_moved = chunks_moved_.load();
    s.bytes_moved = bytes_moved_.load();
    s.bytes_freed = bytes_freed_.load();
    s.chunks_recompressed = chunks_recompressed_.load();
    return s;
}

Status Compactor::step(bool full_speed, bool* did_work) {
    *did_work = true;
    if (job_) return job_->next < job_->moves.size() ? copy_batch() : finish_job();
    bool found = false;
    const double threshold = full_speed && threshold_ > 0 ? std::max(threshold_, kIdleThreshold) : threshold_;
    HIODSFS_TRY(pick(threshold, &found));
    if (!found && full_speed && !recompress_to_.none()) HIODSFS_TRY(pick_weak(&found));
    *did_work = found;
    return Status::ok();
}

void Compactor::give_up(SegmentId seg) {
    {
        std::lock_guard l(looked_mu_);
        skip_.insert(seg);
    }
    (void)abandon_job();  // on failure the counter stays low (hiodsfs-fsck notes it)
}

Status Compactor::abandon_job() {
    if (!job_) return Status::ok();
    std::uint64_t copied = 0;
    for (std::size_t i = 0; i < job_->next; ++i) copied += job_->moves[i].to.length;
    job_.reset();
    if (copied == 0) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    t->super().counters.dead_bytes += copied;
    return t->commit();
}

// The sealed segment with the lowest live fraction below the threshold; a
// segment without live bytes is deleted right here.
Status Compactor::pick(double threshold, bool* found) {
    *found = false;
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    // Read after the list: every listed id other than this one is sealed
    // for good (the active id only grows).
    const SegmentId active = segs_->active_segment();
    struct Candidate {
        SegmentId seg;
        std::uint64_t size, live;
        bool present;
    };
    std::optional<Candidate> best;
    bool seal_active = false;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        for (const auto& [seg, size] : files) {
            if (seg == 0 || skip_.count(seg) != 0) continue;
            std::uint64_t live = 0;
            bool present = false;
            HIODSFS_TRY(segment_live(*t, seg, &live, &present));
            // A segment the metadata has no entry for is never touched: only
            // committed metadata may say that a segment's bytes are dead (it
            // may hold records of metadata that was lost; hiodsfs-fsck says).
            if (!present) continue;
            if (live > 0 && !(static_cast<double>(live) < threshold * static_cast<double>(size)))
                continue;
            if (seg == active) {
                // The segment being appended to cannot be compacted; once it
                // is big and mostly dead (a large file written, then deleted)
                // it is sealed so the next step can take it.
                if (size > 0 && (live == 0 || size >= kMinSealBytes)) seal_active = true;
                continue;
            }
            if (live > 0 && room_for_ && !room_for_(live)) continue;
            // live/size < best.live/best.size, without dividing.
            if (!best || static_cast<double>(live) * static_cast<double>(best->size) <
                             static_cast<double>(best->live) * static_cast<double>(size))
                best = Candidate{seg, size, live, present};
        }
    }
    if (!best) {
        if (!seal_active) return Status::ok();
        *found = true;
        return segs_->seal();
    }
    *found = true;
    if (best->live == 0) {
        // Its chunks' bytes were counted dead when they died; its headers
        // and fsync log records never were. A segment only the tier holds
        // is not fetched to count them, and one that cannot be read is
        // deleted all the same: their size is taken off instead.
        std::uint64_t dead = best->size;
        if (segs_->in_directory(best->seg) && !chunk_payload(best->seg, &dead)) dead = best->size;
        return delete_segment(best->seg, best->size, dead);
    }
    return start_job(best->seg, best->size);
}

bool Compactor::weaker(const ChunkRecord& rec) const {
    if (!rec.compressed() || !(rec.flags & ChunkRecord::kIndexed) || (rec.flags & ChunkRecord::kDamaged)) return false;
    const Compression c = rec.compression();
    if (recompress_to_.stronger_than(c.method, c.level)) return true;
    // Stored by zstd before the store had a dictionary: once, with one.
    return recompress_to_.method == CompressionMethod::kZstd && c.method == CompressionMethod::kZstd &&
           !rec.dictionary_tried() && newest_dictionary() != 0;
}

std::uint32_t Compactor::newest_dictionary() const {
    if (dicts_ == nullptr) return 0;
    const std::shared_ptr<const Dictionary> d = dicts_->newest();
    return d ? d->id() : 0;
}

void Compactor::recompress(Move& m, std::vector<std::uint8_t>& payload, bool* encoded) {
    // The chunk's bytes; one that does not decode moves as it is (a read
    // of it reports the damage and flags it).
    thread_local std::vector<std::uint8_t> content;
    const char* bytes = reinterpret_cast<const char*>(payload.data());
    if (m.from.encoded) {
        content.resize(m.length);
        if (!decode_chunk(bytes, m.from.length, reinterpret_cast<char*>(content.data()), m.length, dicts_, cipher_,
                          m.chunk))
            return;
        bytes = reinterpret_cast<const char*>(content.data());
    } else if (m.from.length != m.length) {
        return;
    }
    const std::shared_ptr<const Dictionary> dict =
        recompress_to_.method == CompressionMethod::kZstd && dicts_ != nullptr ? dicts_->newest() : nullptr;
    ChunkEncoder::Payload p = thread_chunk_encoder().encode(bytes, m.length, recompress_to_, dict.get());
    std::vector<std::uint8_t> sealed;
    if (cipher_ != nullptr && p.encoded) {
        // Sealed again, bound to the same chunk.
        if (!seal_chunk_payload(*cipher_, m.chunk, p.data, p.length, true, &sealed)) return;
        p.data = reinterpret_cast<const char*>(sealed.data());
        p.length = static_cast<std::uint32_t>(sealed.size());
    }
    if (!p.encoded || p.length >= m.from.length) {
        // Not smaller than it was: it stays as it is, and a zstd chunk the
        // dictionary did not help says so, or every idle pass would move it.
        if (dict && m.from.encoded && ChunkRecord::codec_compression(m.codec).method == CompressionMethod::kZstd)
            m.codec |= ChunkRecord::kDictionaryTried;
        return;
    }
    std::vector<std::uint8_t> out(p.data, p.data + p.length);
    payload.swap(out);
    *encoded = p.encoded;
    m.codec = p.encoded ? ChunkRecord::codec_byte(recompress_to_, p.dictionary != 0) : 0;
}

Status Compactor::weak_bytes(SegmentId seg, std::uint64_t* live, std::uint64_t* weak, bool* present) {
    *live = *weak = 0;
    std::vector<Move> records;
    HIODSFS_TRY(segs_->scan(seg, false, [&](const SegmentRecord& r) {
        if (r.chunk != kLogRecord && r.location.encoded) records.push_back(Move{r.chunk, r.location, {}});
        return true;
    }));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    HIODSFS_TRY(segment_live(*t, seg, live, present));
    for (const Move& m : records) {
        ChunkRecord rec;
        bool live_here = false;
        HIODSFS_TRY(points_at(*t, m.chunk, m.from, &rec, &live_here));
        if (live_here && weaker(rec)) *weak += rec.stored_length();
    }
    return Status::ok();
}

Status Compactor::pick_weak(bool* found) {
    *found = false;
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    const SegmentId active = segs_->active_segment();
    // A new dictionary makes the zstd chunks stored without one weak: every
    // segment is worth a look again.
    if (const std::uint32_t d = newest_dictionary(); d != looked_with_dictionary_) {
        looked_with_dictionary_ = d;
        std::lock_guard l(looked_mu_);
        looked_at_.clear();
        active_looked_ = {};
    }
    std::uint64_t active_size = 0;
    for (const auto& [seg, size] : files) {
        if (seg == active) active_size = size;
        if (!worth_a_look(seg, active)) continue;
        bool settled = false;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin_read(&t));
            HIODSFS_TRY(settled_now(*t, seg, &settled));
        }
        {
            std::lock_guard l(looked_mu_);
            looked_at_.insert(seg);
        }
        if (settled) continue;  // found so by a look of an earlier open
        *found = true;          // looking was the work of this step
        const SettledMark mark_now = settled_mark_now();
        std::uint64_t live = 0, weak = 0;
        bool present = false;
        HIODSFS_TRY(weak_bytes(seg, &live, &weak, &present));
        if (!present) return Status::ok();
        if (!worth_recompressing(live, weak))
            return mark_settled(seg, live, SettledMark{mark_now.codec, mark_now.dictionary, weak});
        if (room_for_ && !room_for_(live)) return Status::ok();
        return start_job(seg, size);
    }
    // The open segment: a store written inline and then left idle holds its
    // latest chunks there, and a small store all of them. Looked at again
    // only once what it gained since the last look could tip it, were all
    // of that stored weaker (a fixed growth would leave the weak tail of a
    // write that grew it less than that as it is for good). Sealed, the
    // next step takes it as any other.
    if (active == 0) return Status::ok();
    bool look = false;
    HIODSFS_TRY(active_worth_a_look(active, active_size, &look));
    if (!look) return Status::ok();
    *found = true;
    const SettledMark mark_now = settled_mark_now();
    std::uint64_t live = 0, weak = 0;
    bool present = false;
    HIODSFS_TRY(weak_bytes(active, &live, &weak, &present));
    {
        std::lock_guard l(looked_mu_);
        active_looked_ = {active, active_size, weak};
    }
    if (!present) return Status::ok();
    // Marked too, so the next open need not look until it grows.
    if (!worth_sealing(live, weak))
        return mark_settled(active, live, SettledMark{mark_now.codec, mark_now.dictionary, weak});
    return segs_->seal();
}

SettledMark Compactor::settled_mark_now() const {
    return SettledMark{ChunkRecord::codec_byte(recompress_to_), newest_dictionary(), 0};
}

Status Compactor::settled_now(Txn& t, SegmentId seg, bool* settled) {
    SegmentEntry e;
    bool present = false;
    HIODSFS_TRY(segment_entry(t, seg, &e, &present));
    const SettledMark now = settled_mark_now();
    *settled = present && e.settled && e.settled->codec == now.codec && e.settled->dictionary == now.dictionary &&
               !worth_recompressing(e.live, e.settled->weak);
    return Status::ok();
}

Status Compactor::mark_settled(SegmentId seg, std::uint64_t live, const SettledMark& mark) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    SegmentEntry e;
    bool present = false;
    HIODSFS_TRY(segment_entry(*t, seg, &e, &present));
    // Deleted meanwhile, or fsck's to repair; or the open segment took
    // chunks since the look, which the mark would not cover.
    if (!present || e.live != live) return Status::ok();
    e.settled = mark;
    HIODSFS_TRY(t->put(Db::kSegments, key_u64(seg), encode_segment_entry(e)));
    return t->commit();
}

bool Compactor::worth_recompressing(std::uint64_t live, std::uint64_t weak) {
    return weak > 0 && weak * 4 >= live;
}

bool Compactor::worth_sealing(std::uint64_t live, std::uint64_t weak) {
    return worth_recompressing(live, weak) && weak >= kMinSealBytes / 4;
}

Status Compactor::active_worth_a_look(SegmentId active, std::uint64_t active_size, bool* look) {
    ActiveLook last;
    {
        std::lock_guard l(looked_mu_);
        last = active_looked_;
    }
    *look = false;
    SegmentEntry e;
    bool present = false;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        HIODSFS_TRY(segment_entry(*t, active, &e, &present));
    }
    if (!present) return Status::ok();
    if (active != last.seg) {
        // Not looked at this open: a mark of an earlier look stands for one
        // (no chunk came since; one would have voided it), else all of it
        // could be stored weaker.
        const SettledMark now = settled_mark_now();
        if (e.settled && e.settled->codec == now.codec && e.settled->dictionary == now.dictionary)
            last = {active, active_size, e.settled->weak};
        else
            last = {active, 0, 0};
    }
    *look = active_size >= last.size && worth_sealing(e.live, last.weak + (active_size - last.size));
    return Status::ok();
}

bool Compactor::worth_a_look(SegmentId seg, SegmentId active) {
    if (seg == 0 || seg == active || skip_.count(seg) != 0) return false;
    {
        std::lock_guard l(looked_mu_);
        if (looked_at_.count(seg) != 0) return false;
    }
    // A segment only the tier holds would be fetched whole to look at it.
    return segs_->in_directory(seg);
}

Status Compactor::recompress_pending(std::uint64_t* segments) {
    *segments = 0;
    if (recompress_to_.none()) return Status::ok();
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    const SegmentId active = segs_->active_segment();
    std::uint64_t active_size = 0;
    std::vector<SegmentId> unlooked;
    {
        std::lock_guard l(looked_mu_);
        for (const auto& [seg, size] : files) {
            if (seg == active) active_size = size;
            if (seg != 0 && seg != active && looked_at_.count(seg) == 0 && skip_.count(seg) == 0 &&
                segs_->in_directory(seg))
                unlooked.push_back(seg);
        }
    }
    // Less those an earlier open found settled (pick_weak skips them unread).
    if (!unlooked.empty()) {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        for (SegmentId seg : unlooked) {
            bool settled = false;
            HIODSFS_TRY(settled_now(*t, seg, &settled));
            if (!settled) ++*segments;
        }
    }
    // The open segment, when pick_weak would look at it again.
    bool look = false;
    if (active != 0) HIODSFS_TRY(active_worth_a_look(active, active_size, &look));
    if (look) ++*segments;
    return Status::ok();
}

Status Compactor::start_job(SegmentId seg, std::uint64_t file_bytes) {
    Job job;
    job.seg = seg;
    job.file_bytes = file_bytes;
    std::vector<Move> records;
    HIODSFS_TRY(segs_->scan(seg, false, [&](const SegmentRecord& r) {
        if (r.chunk == kLogRecord) return true;  // no chunk's, and never counted dead
        records.push_back(Move{r.chunk, r.location, {}});
        job.payload_bytes += r.location.length;
        return true;
    }));
    for (std::size_t i = 0; i < records.size();) {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        for (std::size_t end = std::min(records.size(), i + kLookupsPerTxn); i < end; ++i) {
            ChunkRecord rec;
            bool live_here = false;
            HIODSFS_TRY(points_at(*t, records[i].chunk, records[i].from, &rec, &live_here));
            if (!live_here) continue;
            Move m = records[i];
            m.length = rec.length;
            m.codec = rec.codec;
            m.recompress = weaker(rec) || (!rec.compressed() &&
                                           (rec.flags & ChunkRecord::kIndexed) &&
                                           !(rec.flags & ChunkRecord::kDamaged) && !recompress_to_.none());
            job.moves.push_back(m);
        }
    }
    job_ = std::move(job);
    return Status::ok();
}

Status Compactor::copy_batch() {
    Job& job = *job_;
    std::vector<std::uint8_t> buf;
    std::uint64_t copied = 0;
    std::set<SegmentId> targets;
    while (job.next < job.moves.size() && copied < kBatchBytes) {
        Move& m = job.moves[job.next];
        buf.resize(m.from.length);
        Status st = segs_->read(m.from, m.chunk, buf.data());
        if (!st) {
            // A damaged record matters only if a chunk still lives there.
            bool live_here = false;
            {
                std::unique_ptr<Txn> t;
                HIODSFS_TRY(meta_->begin(&t));
                ChunkRecord rec;
                HIODSFS_TRY(points_at(*t, m.chunk, m.from, &rec, &live_here));
            }
            if (live_here) {
                const SegmentId seg = job.seg;
                give_up(seg);
                return Status::error(st.err(), "compaction of " + seg_name(seg) +
                                                   " stopped, the segment stays: " + st.message());
            }
            m.to = ChunkLocation{};  // dead meanwhile: nothing to move
            ++job.next;
            continue;
        }
        bool encoded = m.from.encoded;
        if (m.recompress) recompress(m, buf, &encoded);
        const auto len = static_cast<std::uint32_t>(buf.size());
        HIODSFS_TRY(segs_->append(m.chunk, buf.data(), len, crc32c(buf.data(), len), encoded, &m.to));
        copied += m.from.length;
        ++job.next;
        if (targets.insert(m.to.segment).second) {
            // A segment is known to the metadata from its first record on,
            // even if only abandoned copies end up in it.
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(meta_->begin(&t));
            HIODSFS_TRY(add_segment_live(*t, m.to.segment, 0));
            HIODSFS_TRY(t->commit());
        }
    }
    return Status::ok();
}

Status Compactor::finish_job() {
    const Job job = std::move(*job_);
    // Whatever happens below, this job is over: a switch folded into the
    // group must never be applied twice.
    job_.reset();
    // moved: the old payload bytes of what moved (its segment loses them);
    // moved_to: the new ones (recompressed chunks take fewer).
    std::uint64_t moved = 0, moved_to = 0, moved_chunks = 0, dead_copies = 0, live_left = 0, recompressed = 0;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        std::map<SegmentId, std::int64_t> gained;
        for (const Move& m : job.moves) {
            if (m.to.segment == 0) continue;
            ChunkRecord rec;
            bool live_here = false;
            HIODSFS_TRY(points_at(*t, m.chunk, m.from, &rec, &live_here));
            if (!live_here) {  // freed while it was copied: the copy is dead
                dead_copies += m.to.length;
                continue;
            }
            rec.set_location(m.to);
            rec.codec = m.to.encoded ? m.codec : 0;
            HIODSFS_TRY(put_chunk(*t, m.chunk, rec));
            gained[m.to.segment] += m.to.length;
            moved += m.from.length;
            moved_to += m.to.length;
            ++moved_chunks;
            if (m.recompress && m.to.length != m.from.length) ++recompressed;
        }
        // Chunks stored anew take what they take now.
        auto& counters = t->super().counters;
        counters.stored_bytes = counters.stored_bytes + moved_to - moved;
        for (const auto& [seg, bytes] : gained) HIODSFS_TRY(add_segment_live(*t, seg, bytes));
        std::uint64_t live = 0;
        bool present = false;
        HIODSFS_TRY(segment_live(*t, job.seg, &live, &present));
        live_left = live > moved ? live - moved : 0;
        // The old copies of what moved are dead now, like the copies whose
        // chunk died meanwhile; the whole segment's payload comes off when
        // its file goes (remove_file), so a crash in between counts it.
        t->super().counters.dead_bytes += dead_copies + moved;
        // Its entry stays, at 0 live bytes, until the file is gone: the
        // committed word that it is dead (see delete_segment).
        HIODSFS_TRY(add_segment_live(*t, job.seg, -static_cast<std::int64_t>(moved)));
        HIODSFS_TRY(t->commit());
    }
    chunks_moved_ += moved_chunks;
    bytes_moved_ += moved;
    chunks_recompressed_ += recompressed;
    if (live_left != 0) {
        {
            std::lock_guard l(looked_mu_);
            skip_.insert(job.seg);
        }
        return Status::error(EUCLEAN, "compaction of " + seg_name(job.seg) + ": " +
                                          std::to_string(live_left) +
                                          " live bytes are in records its scan did not reach; "
                                          "the segment stays (hiodsfs-fsck can tell more)");
    }
    // The copies are synced before the switch commits; the old file goes
    // only once nothing durable refers to it.
    HIODSFS_TRY(commit_());
    HIODSFS_TRY(remove_file(job.seg, job.payload_bytes));
    segments_deleted_ += 1;
    segments_compacted_ += 1;
    bytes_freed_ += job.file_bytes;
    return Status::ok();
}

Status Compactor::chunk_payload(SegmentId seg, std::uint64_t* bytes) {
    *bytes = 0;
    return segs_->scan(seg, false, [&](const SegmentRecord& r) {
        if (r.chunk != kLogRecord) *bytes += r.location.length;
        return true;
    });
}

Status Compactor::delete_segment(SegmentId seg, std::uint64_t file_bytes, std::uint64_t dead_payload) {
    // The frees that emptied it must be durable before its bytes go: a
    // crash must not bring back chunks that point into a deleted file.
    HIODSFS_TRY(commit_());
    HIODSFS_TRY(remove_file(seg, dead_payload));
    segments_deleted_ += 1;
    bytes_freed_ += file_bytes;
    return Status::ok();
}

Status Compactor::remove_file(SegmentId seg, std::uint64_t dead_payload) {
    HIODSFS_TRY(segs_->remove(seg));
    // The entry goes after the file: a crash in between leaves an entry of
    // 0 live bytes without a file, which the next open drops.
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin(&t));
        HIODSFS_TRY(t->del(Db::kSegments, key_u64(seg)));
        auto& c = t->super().counters;
        c.dead_bytes -= std::min(c.dead_bytes, dead_payload);
        HIODSFS_TRY(t->commit());
    }
    // At once, with the sync that makes the unlink durable: until then a
    // crash that keeps the unlink but not the entry's end would leave the
    // payload counted dead with no file to free (hiodsfs-fsck notes it).
    return commit_();
}

}  // namespace hiodsfs
