#include "fsck/lost_segments.h"

#include <algorithm>
#include <cerrno>
#include <limits>

#include "engine/chunk_index.h"
#include "hiodsfs/segment_store.h"
#include "meta/chunk_table.h"
#include "meta/keys.h"

namespace hiodsfs {

bool bytes_gone(const ChunkLocation& loc, const SegmentSizes& sizes) {
    auto it = sizes.find(loc.segment);
    return it == sizes.end() || loc.offset + loc.length > it->second;
}

Status move_to_lost(Txn& t, ChunkId id, ChunkRecord* rec) {
    HIODSFS_TRY(flag_damaged(t, id, rec));
    rec->segment = kLostSegment;
    rec->offset = 0;
    return put_chunk(t, id, *rec);
}

std::string frontier_refusal(const SuperState& s, const SegmentSizes& sizes) {
    if (s.frontier_segment == 0) return "";  // not recorded (an older store): nothing to hold to
    const std::string where = "the last commit refers to " + std::to_string(s.frontier_offset) +
                              " bytes of segment " + std::to_string(s.frontier_segment);
    auto it = sizes.find(static_cast<SegmentId>(s.frontier_segment));
    if (it == sizes.end()) return where + ", which is missing";
    if (it->second < s.frontier_offset) return where + ", which has " + std::to_string(it->second);
    return "";
}

Status restart_after_loss(Env* env, const std::string& segments_dir, const SegmentSizes& sizes,
                          SegmentId in_records, Txn& t) {
    std::uint64_t newest = std::max<std::uint64_t>(t.super().frontier_segment, in_records);
    if (!sizes.empty()) newest = std::max<std::uint64_t>(newest, sizes.rbegin()->first);
    {
        Cursor c = t.cursor(Db::kSegments);
        std::uint64_t seg = 0;
        if (c.last() && parse_key_u64(c.key(), &seg)) newest = std::max(newest, seg);
        HIODSFS_TRY(c.status());
    }
    if (newest >= std::numeric_limits<SegmentId>::max())
        return Status::error(
            ENOSPC, "segment ids are exhausted: no segment can follow " + std::to_string(newest));
    const auto fresh = static_cast<SegmentId>(newest + 1);
    // Durable before the commit that puts the frontier in it: a read-write
    // open refuses a frontier whose segment is not there.
    HIODSFS_TRY(SegmentStore::create_empty(env, segments_dir, fresh));
    HIODSFS_TRY(t.put(Db::kSegments, key_u64(fresh), be64(0)));
    t.super().frontier_segment = fresh;
    t.super().frontier_offset = 0;
    return Status::ok();
}

}  // namespace hiodsfs
