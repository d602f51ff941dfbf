#include "store/segment_scan.h"

#include <algorithm>
#include <cstring>

#include "chunk/fingerprint.h"
#include "common/little_endian.h"
#include "store/segment_format.h"

namespace hiodsfs {
namespace {

constexpr std::size_t kScanBlock = 1u << 20;

}  // namespace

Status ScanReader::read(std::uint64_t pos, std::size_t n, char* dst) {
    while (n > 0) {
        if (pos >= file_end_) {
            std::memcpy(dst, tail_.data() + (pos - file_end_), n);
            return Status::ok();
        }
        const std::size_t part =
            static_cast<std::size_t>(std::min<std::uint64_t>(n, file_end_ - pos));
        if (pos < block_off_ || pos + part > block_off_ + block_.size()) {
            if (part >= kScanBlock) {
                // Larger than a block: straight into the caller's memory.
                HIODSFS_TRY(pread_exact(dst, part, pos));
                pos += part;
                dst += part;
                n -= part;
                continue;
            }
            const std::size_t len =
                static_cast<std::size_t>(std::min<std::uint64_t>(kScanBlock, file_end_ - pos));
            block_.resize(len);
            block_off_ = pos;
            Status st = pread_exact(block_.data(), len, pos);
            if (!st) {
                block_.clear();
                return st;
            }
        }
        std::memcpy(dst, block_.data() + (pos - block_off_), part);
        pos += part;
        dst += part;
        n -= part;
    }
    return Status::ok();
}

Status ScanReader::pread_exact(char* dst, std::size_t n, std::uint64_t pos) {
    std::size_t got = 0;
    HIODSFS_TRY(file_->pread(dst, n, pos, &got));
    if (got != n) {
        return Status::error(EIO, "segment shrank while being read: wanted " + std::to_string(n) +
                                      " bytes at offset " + std::to_string(pos) + ", got " +
                                      std::to_string(got));
    }
    return Status::ok();
}

Status scan_tail(ScanReader& r, TailScan* out) {
    const std::uint64_t end = r.end();
    std::uint64_t pos = 0;
    char hdr[SegmentStore::kHeaderBytes];
    std::vector<char> payload;
    while (pos + SegmentStore::kHeaderBytes <= end) {
        HIODSFS_TRY(r.read(pos, sizeof hdr, hdr));
        if (!RecordHeader::intact(hdr)) break;
        const RecordHeader h = RecordHeader::decode(hdr);
        if (h.length > end - pos - SegmentStore::kHeaderBytes) break;  // torn record
        payload.resize(h.length);
        HIODSFS_TRY(r.read(pos + SegmentStore::kHeaderBytes, h.length, payload.data()));
        pos += SegmentStore::kHeaderBytes + h.length;
        if (crc32c(payload.data(), h.length) == h.payload_crc) out->last_good = pos;
    }
    out->chain_end = pos;

    // A crash leaves garbage only at the end. An intact header after the
    // break means damage in the middle, and the bytes after it must be kept.
    constexpr std::size_t kOverlap = SegmentStore::kHeaderBytes - 1;
    std::vector<char> block;
    for (std::uint64_t start = pos + 1; start + SegmentStore::kHeaderBytes <= end;) {
        const std::size_t len =
            static_cast<std::size_t>(std::min<std::uint64_t>(kScanBlock, end - start));
        block.resize(len);
        HIODSFS_TRY(r.read(start, len, block.data()));
        const char* p = block.data();
        const char* stop = block.data() + len;
        while (stop - p >= static_cast<std::ptrdiff_t>(SegmentStore::kHeaderBytes)) {
            // Either magic: their shared last three bytes, one byte on.
            const void* hit = memmem(p + 1, static_cast<std::size_t>(stop - p - 1), kMagicTail, sizeof kMagicTail);
            if (hit == nullptr) break;
            p = static_cast<const char*>(hit) - 1;
            if (stop - p < static_cast<std::ptrdiff_t>(SegmentStore::kHeaderBytes)) break;
            if (RecordHeader::intact(p)) {
                out->intact_after_break = true;
                return Status::ok();
            }
            ++p;
        }
        if (start + len >= end) break;
        start += len - kOverlap;  // a header may straddle two blocks
    }
    return Status::ok();
}

Status walk_records(ScanReader& r, SegmentId segment, bool verify_payload,
                    const std::function<bool(const SegmentRecord&)>& fn) {
    const std::uint64_t end = r.end();
    std::uint64_t pos = 0;
    char hdr[SegmentStore::kHeaderBytes];
    std::vector<char> payload;
    while (pos + SegmentStore::kHeaderBytes <= end) {
        HIODSFS_TRY(r.read(pos, SegmentStore::kHeaderBytes, hdr));
        if (!RecordHeader::intact(hdr)) break;
        const RecordHeader h = RecordHeader::decode(hdr);
        if (h.length > end - pos - SegmentStore::kHeaderBytes) break;
        SegmentRecord rec;
        rec.segment = segment;
        rec.header_offset = pos;
        rec.location = ChunkLocation{segment, pos + SegmentStore::kHeaderBytes, h.length, h.encoded()};
        rec.chunk = h.chunk;
        if (verify_payload) {
            payload.resize(h.length);
            HIODSFS_TRY(r.read(pos + SegmentStore::kHeaderBytes, h.length, payload.data()));
            rec.payload_ok = crc32c(payload.data(), h.length) == h.payload_crc;
        }
        if (!fn(rec)) break;
        pos += SegmentStore::kHeaderBytes + h.length;
    }
    return Status::ok();
}

}  // namespace hiodsfs
