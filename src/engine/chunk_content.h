// A chunk's bytes from its segment record, whatever way the record holds
// them: read straight into the caller's buffer when stored as is, or read
// and decoded (chunk/codec.h) when encoded. The read path, the background
// pass and hiodsfs-fsck all read chunks through here, so a damaged
// encoding is found and reported the same way as a failed checksum.
// Thread-safety: reentrant (a scratch buffer per thread).
#pragma once

#include <cstdint>

#include "chunk/codec.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// Reads chunk id, of `length` bytes, from loc into out (room for length
// bytes). EIO when the record fails its checks or its encoding does not
// decode to exactly `length` bytes; *damaged (if given) as
// SegmentStore::read says it, and true for a bad encoding. dicts: the
// store's dictionaries (may be null when it has none); cipher: an
// encrypted store's (null for a plain one), which opens sealed payloads.
Status read_chunk_content(SegmentStore& segs, const DictionarySet* dicts, const ChunkCipher* cipher, ChunkId id,
                          const ChunkLocation& loc, std::uint32_t length, void* out, bool* damaged = nullptr);

// Decodes a payload already read (the read path reads runs of records in
// one call): as read_chunk_content after its read.
Status decode_chunk_content(const DictionarySet* dicts, const ChunkCipher* cipher, ChunkId id,
                            const ChunkLocation& loc, const char* payload, std::uint32_t length, void* out);

}  // namespace hiodsfs
