#include "engine/chunk_index.h"

namespace hiodsfs {

std::string fingerprint_key(const Digest& digest) {
    return std::string(reinterpret_cast<const char*>(digest.bytes.data()), digest.bytes.size());
}

Status unindex_chunk(Txn& t, ChunkId id, const ChunkRecord& rec) {
    if (!(rec.flags & ChunkRecord::kIndexed)) return Status::ok();
    const std::string key = fingerprint_key(rec.digest);
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kFingerprints, key, &v, &found));
    if (found && v.size() == 8 && get_be64(v) == id) HIODSFS_TRY(t.del(Db::kFingerprints, key));
    return Status::ok();
}

Status flag_damaged(Txn& t, ChunkId id, ChunkRecord* rec) {
    if (rec->flags & ChunkRecord::kDamaged) return Status::ok();
    rec->flags |= ChunkRecord::kDamaged;
    HIODSFS_TRY(unindex_chunk(t, id, *rec));
    return t.put(Db::kChunks, key_u64(id), as_bytes(*rec));
}

}  // namespace hiodsfs
