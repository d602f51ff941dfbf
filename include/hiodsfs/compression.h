// How chunks are compressed: the method and level a store's options name
// (compression=, compression_background=). The codec itself is
// src/chunk/codec.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hiodsfs/status.h"

namespace hiodsfs {

enum class CompressionMethod : std::uint8_t { kNone = 0, kLz4 = 1, kZstd = 2 };

struct Compression {
    CompressionMethod method = CompressionMethod::kNone;
    // zstd: 1..19 (ZSTD_maxCLevel's usual range without --ultra); lz4: 0.
    int level = 0;
    bool operator==(const Compression&) const = default;
    bool none() const { return method == CompressionMethod::kNone; }
    // Whether a chunk stored as `stored` is weaker than this (compaction
    // recompresses it then): raw, lz4 against zstd, or a lower zstd level.
    bool stronger_than(CompressionMethod stored, int stored_level) const;
};

inline constexpr int kDefaultZstdLevel = 3;
inline constexpr int kMaxZstdLevel = 19;

// "none", "lz4", "zstd" (level 3) or "zstd:N" (1..19); EINVAL with one line
// naming what is wrong otherwise.
Status parse_compression(std::string_view text, Compression* out);
// The inverse: "none", "lz4", "zstd:3".
std::string compression_name(const Compression& c);

}  // namespace hiodsfs
