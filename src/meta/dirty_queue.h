// The records of the dirty queue (Db::kDirty): file ranges written raw,
// work for the background pass, under key_u64(seq) in the order they were
// queued (value: inode, offset, length, 8 big-endian bytes each); and
// after them, under kSetAsideMark + key_u64(seq), the records the pass set
// aside because it failed on them, with the failure's text after the 24
// bytes. A queue key starts with its length byte (0-8); 0xff starts a key
// an upgrade found damaged (fsck/upgrade.cc); set-aside keys sort between,
// so a walk of the queue from its first key ends where they begin.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hiodsfs {

struct DirtyRange {
    std::uint64_t ino = 0, offset = 0, length = 0;
};

inline constexpr char kSetAsideMark = '\xfe';

std::string encode_dirty(const DirtyRange& r);
// False unless v is exactly one record.
bool decode_dirty(std::string_view v, DirtyRange* out);

// Whether a key of Db::kDirty is past the queue (set aside, or damaged).
bool past_dirty_queue(std::string_view key);
std::string set_aside_key(std::uint64_t seq);
bool parse_set_aside_key(std::string_view key, std::uint64_t* seq);
std::string encode_set_aside(const DirtyRange& r, std::string_view why);
bool decode_set_aside(std::string_view v, DirtyRange* out, std::string_view* why);

}  // namespace hiodsfs
