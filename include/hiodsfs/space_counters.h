// What the store holds, in bytes and counts: kept by the engine, committed
// with the metadata (meta/meta_store.cc stores them field by field, so this
// struct's layout is not the store's format), shown by hiodsfs-stat.
#pragma once

#include <cstdint>

namespace hiodsfs {

struct SpaceCounters {
    std::uint64_t logical_bytes = 0;     // bytes mapped by file extents (holes excluded)
    std::uint64_t stored_bytes = 0;      // payload bytes of live chunks (compressed ones as stored)
    std::uint64_t chunk_count = 0;       // live chunks
    std::uint64_t dead_bytes = 0;        // payload bytes of chunks whose last reference went
    std::uint64_t inode_count = 0;
    std::uint64_t dedup_hits = 0;        // chunks written that were already stored
    std::uint64_t cloned_bytes = 0;      // bytes shared through clone_range
    std::uint64_t backlog_records = 0;   // dirty records waiting for the background pass
    std::uint64_t backlog_bytes = 0;     // bytes those records cover
    std::uint64_t raw_bytes = 0;         // payload bytes of live chunks not yet deduplicated
    std::uint64_t disk_bytes = 0;        // segment files on disk (not a counter: measured)
    std::uint64_t file_count = 0;        // regular files (inodes; hard links count once)
    // The bytes of the live chunks as written, before compression:
    // logical / content is the deduplication's ratio, content / stored the
    // compression's.
    std::uint64_t content_bytes = 0;
};

}  // namespace hiodsfs
