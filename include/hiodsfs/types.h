// Small named types for things that are easy to confuse: inode numbers,
// chunk ids, segment ids, digests, and a chunk's location on disk.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace hiodsfs {

using InodeId = std::uint64_t;    // 1 is the root directory
using ChunkId = std::uint64_t;    // 0 is never a valid chunk
using SegmentId = std::uint32_t;  // segments/<id as 8 hex digits>.seg

constexpr InodeId kRootInode = 1;

struct Digest {
    std::array<std::uint8_t, 32> bytes{};
    bool operator==(const Digest&) const = default;
    std::string hex() const;
};

// Where a chunk's bytes live: payload offset and length inside a segment,
// and how they are stored there: as they are, or encoded (compressed; the
// payload's prefix says how, chunk/codec.h).
struct ChunkLocation {
    SegmentId segment = 0;
    std::uint64_t offset = 0;  // of the payload, after the record header
    std::uint32_t length = 0;  // payload bytes
    bool encoded = false;
    bool operator==(const ChunkLocation&) const = default;
};

}  // namespace hiodsfs
