// The rules of the fingerprint index that the engine and hiodsfs-fsck
// share: an index entry belongs to the chunk it names, so taking a chunk out
// (it died, or it failed its checksum) removes the entry only if the entry
// still names it; a fresh copy of the same content may have taken it over.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <string>

#include "meta/meta_store.h"
#include "meta/records.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

// The index key of a digest.
std::string fingerprint_key(const Digest& digest);

// Removes the index entry of rec's digest if it names chunk id (nothing for
// a raw chunk, which has no fingerprint).
Status unindex_chunk(Txn& t, ChunkId id, const ChunkRecord& rec);

// Flags chunk id damaged and takes it out of the index, so no write is
// shared onto it again; stores *rec. Ok and nothing written if it already was.
Status flag_damaged(Txn& t, ChunkId id, ChunkRecord* rec);

}  // namespace hiodsfs
