// PendingDirty: the dirty-queue records this process queued and the
// background pass has not taken yet, by file and range. A deferred write
// whose range one of them covers needs no record of its own: that
// record's sweep re-chunks the range as it is when the sweep runs, new
// bytes included. So rewriting the same blocks again and again, as a
// database or a VM image does, adds no backlog beyond the blocks
// themselves, like a dirty page written again in a page cache.
//
// Why it is safe: write-behind holds mu from the look-up until the nested
// metadata operation that maps the write has committed into the group, and
// the pass takes its records out (taken) under mu before it sweeps them.
// A write that relied on a record therefore ends before that record is
// taken, and the sweep (which reads the file's extents from the open
// group) sees its bytes. Records are added only once their operation has
// committed, so a record that failed is never relied on. Records queued
// before this open, or by other paths (clones, a sweep's remainder), are
// not in here: a write over them queues its own, as before.
// Thread-safety: every member but mu needs mu held.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "hiodsfs/types.h"

namespace hiodsfs {

struct DirtyRecord;

class PendingDirty {
public:
    // At most this many ranges are kept (about 20 MiB); past it new records
    // are not added, and writes over them queue their own.
    static constexpr std::size_t kMaxRanges = 1u << 18;

    struct Range {
        InodeId ino = 0;
        std::uint64_t offset = 0, length = 0, seq = 0;
    };

    std::mutex mu;

    // Whether one record covers [offset, offset + length) of ino.
    bool covers(InodeId ino, std::uint64_t offset, std::uint64_t length) const;
    // Records whose operation has committed.
    void add(const std::vector<Range>& ranges);
    // Records the pass has taken (those not in here are ignored).
    void taken(const std::vector<DirtyRecord>& records);
    std::size_t size() const { return count_; }

private:
    // ino -> start -> (end, seq); several records may start at one offset.
    std::unordered_map<InodeId, std::multimap<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>>> by_file_;
    std::size_t count_ = 0;
    // The longest range kept: a record that covers [offset, ...) starts at
    // most this far before it.
    std::uint64_t longest_ = 0;
};

}  // namespace hiodsfs
