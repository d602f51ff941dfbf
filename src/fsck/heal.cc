// Healing bad chunks (what check_segments() found, or the daemon flagged):
// each is flagged damaged so no write shares it again, and its files move
// onto an intact copy of the same content where one is stored; without
// one its files are named, and a chunk whose bytes are gone goes to no
// segment (lost_segments.h).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "chunk/fingerprint.h"
#include "engine/chunk_content.h"
#include "engine/chunk_index.h"
#include "fsck/checker.h"
#include "fsck/lost_segments.h"
#include "meta/chunk_table.h"
#include "meta/extent_map.h"
#include "meta/keys.h"
#include "meta/segment_entry.h"

namespace hiodsfs::fsck {

// Bad chunks: flagged kDamaged and taken out of the index (never shared
// again), and their files moved onto an intact chunk of the same
// content where one is stored (the index names it once the content was
// written again). Without one the bytes are lost: the files are named.
Status Checker::heal(const std::map<ChunkId, std::string>& bad) {
    std::map<ChunkId, ChunkId> onto;  // bad chunk -> intact copy
    for (const auto& [id, why] : bad) {
        ChunkInfo& ci = chunks_.at(id);
        // Flagged whatever else happens, as a failed read in the daemon
        // does: the same content written again is then stored afresh.
        if (mark_ && !(ci.r.flags & ChunkRecord::kDamaged)) {
            HIODSFS_TRY(flag_damaged(t_, id, &ci.r));
            ++flagged_;
        }
        const std::string flag =
            (ci.r.flags & ChunkRecord::kDamaged)
                ? "; it is flagged damaged, so no write shares it again"
                : "; not flagged (this run writes nothing), so a write of "
                  "the same content would still share it: run --repair "
                  "(or --scrub without -n) before writing those files again";
        const std::string what =
            "bad chunk " + u(id) + ": " + why + "; it holds " + chunk_users(id) + flag;
        ChunkId good = 0;
        HIODSFS_TRY(intact_copy(id, ci.r, &good));
        if (good == 0) {
            std::string kept;
            if (repair_ && gone_.count(id)) {
                HIODSFS_TRY(move_to_lost(t_, id, &ci.r));
                kept =
                    "; its record is kept, in no segment: those ranges read EIO until "
                    "the files are written again";
            }
            problem(what + kept +
                        "; no intact copy of its content is stored: write those files "
                        "again from a good copy (a repair after that moves any other file "
                        "that shares the chunk onto the new copy)",
                    false);
            continue;
        }
        HIODSFS_TRY(fix(what, [&, id = id, good = good]() -> Status {
            onto[id] = good;
            return Status::ok();
        }));
    }
    if (onto.empty()) return Status::ok();
    struct Moved {
        InodeId ino;
        std::uint64_t start;
        std::string value;  // the block anew
    };
    std::vector<Moved> moved;
    {
        std::vector<MappedExtent> block;
        HIODSFS_TRY(for_each_extent_block(t_, [&](const StoredBlock& b) {
            block.clear();
            if (!b.key_ok || !decode_extent_block(b.start, b.value, &block)) return Status::ok();
            bool changed = false;
            for (MappedExtent& m : block) {
                auto it = onto.find(m.e.chunk);
                if (it == onto.end()) continue;
                m.e.chunk = it->second;
                changed = true;
            }
            if (changed) moved.push_back(Moved{b.ino, b.start, encode_extent_block(block.data(), block.size())});
            return Status::ok();
        }));
    }
    for (const Moved& m : moved) HIODSFS_TRY(put_extent_block(t_, m.ino, m.start, m.value));
    for (const auto& [bad_id, good_id] : onto) {
        ChunkInfo& b = chunks_.at(bad_id);
        ChunkInfo& g = chunks_.at(good_id);
        g.counted += b.counted;
        g.r.set_refs(g.r.refs() + b.counted);
        HIODSFS_TRY(put_chunk(t_, good_id, g.r));
        auto& counters = t_.super().counters;
        counters.stored_bytes -= std::min<std::uint64_t>(counters.stored_bytes, b.r.stored_length());
        counters.content_bytes -= std::min<std::uint64_t>(counters.content_bytes, b.r.length);
        counters.chunk_count -= std::min<std::uint64_t>(counters.chunk_count, 1);
        // Its segment's live bytes lose it, as when a chunk dies in use.
        const std::string sk = key_u64(b.r.segment);
        std::string_view sv;
        bool found = false;
        HIODSFS_TRY(t_.get(Db::kSegments, sk, &sv, &found));
        if (SegmentEntry e; found && decode_segment_entry(sv, &e)) {
            e.live -= std::min<std::uint64_t>(e.live, b.r.stored_length());
            HIODSFS_TRY(t_.put(Db::kSegments, sk, encode_segment_entry(e)));
        }
        HIODSFS_TRY(drop_chunk(bad_id));
    }
    return Status::ok();
}

// The chunk the index names for r's content, if it is another one that
// reads back intact with that content (0: none).
Status Checker::intact_copy(ChunkId bad, const ChunkRecord& r, ChunkId* out) {
    *out = 0;
    if (!(r.flags & ChunkRecord::kIndexed)) return Status::ok();  // raw: no fingerprint to look up
    std::vector<ChunkId> candidates;
    HIODSFS_TRY(index_candidates(t_, r.digest, &candidates));
    for (ChunkId id : candidates) {
        auto it = chunks_.find(id);
        if (id == bad || it == chunks_.end() || (it->second.r.flags & ChunkRecord::kDamaged) ||
            it->second.r.length != r.length || !(it->second.r.digest == r.digest))
            continue;
        std::vector<std::uint8_t> buf(r.length);
        if (!read_chunk_content(segs_, dicts_, cipher_, id, it->second.r.location(), r.length, buf.data())) continue;
        if (fingerprint(buf) == r.digest) {
            *out = id;
            return Status::ok();
        }
    }
    return Status::ok();
}

}  // namespace hiodsfs::fsck
