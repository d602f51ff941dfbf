// The value of a segment's entry in Db::kSegments: its live payload bytes
// (8 big-endian bytes), and optionally after them what compaction last
// found it settled at, so a remount does not read every sealed segment
// again to learn that none is worth recompressing: a tag byte (1), the
// codec byte of the background compression it was looked at with
// (ChunkRecord::codec_byte), the newest dictionary's id then (4 bytes,
// 0: none) and its live bytes stored weaker than that then (8 bytes).
// A sealed segment's chunks never get weaker under one compression and
// dictionary; they only die, so those weak bytes stay an upper bound.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hiodsfs {

struct SettledMark {
    std::uint8_t codec = 0;        // the background compression looked at with
    std::uint32_t dictionary = 0;  // the newest dictionary then
    std::uint64_t weak = 0;        // live bytes stored weaker than those then
    bool operator==(const SettledMark&) const = default;
};

struct SegmentEntry {
    std::uint64_t live = 0;
    std::optional<SettledMark> settled;
};

std::string encode_segment_entry(const SegmentEntry& e);
// False unless v is a whole entry, with or without a mark.
bool decode_segment_entry(std::string_view v, SegmentEntry* out);

}  // namespace hiodsfs
