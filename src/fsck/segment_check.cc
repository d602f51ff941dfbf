// The segments, checked against the chunk records: each chunk's record in
// its segment (its header, or with --scrub all of it and its fingerprint;
// a segment only the tier holds, its size), what a lost or cut segment
// leaves (lost_segments.h), a tiered store's segments the tier lacks
// (tier_objects.h), live bytes per segment, and segment files no chunk
// refers to. Bad chunks go to heal().
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chunk/fingerprint.h"
#include "engine/chunk_content.h"
#include "engine/fsync_log.h"
#include "fsck/checker.h"
#include "fsck/lost_segments.h"
#include "fsck/tier_objects.h"
#include "meta/keys.h"
#include "meta/segment_entry.h"

namespace hiodsfs::fsck {

// Segments the cache directory holds whose committed bytes the tier
// lacks (tier_objects.h): reported, and uploaded by --repair.
Status Checker::check_tier_copies(const std::vector<std::pair<ChunkLocation, ChunkId>>& order) {
    std::map<SegmentId, std::uint64_t> referenced;
    for (const auto& [loc, id] : order) {
        std::uint64_t& end = referenced[loc.segment];
        end = std::max(end, loc.offset + loc.length);
    }
    const std::string dir = o_.store + "/segments";
    std::vector<TierGap> gaps;
    HIODSFS_TRY(find_tier_gaps(env_, o_.tier, dir, referenced, &gaps));
    for (const TierGap& gap : gaps)
        HIODSFS_TRY(fix(describe_tier_gap(gap, o_.tier->describe(), dir),
                        [&] { return upload_from_cache(env_, o_.tier, dir, gap); }));
    return Status::ok();
}

// A chunk of a segment held only by the tier, without reading it: the
// object must hold the whole record.
Status Checker::check_in_object(const ChunkLocation& loc, ChunkId id, std::uint64_t object_bytes) {
    if (loc.offset >= SegmentStore::kHeaderBytes && loc.offset + loc.length <= object_bytes) return Status::ok();
    return Status::error(EIO, "segment " + u(loc.segment) + " in " + o_.tier->describe() + " has " +
                                  u(object_bytes) + " bytes, but chunk " + u(id) + "'s record (" +
                                  u(loc.length) + " bytes at offset " + u(loc.offset) +
                                  ") lies beyond them (truncated?)");
}

// Every chunk's record in its segment: its header (or, scrubbing, all of
// it and its fingerprint); live bytes per segment. A segment only the
// tier holds has its size checked instead of its headers unless scrubbing.
Status Checker::check_segments() {
    std::vector<std::pair<SegmentId, std::uint64_t>> list;
    HIODSFS_TRY(segs_.list_segments(&list));
    std::map<SegmentId, std::uint64_t> sizes;
    for (const auto& [seg, size] : list) sizes[seg] = size;
    rep_.segments = list.size();

    std::vector<std::pair<ChunkLocation, ChunkId>> order;
    order.reserve(chunks_.size());
    std::uint64_t total_bytes = 0;
    for (const auto& [id, ci] : chunks_) {
        if (ci.r.lost()) continue;  // in no segment: named below, as damaged
        order.emplace_back(ci.r.location(), id);
        total_bytes += ci.r.stored_length();
    }
    const bool local = o_.tier == nullptr;
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::tie(a.first.segment, a.first.offset) < std::tie(b.first.segment, b.first.offset);
    });
    std::vector<std::uint8_t> buf;
    std::uint64_t done = 0, done_bytes = 0;
    std::map<SegmentId, std::uint64_t> missing_segments;
    std::map<ChunkId, std::string> bad;  // chunk -> what is wrong with it
    for (const auto& [loc, id] : order) {
        ++done;
        if (!sizes.count(loc.segment)) {
            missing_segments[loc.segment] += 1;
            if (local) {
                // Its bytes are gone: healed from an intact copy, or lost (lost_segments.h).
                bad[id] = "its segment " + u(loc.segment) + " is missing";
                gone_.insert(id);
                newest_gone_ = std::max(newest_gone_, loc.segment);
                continue;
            }
            problem("chunk " + u(id) + " lives in segment " + u(loc.segment) +
                        ", which is missing; it holds " + chunk_users(id),
                    false);
            continue;
        }
        Status st;
        if (!scrub_ && !segs_.in_directory(loc.segment)) {
            // Only in the tier: its size, not its bytes (a plain check
            // downloads nothing; --scrub reads every object).
            st = check_in_object(loc, id, sizes[loc.segment]);
            progress("segments", done, order.size());
        } else if (scrub_) {
            const ChunkRecord& r = chunks_.at(id).r;
            buf.resize(r.length);
            // Decoded, when encoded: the fingerprint is of the chunk's bytes.
            st = read_chunk_content(segs_, dicts_, cipher_, id, loc, r.length, buf.data());
            if (st) {
                if ((r.flags & ChunkRecord::kIndexed) &&
                    !(fingerprint(buf) == r.digest))
                    st = Status::error(EIO, "content does not match its fingerprint");
            }
            ++rep_.scrubbed_chunks;
            rep_.scrubbed_bytes += loc.length;
            done_bytes += loc.length;
            progress("scrub", done_bytes, total_bytes);
        } else {
            st = segs_.check_header(loc, id);
            progress("segments", done, order.size());
        }
        if (!st) {
            bad[id] = st.message();
            if (local && bytes_gone(loc, sizes)) {  // a segment cut short
                gone_.insert(id);
                newest_gone_ = std::max(newest_gone_, loc.segment);
            }
        }
    }
    for (const auto& [id, ci] : chunks_)
        if ((ci.r.flags & ChunkRecord::kDamaged) && !bad.count(id))
            bad[id] = ci.r.lost()
                          ? "its bytes were lost with their segment (missing or cut short when "
                            "hiodsfs-fsck --repair ran)"
                          : "it failed its checksum when read (the daemon flagged it)";
    const std::size_t gone = gone_.size();
    HIODSFS_TRY(heal(bad));
    if (local) HIODSFS_TRY(check_read_write(sizes, gone));
    if (o_.tier != nullptr) HIODSFS_TRY(check_tier_copies(order));

    // Live payload bytes per segment.
    std::map<SegmentId, std::uint64_t> live;
    for (const auto& [id, ci] : chunks_)
        if (!ci.r.lost()) live[ci.r.segment] += ci.r.stored_length();
    std::map<SegmentId, std::uint64_t> recorded;
    std::map<SegmentId, std::optional<SettledMark>> marks;
    {
        Cursor c = t_.cursor(Db::kSegments);
        std::vector<std::string> bad;
        for (bool ok = c.first(); ok; ok = c.next()) {
            std::uint64_t seg = 0;
            SegmentEntry e;
            if (!parse_key_u64(c.key(), &seg) || seg > std::numeric_limits<SegmentId>::max() ||
                !decode_segment_entry(c.value(), &e)) {
                bad.emplace_back(c.key());
                continue;
            }
            recorded[static_cast<SegmentId>(seg)] = e.live;
            marks[static_cast<SegmentId>(seg)] = e.settled;
        }
        HIODSFS_TRY(c.status());
        // Removed: the live bytes of every segment are counted anew below.
        for (const std::string& k : bad)
            HIODSFS_TRY(fix("segment record with a damaged key or value; it is removed",
                            [&] { return t_.del(Db::kSegments, k); }));
    }
    std::set<SegmentId> all;
    for (const auto& [s, n] : live) all.insert(s);
    for (const auto& [s, n] : recorded) all.insert(s);
    for (SegmentId s : all) {
        std::uint64_t want = live.count(s) ? live[s] : 0;
        std::uint64_t have = recorded.count(s) ? recorded[s] : 0;
        if (want == have) continue;
        HIODSFS_TRY(fix("segment " + u(s) + " counts " + u(have) + " live bytes, its chunks hold " + u(want),
                        [&, s = s] {
                            return t_.put(Db::kSegments, key_u64(s), encode_segment_entry({want, marks[s]}));
                        }));
    }
    HIODSFS_TRY(count_payload(list));
    for (const auto& [seg, n] : live) known_segments_.insert(seg);
    for (const auto& [seg, n] : recorded) known_segments_.insert(seg);
    // Segment files the metadata knows nothing of. The daemon never
    // deletes one (its records might belong to metadata that was lost);
    // after this check has found the metadata whole and no chunk in
    // them, --repair records them dead so reclaim frees them. Ones made
    // after the last commit are a crash's leftovers: the next mount does that.
    for (const auto& [seg, size] : list) {
        if (size == 0 || live.count(seg) || recorded.count(seg)) continue;
        std::string what = "segment " + u(seg) + " (" + u(size) + " bytes";
        if (scrub_ || segs_.in_directory(seg)) {
            std::uint64_t records = 0;
            HIODSFS_TRY(segs_.scan(seg, false, [&](const SegmentRecord&) {
                ++records;
                return true;
            }));
            what += ", " + u(records) + " records";
        } else {
            what += ", only in " + o_.tier->describe();
        }
        what += ") holds no chunk the metadata refers to";
        if (t_.super().written_after(seg)) {
            rep_.notes.push_back(what + ": written after the last commit; the next mount frees it");
            continue;
        }
        HIODSFS_TRY(fix(what + "; it is kept, and recorded as dead so reclaim frees it", [&, seg = seg] {
            HIODSFS_TRY(t_.put(Db::kSegments, key_u64(seg), be64(0)));
            // Its payload is dead now, and reclaim takes it off the
            // counter when it deletes the file.
            known_segments_.insert(seg);
            if (payload_ && payload_->count(seg)) t_.super().counters.dead_bytes += payload_->at(seg);
            return Status::ok();
        }));
    }
    return Status::ok();
}

// A local store whose chunks refer to bytes that are gone, or whose
// frontier lies in a lost segment, is refused read-write, and fsck's
// advice (write the files again) needs a read-write mount: --repair
// moved those chunks to kLostSegment (heal) and restarts the stream
// past every id known where the frontier was lost (lost_segments.h).
// gone: how many chunks the check found whose bytes are gone.
Status Checker::check_read_write(const SegmentSizes& sizes, std::size_t gone) {
    const std::string frontier = frontier_refusal(t_.super(), sizes);
    if (gone == 0 && frontier.empty()) return Status::ok();
    std::string why;
    if (gone > 0) why = u(gone) + " chunk(s) refer to bytes that are gone";
    if (!frontier.empty()) why += (why.empty() ? "" : ", and ") + frontier;
    return fix(
        "the store cannot be mounted read-write: " + why +
            "; those chunks go to no segment (their ranges read EIO) and new data after "
            "every segment the metadata knew, so that it mounts read-write and the files "
            "named above can be written again",
        [&]() -> Status {
            if (frontier.empty()) return Status::ok();
            // Chunks moved to kLostSegment were counted in newest_gone_.
            SegmentId in_records = newest_gone_;
            for (const auto& [id, ci] : chunks_)
                in_records = std::max(in_records, ci.r.segment);
            return restart_after_loss(env_, o_.store + "/segments", sizes, in_records,
                                      t_);
        });
}

// The chunk payload of each segment's records before the committed
// frontier. Records after it are a crash's leftovers, which the next
// mount counts. Unknown when a segment only the tier holds would have to
// be fetched (a plain check downloads nothing; --scrub reads each object
// once, for its chunks).
Status Checker::count_payload(const std::vector<std::pair<SegmentId, std::uint64_t>>& list) {
    const SuperState& s = t_.super();
    std::map<SegmentId, std::uint64_t> payload;
    for (const auto& [seg, size] : list) {
        if (!segs_.in_directory(seg)) return Status::ok();
        if (s.written_after(seg)) continue;
        std::uint64_t& bytes = payload[seg];
        HIODSFS_TRY(segs_.scan(seg, false, [&, seg = seg](const SegmentRecord& r) {
            if (s.after_frontier(seg, r.header_offset)) return false;
            if (r.chunk != kLogRecord) bytes += r.location.length;
            return true;
        }));
    }
    payload_ = std::move(payload);
    return Status::ok();
}

}  // namespace hiodsfs::fsck
