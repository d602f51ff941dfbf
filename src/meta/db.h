// The metadata's named databases, and the sizes of the blocks two of them
// keep their records in. Apart from meta_store.h so that the journal's
// record codec (meta/journal.h), which names databases, and MetaStore's
// page estimate, which counts blocks, need neither the store nor the
// tables built on it.
// Thread-safety: constants.
#pragma once

#include <cstddef>

#include "hiodsfs/types.h"

namespace hiodsfs {

// Named databases. Numbers in keys are encoded as meta/keys.h says, so they
// sort numerically and an inode's keys share an exact prefix.
enum class Db : int {
    kSuper = 0,     // "state" -> SuperState
    kInodes,        // ino -> InodeRecord
    kDirents,       // parent ino + name -> child ino, type
    kExtents,       // ino + file offset -> a block of extents (meta/extent_map.h)
    kChunks,        // chunk id -> ChunkRecord
    kFingerprints,  // buckets: lowest digest prefix -> (prefix, chunk id)... (meta/fingerprint_index.h)
    kDirty,         // sequence -> dirty record (work for the background pass)
    kXattrs,        // ino + name -> value
    kOrphans,       // ino -> "" (unlinked while still open; freed on next open)
    kSegments,      // segment id -> live payload bytes, and a settled mark (meta/segment_entry.h)
    kHistory,       // time (8 bytes, big-endian) -> sample (for hiodsfs-stat)
    kCount
};

// Chunk records per LMDB record of Db::kChunks (meta/chunk_table.h).
constexpr ChunkId kChunksPerBlock = 16;

// Entries per bucket of Db::kFingerprints at most (meta/fingerprint_index.h).
constexpr std::size_t kFingerprintBucketMax = 32;

}  // namespace hiodsfs
