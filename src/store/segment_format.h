// The on-disk format of a segment directory, without I/O: the names of its
// files and the codec of a record's header, with the checks every record
// read back must pass before its bytes are used. The record layout is in
// hiodsfs/segment_store.h.
// Thread-safety: functions of their arguments only.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

#include "chunk/fingerprint.h"
#include "common/little_endian.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

struct RecordHeader {
    std::uint32_t magic = 0;
    std::uint32_t length = 0;
    ChunkId chunk = 0;
    std::uint32_t payload_crc = 0;
    std::uint32_t header_crc = 0;

    static RecordHeader decode(const char* p) {
        return RecordHeader{get_le32(p), get_le32(p + 4), get_le64(p + 8), get_le32(p + 16),
                            get_le32(p + 20)};
    }
    static bool known_magic(std::uint32_t m) {
        return m == SegmentStore::kRecordMagic || m == SegmentStore::kEncodedRecordMagic;
    }
    // The magic and the header's own checksum are right, so its fields can be trusted.
    static bool intact(const char* p) { return known_magic(get_le32(p)) && get_le32(p + 20) == crc32c(p, 20); }
    bool encoded() const { return magic == SegmentStore::kEncodedRecordMagic; }
};

// The magics' last three bytes, which both share: a scan for records
// looks for them.
inline constexpr char kMagicTail[3] = {0x53, 0x44, 0x48};
static_assert((SegmentStore::kRecordMagic >> 8) == (SegmentStore::kEncodedRecordMagic >> 8));

inline void encode_record_header(char* p, ChunkId chunk, std::uint32_t len, std::uint32_t payload_crc,
                                 bool encoded) {
    put_le32(p, encoded ? SegmentStore::kEncodedRecordMagic : SegmentStore::kRecordMagic);
    put_le32(p + 4, len);
    put_le64(p + 8, chunk);
    put_le32(p + 16, payload_crc);
    put_le32(p + 20, crc32c(p, 20));
}

// "00000001.seg": the file of segment 1.
std::string segment_file_name(SegmentId id);
// "00000001.fetch": segment 1 while a fetch from the tier writes it.
std::string fetch_file_name(SegmentId id);

// "00000001.seg" -> 1; anything else is not a segment. Ids start at 1, so
// 0 can mean "no active segment" (read-only stores).
bool parse_segment_name(const std::string& name, SegmentId* id);

// Checks a record's header against what the caller expects: EIO with the
// file, offset and the check that failed. `where` names the record for an
// error message; it is only called on a failure, so the hot path builds no
// strings.
template <typename Where>
Status check_header_fields(const char* hdr, const ChunkLocation& loc, ChunkId chunk,
                           const Where& where) {
    const RecordHeader h = RecordHeader::decode(hdr);
    auto fail = [&](const std::string& what) { return Status::error(EIO, where() + ": " + what); };
    if (!RecordHeader::known_magic(h.magic)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "bad record magic 0x%08" PRIx32, h.magic);
        return fail(buf);
    }
    if (h.header_crc != crc32c(hdr, 20)) return fail("record header checksum mismatch");
    if (h.length != loc.length) {
        return fail("record length is " + std::to_string(h.length) + ", location says " +
                    std::to_string(loc.length));
    }
    if (h.chunk != chunk) {
        return fail("record holds chunk " + std::to_string(h.chunk) + ", expected chunk " +
                    std::to_string(chunk));
    }
    if (h.encoded() != loc.encoded)
        return fail(h.encoded() ? "record is encoded, the location says stored as is"
                                : "record is stored as is, the location says encoded");
    return Status::ok();
}

// Checks a record read back against what the caller expects. Never lets a
// mismatch through: EIO with the file, offset and the check that failed.
template <typename Where>
Status check_record(const char* hdr, const char* payload, const ChunkLocation& loc, ChunkId chunk,
                    const Where& where) {
    HIODSFS_TRY(check_header_fields(hdr, loc, chunk, where));
    if (RecordHeader::decode(hdr).payload_crc != crc32c(payload, loc.length)) {
        return Status::error(EIO, where() + ": payload checksum mismatch (chunk " +
                                      std::to_string(chunk) + ", " + std::to_string(loc.length) +
                                      " bytes)");
    }
    return Status::ok();
}

}  // namespace hiodsfs
