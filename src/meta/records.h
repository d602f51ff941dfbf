// On-disk value layouts of the metadata databases (see meta_store.h for the
// keys). Values are the raw bytes of these trivially copyable structs; the
// store's format version guards the layout (little-endian 64-bit hosts).
// Shared by the engine, hiodsfs-fsck and hiodsfs-stat.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "hiodsfs/types.h"

namespace hiodsfs {

constexpr std::uint32_t kFormatVersion = 1;

struct InodeRecord {
    std::uint32_t mode = 0, nlink = 0, uid = 0, gid = 0;
    std::uint64_t rdev = 0;
    std::uint64_t size = 0;
    std::uint64_t mapped = 0;  // bytes covered by extents (what st_blocks reports)
    std::uint64_t parent = 0;  // directories: the parent directory
    std::int64_t atime_s = 0, mtime_s = 0, ctime_s = 0;
    std::uint32_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
    std::uint32_t reserved = 0;
    // A symlink's target follows the struct in the stored value.
};

// A file range [key offset, + length) maps to [chunk_off, + length) of a chunk.
struct ExtentRecord {
    ChunkId chunk = 0;
    std::uint32_t chunk_off = 0;
    std::uint32_t length = 0;
};

struct ChunkRecord {
    enum : std::uint8_t {
        kIndexed = 1,  // digest is valid (the chunk was fingerprinted, not raw)
        // Failed its checksum once: its fingerprint entry is gone, so no new
        // write is ever shared onto it (hiodsfs-fsck --repair heals its users).
        kDamaged = 2,
    };
    // The reference count has 56 bits: the low 32 in refs_low and the high
    // 24 in refs_high (bytes that were zero padding, so older records read
    // the same), so no number of extents a store can hold makes it wrap.
    static constexpr std::uint64_t kMaxRefs = (std::uint64_t{1} << 56) - 1;
    SegmentId segment = 0;
    std::uint32_t length = 0;
    std::uint64_t offset = 0;  // payload offset in the segment
    std::uint32_t refs_low = 0;
    std::uint8_t flags = 0;
    std::uint8_t refs_high[3] = {};
    Digest digest;
    ChunkLocation location() const { return ChunkLocation{segment, offset, length}; }
    // Number of extents that refer to this chunk.
    std::uint64_t refs() const {
        return refs_low | std::uint64_t{refs_high[0]} << 32 | std::uint64_t{refs_high[1]} << 40 |
               std::uint64_t{refs_high[2]} << 48;
    }
    // n <= kMaxRefs (callers check; chunk_ref reports EOVERFLOW past it).
    void set_refs(std::uint64_t n) {
        refs_low = static_cast<std::uint32_t>(n);
        for (int i = 0; i < 3; ++i) refs_high[i] = static_cast<std::uint8_t>(n >> (32 + 8 * i));
    }
};

struct DirentValue {
    InodeId ino = 0;
    std::uint32_t type = 0;  // S_IFMT bits
    std::uint32_t reserved = 0;
};

// Db::kHistory: key = big-endian wall-clock time (ns since the epoch), value
// = one sample of the daemon's activity, written by the control loop (see
// include/hiodsfs/history.h) and shown by hiodsfs-stat --history.
struct HistoryRecord {
    std::uint8_t mode = 0;  // 0 inline, 1 deferred (at the end of the period)
    std::uint8_t reserved[7] = {};
    std::uint64_t period_ns = 0;  // the period the rates are averaged over
    double ops_per_s = 0, bytes_per_s = 0, background_bytes_per_s = 0;
    std::uint64_t backlog_records = 0, backlog_bytes = 0;
    std::uint64_t logical_bytes = 0, stored_bytes = 0;
};

template <typename T>
std::string_view as_bytes(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return std::string_view(reinterpret_cast<const char*>(&v), sizeof(T));
}

// False if the stored value is too short to hold a T.
template <typename T>
bool from_bytes(std::string_view in, T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in.size() < sizeof(T)) return false;
    std::memcpy(out, in.data(), sizeof(T));
    return true;
}

}  // namespace hiodsfs
