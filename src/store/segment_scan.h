// Reading a segment front to back: a reader of large blocks, the tail scan
// that open() runs on the newest segment to tell a torn tail (a crash cut
// the last record) from damage in the middle, and the walk of its records
// that SegmentStore::scan() runs.
// Thread-safety: a ScanReader is used by one thread at a time; the
// functions keep no state of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// Sequential reads of one segment in large blocks: the bytes [0, file_end)
// come from the file, and [file_end, file_end + tail.size()) from `tail`
// (a copy of the write buffer, when scanning the active segment).
class ScanReader {
public:
    ScanReader(File* file, std::uint64_t file_end, std::vector<char> tail = {})
        : file_(file), file_end_(file_end), tail_(std::move(tail)) {}

    std::uint64_t end() const { return file_end_ + tail_.size(); }

    // Reads exactly n bytes at pos; the caller keeps pos + n <= end().
    Status read(std::uint64_t pos, std::size_t n, char* dst);

private:
    Status pread_exact(char* dst, std::size_t n, std::uint64_t pos);

    File* file_;
    std::uint64_t file_end_;
    std::vector<char> tail_;
    std::vector<char> block_;
    std::uint64_t block_off_ = 0;
};

// Where a segment's valid data ends, found by walking its chain of records.
struct TailScan {
    std::uint64_t chain_end = 0;      // first byte not covered by an intact header chain
    std::uint64_t last_good = 0;      // end of the last record whose payload checks too
    bool intact_after_break = false;  // an intact header lies beyond chain_end
};

Status scan_tail(ScanReader& r, TailScan* out);

// Calls fn for each intact record of `segment` (read through r) in order;
// stops at a torn or corrupt header, or when fn returns false.
// verify_payload also checks each payload's crc32c.
Status walk_records(ScanReader& r, SegmentId segment, bool verify_payload,
                    const std::function<bool(const SegmentRecord&)>& fn);

}  // namespace hiodsfs
