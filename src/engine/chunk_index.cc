#include "engine/chunk_index.h"

#include "meta/chunk_table.h"

namespace hiodsfs {

namespace {

std::string_view prefix_of(const Digest& digest) {
    return std::string_view(reinterpret_cast<const char*>(digest.bytes.data()), kFingerprintPrefix);
}

}  // namespace

std::string fingerprint_key(const Digest& digest, ChunkId id) {
    std::string key(prefix_of(digest));
    append_tail_u64(&key, id);
    return key;
}

bool parse_fingerprint_key(std::string_view key, ChunkId* id) {
    // Not the shortest form, or id 0: not a key made here.
    return key.size() > kFingerprintPrefix && read_tail_u64(key.substr(kFingerprintPrefix), id);
}

Status index_candidates(Txn& t, const Digest& digest, std::vector<ChunkId>* out) {
    out->clear();
    const std::string_view prefix = prefix_of(digest);
    Cursor c = t.cursor(Db::kFingerprints);
    for (bool ok = c.seek(prefix); ok && c.key().substr(0, kFingerprintPrefix) == prefix; ok = c.next()) {
        ChunkId cand = 0;
        if (parse_fingerprint_key(c.key(), &cand)) out->push_back(cand);
    }
    return c.status();
}

Status find_indexed_chunk(Txn& t, const Digest& digest, ChunkId* id, ChunkRecord* rec) {
    *id = 0;
    std::vector<ChunkId> candidates;
    HIODSFS_TRY(index_candidates(t, digest, &candidates));
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

Status index_chunk(Txn& t, ChunkId id, const Digest& digest) {
    return t.put(Db::kFingerprints, fingerprint_key(digest, id), std::string_view("", 0));
}

Status unindex_chunk(Txn& t, ChunkId id, const ChunkRecord& rec) {
    if (!(rec.flags & ChunkRecord::kIndexed)) return Status::ok();
    return t.del(Db::kFingerprints, fingerprint_key(rec.digest, id));
}

Status flag_damaged(Txn& t, ChunkId id, ChunkRecord* rec) {
    if (rec->flags & ChunkRecord::kDamaged) return Status::ok();
    rec->flags |= ChunkRecord::kDamaged;
    HIODSFS_TRY(unindex_chunk(t, id, *rec));
    return put_chunk(t, id, *rec);
}

}  // namespace hiodsfs
