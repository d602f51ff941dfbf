// The fingerprint index and the rules of it that the engine and hiodsfs-fsck
// share. An entry is the first 8 bytes of a digest and the id of the chunk
// it names (kept in buckets: meta/fingerprint_index.h), so the full digest is
// stored once, in the chunk record; a lookup checks it there, and chunks
// whose digests share a prefix are told apart. Each fingerprinted chunk
// that is not damaged has an entry, and no two such chunks have the same
// digest.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "meta/fingerprint_index.h"
#include "meta/meta_store.h"
#include "meta/records.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

// The chunks the index lists under digest's prefix: candidates, whose
// records say whether they have the digest.
// slot (if given): keeps the bucket for index_chunk of the same digest.
Status index_candidates(Txn& t, const Digest& digest, std::vector<ChunkId>* out,
                        FingerprintSlot* slot = nullptr);

// The fingerprinted chunk with this digest (*id = 0 if none) and its record.
// Entries naming a missing chunk or another digest are passed over (fsck
// reports them); they never make a write share the wrong bytes.
Status find_indexed_chunk(Txn& t, const Digest& digest, ChunkId* id, ChunkRecord* rec,
                          FingerprintSlot* slot = nullptr);

// Adds chunk id's entry for digest (slot: from its find_indexed_chunk).
Status index_chunk(Txn& t, ChunkId id, const Digest& digest, FingerprintSlot* slot = nullptr);

// Removes chunk id's entry (nothing for a raw chunk, which has no fingerprint).
Status unindex_chunk(Txn& t, ChunkId id, const ChunkRecord& rec);

// Flags chunk id damaged and takes it out of the index, so no write is
// shared onto it again; stores *rec. Ok and nothing written if it already was.
Status flag_damaged(Txn& t, ChunkId id, ChunkRecord* rec);

}  // namespace hiodsfs
