// The Checker's second stage, chunks and file maps: chunk records loaded,
// every extent checked to lie inside a chunk that exists (a record that is
// gone is made again from its segment record), and reference counts set to
// the extents that refer to each chunk; then the fingerprint index and the
// segments.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chunk/fingerprint.h"
#include "chunk/codec.h"
#include "engine/chunk_content.h"
#include "engine/chunk_index.h"
#include "fsck/checker.h"
#include "meta/chunk_table.h"
#include "meta/extent_map.h"

namespace hiodsfs::fsck {

Status Checker::load_chunks() {
    std::vector<std::string> damaged;
    HIODSFS_TRY(for_each_chunk_block(t_, [&](const StoredChunkBlock& b) -> Status {
        if (!b.value_ok) {
            // The records of its ids are lost: the files that map them
            // are named below, as reading a missing chunk.
            damaged.emplace_back(b.key);
            if (b.key_ok)
                for (ChunkId id = b.block * kChunksPerBlock; id < (b.block + 1) * kChunksPerBlock; ++id)
                    damaged_chunks_.insert(id);
            return Status::ok();
        }
        for (const auto& [id, r] : b.chunks) {
            ChunkInfo ci;
            ci.r = r;
            max_chunk_ = std::max(max_chunk_, id);
            chunks_.emplace(id, ci);
        }
        return Status::ok();
    }));
    for (const std::string& key : damaged)
        HIODSFS_TRY(fix("chunk record block with a damaged key or value",
                        [&] { return t_.del(Db::kChunks, key); }));
    rep_.chunks = chunks_.size();
    return Status::ok();
}

Status Checker::check_extents() {
    std::map<ChunkId, std::vector<Use>> missing;
    InodeId prev_ino = 0;
    std::uint64_t prev_end = 0;
    std::vector<MappedExtent> block;
    HIODSFS_TRY(for_each_extent_block(t_, [&](const StoredBlock& b) {
        block.clear();
        if (!b.key_ok || !decode_extent_block(b.start, b.value, &block)) {
            ++rep_.extents;
            problem(b.key_ok ? "damaged extent map block of " + path_of(b.ino) + " from byte " + u(b.start)
                             : "extent map block with a damaged key",
                    false);
            return Status::ok();
        }
        for (const MappedExtent& m : block) {
            ++rep_.extents;
            const ExtentRecord& e = m.e;
            Use use{b.ino, m.start, e.length};
            if (use.ino == prev_ino && use.start < prev_end)
                problem("extents overlap in " + range(use), false);
            prev_ino = use.ino;
            prev_end = use.start + use.length;
            auto it = chunks_.find(e.chunk);
            if (it == chunks_.end()) {
                missing[e.chunk].push_back(use);
                continue;
            }
            it->second.counted += 1;
            if (std::uint64_t(e.chunk_off) + e.length > it->second.r.length) {
                problem(range(use) + " reach past the end of chunk " + u(e.chunk) + " (offset " +
                            u(e.chunk_off) + " + " + u(e.length) + " > " +
                            u(it->second.r.length) + " bytes)",
                        false);
            }
            users_of(e.chunk, use);
        }
        return Status::ok();
    }));
    if (!missing.empty()) HIODSFS_TRY(recover_chunks(missing));
    return Status::ok();
}

void Checker::users_of(ChunkId id, const Use& use) {
    auto& v = uses_[id];
    if (v.size() < 8) v.push_back(use);
}

// Chunk records that are gone are made again from the segment records,
// which name their chunk; what is not found there is lost.
Status Checker::recover_chunks(std::map<ChunkId, std::vector<Use>>& missing) {
    std::map<ChunkId, SegmentRecord> found;
    if (repair_) {
        std::vector<std::pair<SegmentId, std::uint64_t>> segs;
        HIODSFS_TRY(segs_.list_segments(&segs));
        for (const auto& [seg, size] : segs) {
            HIODSFS_TRY(segs_.scan(seg, true, [&](const SegmentRecord& r) {
                if (r.payload_ok && missing.count(r.chunk) != 0) found[r.chunk] = r;
                return true;
            }));
        }
    }
    for (auto& [id, uses] : missing) {
        std::string files;
        for (std::size_t i = 0; i < uses.size() && i < 4; ++i)
            files += (i ? ", " : "") + range(uses[i]);
        if (uses.size() > 4) files += " and " + u(uses.size() - 4) + " more";
        std::string what = "chunk " + u(id) + " has no record (" +
                           (damaged_chunks_.count(id) ? "damaged" : "missing") +
                           "); it holds " + files;
        auto it = found.find(id);
        HIODSFS_TRY(fix(what, [&, id = id]() -> Status {
            if (it == found.end())
                return Status::error(EUCLEAN, "no intact copy in the segments: data lost");
            const SegmentRecord& r = it->second;
            ChunkInfo ci;
            ci.r.length = r.location.length;
            if (r.location.encoded) {
                // An encoded record's prefix says how long the chunk is.
                std::vector<char> payload(r.location.length);
                HIODSFS_TRY(segs_.read(r.location, id, payload.data()));
                CodecPrefix prefix;
                if (!read_codec_prefix(payload.data(), r.location.length, &prefix))
                    return Status::error(EUCLEAN, "its encoded record cannot be read: data lost");
                ci.r.length = prefix.raw_length;
                ci.r.codec = ChunkRecord::codec_byte(Compression{prefix.method, prefix.level}, prefix.dictionary != 0);
            }
            ci.r.set_location(r.location);
            ci.r.set_refs(uses.size());
            ci.counted = uses.size();
            // Indexed again unless another chunk is indexed with its content.
            std::vector<std::uint8_t> buf(ci.r.length);
            HIODSFS_TRY(read_chunk_content(segs_, dicts_, cipher_, id, r.location, ci.r.length, buf.data()));
            Digest d = fingerprint(buf);
            ChunkId other = 0;
            ChunkRecord other_rec;
            HIODSFS_TRY(find_indexed_chunk(t_, d, &other, &other_rec));
            if (other == 0) {
                ci.r.flags = ChunkRecord::kIndexed;
                ci.r.digest = d;
                HIODSFS_TRY(index_chunk(t_, id, d));
            }
            HIODSFS_TRY(put_chunk(t_, id, ci.r));
            chunks_.emplace(id, ci);
            max_chunk_ = std::max(max_chunk_, id);
            for (const Use& use : uses) users_of(id, use);
            return Status::ok();
        }));
    }
    return Status::ok();
}

Status Checker::drop_chunk(ChunkId id) {
    const ChunkRecord& r = chunks_.at(id).r;
    HIODSFS_TRY(del_chunk(t_, id));
    HIODSFS_TRY(unindex_chunk(t_, id, r));
    if (!r.lost()) t_.super().counters.dead_bytes += r.stored_length();
    chunks_.erase(id);
    return Status::ok();
}

Status Checker::check_chunks() {
    // Reference counts.
    std::vector<ChunkId> ids;
    ids.reserve(chunks_.size());
    for (const auto& [id, ci] : chunks_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (ChunkId id : ids) {
        ChunkInfo& ci = chunks_.at(id);
        if (ci.counted == 0) {
            HIODSFS_TRY(fix("chunk " + u(id) + " (" + u(ci.r.length) +
                                " bytes) is referenced by no file; its bytes become dead space",
                            [&, id = id] { return drop_chunk(id); }));
        } else if (ci.r.refs() != ci.counted) {
            HIODSFS_TRY(fix("chunk " + u(id) + " has reference count " + u(ci.r.refs()) + ", but " +
                                u(ci.counted) + " extents refer to it",
                            [&, id = id] {
                                ci.r.set_refs(ci.counted);
                                return put_chunk(t_, id, ci.r);
                            }));
        }
    }
    HIODSFS_TRY(check_index());
    HIODSFS_TRY(check_segments());
    return Status::ok();
}

}  // namespace hiodsfs::fsck
