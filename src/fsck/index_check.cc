// The fingerprint index, checked against the chunk records: buckets whole,
// each entry inside its bucket's range and naming an existing, intact chunk
// of that fingerprint; every fingerprinted chunk listed, and no two with one
// digest (the lowest id keeps it).
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/chunk_index.h"
#include "fsck/checker.h"
#include "meta/chunk_table.h"
#include "meta/fingerprint_index.h"
#include "meta/keys.h"

namespace hiodsfs::fsck {

Status Checker::check_index() {
    // Buckets: a damaged one (or a key no bucket has) is removed, its
    // chunks added again below; an entry outside its bucket's range
    // (no lookup finds it) or naming a chunk it must not is removed.
    struct Kept {
        std::string key;
        std::vector<FingerprintEntry> entries;
    };
    std::vector<Kept> buckets;
    std::vector<std::string> damaged;  // removed after the walk, which must not change t_
    HIODSFS_TRY(for_each_fingerprint_bucket(t_, [&](const StoredFingerprintBucket& b) -> Status {
        if (!b.value_ok) {
            ++rep_.fingerprints;
            damaged.emplace_back(b.key);
            return Status::ok();
        }
        rep_.fingerprints += b.entries.size();
        buckets.push_back({std::string(b.key), b.entries});
        return Status::ok();
    }));
    for (const std::string& key : damaged)
        HIODSFS_TRY(fix("a damaged fingerprint index bucket; it is removed",
                        [&] { return t_.del(Db::kFingerprints, key); }));
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        Kept& b = buckets[i];
        const bool last = i + 1 == buckets.size();
        const std::uint64_t upper = last ? 0 : get_be64(buckets[i + 1].key);
        std::vector<FingerprintEntry> keep;
        for (const FingerprintEntry& e : b.entries) {
            std::string why;
            auto it = chunks_.find(e.id);
            if (!last && e.prefix >= upper) {
                why = "fingerprint index entry of chunk " + u(e.id) + " lies outside its bucket";
            } else if (it == chunks_.end()) {
                why = "fingerprint index entry names chunk " + u(e.id) + ", which does not exist";
            } else if (it->second.r.flags & ChunkRecord::kDamaged) {
                why = "fingerprint index entry names chunk " + u(e.id) +
                      ", which failed its checksum and must not be shared";
            } else if (!(it->second.r.flags & ChunkRecord::kIndexed) ||
                       fingerprint_prefix(it->second.r.digest) != e.prefix) {
                why = "fingerprint index entry names chunk " + u(e.id) + ", whose fingerprint is another";
            }
            if (why.empty()) {
                keep.push_back(e);
                continue;
            }
            // The bucket is written once, below, without the entries removed.
            HIODSFS_TRY(fix(why + "; the entry is removed", [] { return Status::ok(); }));
        }
        if (!repair_ || keep.size() == b.entries.size()) continue;
        HIODSFS_TRY(keep.empty() ? t_.del(Db::kFingerprints, b.key)
                                 : t_.put(Db::kFingerprints, b.key,
                                          encode_fingerprint_bucket(keep.data(), keep.size())));
    }
    // Every fingerprinted chunk is listed, and no two have one digest:
    // the lowest id keeps it, later ones become not-deduplicated chunks.
    std::vector<ChunkId> ids;
    for (const auto& [id, ci] : chunks_)
        if ((ci.r.flags & ChunkRecord::kIndexed) && !(ci.r.flags & ChunkRecord::kDamaged)) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    std::map<std::array<std::uint8_t, 32>, ChunkId> holder;
    for (ChunkId id : ids) {
        ChunkInfo& ci = chunks_.at(id);
        const std::uint64_t prefix = fingerprint_prefix(ci.r.digest);
        std::vector<ChunkId> under;
        HIODSFS_TRY(fingerprint_ids(t_, prefix, &under));
        const bool listed = std::find(under.begin(), under.end(), id) != under.end();
        auto [it, first] = holder.emplace(ci.r.digest.bytes, id);
        if (!first) {
            HIODSFS_TRY(fix("chunk " + u(id) + " has the fingerprint of chunk " + u(it->second) +
                                "; it is kept as a not-deduplicated chunk",
                            [&, id = id, prefix]() -> Status {
                                HIODSFS_TRY(remove_fingerprint(t_, prefix, id));
                                ci.r.flags &= static_cast<std::uint8_t>(~ChunkRecord::kIndexed);
                                return put_chunk(t_, id, ci.r);
                            }));
        } else if (!listed) {
            HIODSFS_TRY(fix("chunk " + u(id) + " is marked deduplicated but the fingerprint "
                                "index does not list it; the entry is added",
                            [&, id = id] { return index_chunk(t_, id, ci.r.digest); }));
        }
    }
    return Status::ok();
}

}  // namespace hiodsfs::fsck
