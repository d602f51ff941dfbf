// The records of the metadata databases (see meta_store.h for the keys) and
// their encodings. Formats 2 to 4 store each as variable-length integers, only
// the fields a record needs (docs/architecture.md "Metadata" has the
// layout); decode() refuses a value that is short, has trailing bytes or a
// field out of range, so a damaged record is found, not misread. Format 1's
// fixed structs live in src/fsck/upgrade.cc, which converts them.
// Shared by the engine, hiodsfs-fsck and hiodsfs-stat.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "hiodsfs/compression.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// The version STORE/FORMAT records; 1 had fixed-size records and the full
// SHA-256 as the fingerprint index's key, 2 the numbers in keys as 8
// big-endian bytes (3: meta/keys.h), 3 a chunk record per LMDB record
// (4: meta/chunk_table.h), 4 no encoded (compressed) chunks (5).
constexpr std::uint32_t kFormatVersion = 5;
// Format 4 is format 5 without encoded chunks: this hiodsfs opens it as it
// is, and a read-write open marks it 5 (an older hiodsfs would misread
// the chunks it may then hold). Older formats need hiodsfs-fsck --upgrade.
constexpr std::uint32_t kOldestOpenableFormat = 4;
// Format 6 is format 5 with every chunk sealed: an encrypted store (its
// FORMAT's encryption line). Plain stores stay 5, so an older hiodsfs still
// opens them, and refuses an encrypted one with one line.
constexpr std::uint32_t kEncryptedFormatVersion = 6;

struct InodeRecord {
    std::uint32_t mode = 0;  // the S_IFMT type and the 07777 bits (all encode() keeps)
    std::uint32_t nlink = 0, uid = 0, gid = 0;
    std::uint64_t rdev = 0;
    std::uint64_t size = 0;
    std::uint64_t mapped = 0;  // bytes covered by extents (what st_blocks reports)
    std::uint64_t parent = 0;  // directories: the parent directory
    std::int64_t atime_s = 0, mtime_s = 0, ctime_s = 0;
    std::uint32_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
    bool operator==(const InodeRecord&) const = default;
};

// A file range [start, + length) maps to [chunk_off, + length) of a chunk;
// stored in blocks of a file's extents (meta/extent_map.h).
struct ExtentRecord {
    ChunkId chunk = 0;
    std::uint32_t chunk_off = 0;
    std::uint32_t length = 0;
};

// The segment of a chunk whose bytes were lost (its segment file deleted or
// cut short): hiodsfs-fsck --repair moves the record here, flagged kDamaged,
// so the files that map it stay listed and read EIO there, no segment
// counts it, and the store mounts read-write. No segment file has id 0.
inline constexpr SegmentId kLostSegment = 0;

struct ChunkRecord {
    enum : std::uint8_t {
        kIndexed = 1,  // digest is valid (the chunk was fingerprinted, not raw)
        // Failed its checksum once: its fingerprint entry is gone, so no new
        // write is ever shared onto it (hiodsfs-fsck --repair heals its users).
        kDamaged = 2,
    };
    static constexpr std::uint8_t kKnownFlags = kIndexed | kDamaged;
    // The reference count has 56 bits (format 1's limit, kept), so no
    // number of extents a store can hold makes it wrap.
    static constexpr std::uint64_t kMaxRefs = (std::uint64_t{1} << 56) - 1;
    SegmentId segment = 0;
    std::uint32_t length = 0;  // the chunk's bytes
    // Encoded (compressed): its payload's bytes in the segment; 0: the
    // chunk is stored as it is, `length` bytes.
    std::uint32_t stored = 0;
    // Encoded: how (dictionary tried << 7 | method << 5 | level,
    // codec_byte()), so compaction tells a chunk stored below the background
    // level, or without a dictionary the store now has, without reading it.
    std::uint8_t codec = 0;
    std::uint64_t offset = 0;  // payload offset in the segment
    std::uint64_t ref_count = 0;
    std::uint8_t flags = 0;
    Digest digest;  // stored only while kIndexed is set
    // An encrypted store's: the payload is sealed (chunk/codec.h), stored
    // is its length, and the codec byte may say none (sealed as it is).
    // Every record of an encrypted store is; chunk_table.h keeps it per block.
    bool sealed = false;
    bool encoded() const { return stored != 0; }
    // Stored compressed (not as it is, nor sealed as it is).
    bool compressed() const { return encoded() && codec_compression(codec).method != CompressionMethod::kNone; }
    // Set in a zstd chunk's codec byte when one of the store's dictionaries
    // was tried for it: it is stored with it, or the dictionary did not make
    // it smaller. Compaction then leaves it be (no dictionary round again).
    static constexpr std::uint8_t kDictionaryTried = 0x80;
    static std::uint8_t codec_byte(const Compression& c, bool dictionary_tried = false) {
        return static_cast<std::uint8_t>((dictionary_tried ? kDictionaryTried : 0) |
                                         static_cast<unsigned>(c.method) << 5 | (c.level & 31));
    }
    // How it is stored: none for a chunk stored as it is.
    Compression compression() const { return encoded() ? codec_compression(codec) : Compression{}; }
    static Compression codec_compression(std::uint8_t codec) {
        return Compression{static_cast<CompressionMethod>((codec >> 5) & 3), codec & 31};
    }
    bool dictionary_tried() const { return encoded() && (codec & kDictionaryTried) != 0; }
    // The bytes it takes in its segment (the record header aside).
    std::uint32_t stored_length() const { return encoded() ? stored : length; }
    ChunkLocation location() const { return ChunkLocation{segment, offset, stored_length(), encoded()}; }
    // Where the payload of a chunk of `length` bytes now is.
    void set_location(const ChunkLocation& loc) {
        segment = loc.segment;
        offset = loc.offset;
        stored = loc.encoded ? loc.length : 0;
    }
    bool lost() const { return segment == kLostSegment; }
    // Number of extents that refer to this chunk.
    std::uint64_t refs() const { return ref_count; }
    // n <= kMaxRefs (callers check; chunk_ref reports EOVERFLOW past it).
    void set_refs(std::uint64_t n) { ref_count = n; }
};

struct DirentValue {
    InodeId ino = 0;
    std::uint32_t type = 0;  // S_IFMT bits
};

// Encodings of the records above (inodes: format 4's; the older ones are in
// src/fsck/upgrade.cc). An inode's fields may be followed by a tail: a
// symlink's target, or a regular file's extent block at offset 0
// (meta/extent_map.h, the only code that reads or writes that one); no
// other type has one.
std::string encode(const InodeRecord& r, std::string_view tail = {});
std::string encode(const DirentValue& r);
// False if in is not one whole, well-formed record of the type. target may
// be null; it gets the tail of anything but a regular file.
bool decode(std::string_view in, InodeRecord* out, std::string* target = nullptr);
// The inode's fields and its tail, whatever the type (a view into in).
bool decode_inode_tail(std::string_view in, InodeRecord* out, std::string_view* tail);
bool decode(std::string_view in, DirentValue* out);

// Variable-length unsigned integers (LEB128: seven bits a byte, low first).
void put_varint(std::string* out, std::uint64_t v);
// Reads one at *pos and advances it; false if truncated, over 64 bits or
// not in its shortest form (put_varint writes only that).
bool get_varint(std::string_view in, std::size_t* pos, std::uint64_t* v);
// One varint into a narrower field; false also if it does not fit.
template <typename T>
bool get_varint_as(std::string_view in, std::size_t* pos, T* out) {
    std::uint64_t v = 0;
    if (!get_varint(in, pos, &v) || v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
    return true;
}

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

// The raw bytes of a fixed struct, for records kept as structs (history).
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

// The records with an encoding must not be copied raw.
std::string_view as_bytes(const InodeRecord&) = delete;
std::string_view as_bytes(const ExtentRecord&) = delete;
std::string_view as_bytes(const ChunkRecord&) = delete;
std::string_view as_bytes(const DirentValue&) = delete;
bool from_bytes(std::string_view, InodeRecord*) = delete;
bool from_bytes(std::string_view, ExtentRecord*) = delete;
bool from_bytes(std::string_view, ChunkRecord*) = delete;
bool from_bytes(std::string_view, DirentValue*) = delete;

}  // namespace hiodsfs
