// The chunk records, stored in blocks (format 4). Chunk ids are handed out
// in order, so the records of kChunksPerBlock consecutive ids share one
// LMDB record of Db::kChunks: key = enc(id / kChunksPerBlock) (meta/keys.h),
// value = a 16-bit little-endian map of the ids present, then their records
// in id order. A record is a lead byte (ChunkRecord's flags, "follows",
// "same gap", and a reference count up to 14), the segment and payload
// offset (when it follows the previous record's payload in the same
// segment only the gap, and nothing if that gap is the last one stored),
// the length, the rest of a larger reference count and, when
// fingerprinted, the SHA-256. One key, LMDB node and page slot per 16
// chunks instead of per chunk, and 3 bytes of fields for chunks written
// in a row: about 36 bytes a chunk with its digest, against 56 in format 3.
// Format 5: a block that holds an encoded (compressed) chunk starts with
// two zero bytes, and its records say the stored length too (chunk_table.cc).
// Engine and fsck see single records; only this file knows the blocks.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

// The block number of a chunk id, and its key in Db::kChunks.
inline std::uint64_t chunk_block_of(ChunkId id) { return id / kChunksPerBlock; }
std::string chunk_block_key(ChunkId id);

using StoredChunk = std::pair<ChunkId, ChunkRecord>;

// A block's value for its chunks (ids of one block, in order; not empty).
std::string encode_chunk_block(const StoredChunk* chunks, std::size_t n);
// Appends block `block`'s chunks to *out; false if the value is not a
// well-formed block (empty map, truncated, trailing bytes, a field out of
// range or a flag unknown).
bool decode_chunk_block(std::uint64_t block, std::string_view value, std::vector<StoredChunk>* out);

// Chunk id's record. *found is false if it has none, or if its block is
// damaged (hiodsfs-fsck reports the block): either way the chunk cannot be read.
Status get_chunk(Txn& t, ChunkId id, ChunkRecord* out, bool* found);
// Stores chunk id's record, new or changed.
Status put_chunk(Txn& t, ChunkId id, const ChunkRecord& rec);
// Removes chunk id's record (ok if it had none). A damaged block is left as it is.
Status del_chunk(Txn& t, ChunkId id);

// One stored block, as hiodsfs-fsck walks them.
struct StoredChunkBlock {
    std::string_view key;
    bool key_ok = false;  // block is valid only then
    std::uint64_t block = 0;
    bool value_ok = false;  // chunks holds the records only then
    std::vector<StoredChunk> chunks;
};
// Calls fn for every block in key order; stops at the first error fn
// returns. fn must not change t; the key view is valid during the call only.
Status for_each_chunk_block(Txn& t, const std::function<Status(const StoredChunkBlock&)>& fn);

}  // namespace hiodsfs
