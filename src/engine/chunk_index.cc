#include "engine/chunk_index.h"

#include "meta/chunk_table.h"
#include "meta/fingerprint_index.h"

namespace hiodsfs {

Status index_candidates(Txn& t, const Digest& digest, std::vector<ChunkId>* out, FingerprintSlot* slot) {
    return fingerprint_ids(t, fingerprint_prefix(digest), out, slot);
}

Status find_indexed_chunk(Txn& t, const Digest& digest, ChunkId* id, ChunkRecord* rec, FingerprintSlot* slot) {
    *id = 0;
    std::vector<ChunkId> candidates;
    HIODSFS_TRY(index_candidates(t, digest, &candidates, slot));
    for (ChunkId cand : candidates) {
        bool found = false;
        ChunkRecord r;
        HIODSFS_TRY(get_chunk(t, cand, &r, &found));
        if (!found) continue;
        if ((r.flags & ChunkRecord::kIndexed) && !(r.flags & ChunkRecord::kDamaged) && r.digest == digest) {
            *id = cand;
            *rec = r;
            return Status::ok();
        }
    }
    return Status::ok();
}

Status index_chunk(Txn& t, ChunkId id, const Digest& digest, FingerprintSlot* slot) {
    return add_fingerprint(t, fingerprint_prefix(digest), id, slot);
}

Status unindex_chunk(Txn& t, ChunkId id, const ChunkRecord& rec) {
    if (!(rec.flags & ChunkRecord::kIndexed)) return Status::ok();
    return remove_fingerprint(t, fingerprint_prefix(rec.digest), id);
}

Status flag_damaged(Txn& t, ChunkId id, ChunkRecord* rec) {
    if (rec->flags & ChunkRecord::kDamaged) return Status::ok();
    rec->flags |= ChunkRecord::kDamaged;
    HIODSFS_TRY(unindex_chunk(t, id, *rec));
    return put_chunk(t, id, *rec);
}

}  // namespace hiodsfs
