// PendingDirty: the dirty-queue records this process queued and the
// background pass has not taken yet, by file and range. A deferred write
// whose range one of them covers needs no record of its own: that
// record's sweep re-chunks the range as it is when the sweep runs, new
// bytes included. So rewriting the same blocks again and again, as a
// database or a VM image does, adds no backlog beyond the blocks
// themselves, like a dirty page written again in a page cache. For the
// same reason a record the pass takes that another one here covers is
// finished without a sweep of its own (EngineImpl::take_dirty).
//
// Why it is safe: write-behind holds mu from the look-up until the nested
// metadata operation that maps the write has committed into the group, and
// the pass takes its records out (taken) under mu before it sweeps them.
// A write that relied on a record therefore ends before that record is
// taken, and the sweep (which reads the file's extents from the open
// group) sees its bytes. Records are added only once their operation has
// committed, so a record that failed is never relied on. Records queued
// before this open, or by clones, are not in here: a write over them
// queues its own, as before.
// Thread-safety: every member but mu needs mu held.
#pragma once

#include <array>
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
    // Ranges are kept by length: up to 4 KiB, 16 KiB, ... 1 MiB, each class
    // looked up only within its longest length before the write, so a file
    // full of 4 KiB records costs a look-up a few steps. Longer ones (a
    // sweep's remainder, a long run of sequential writes) are kept apart,
    // at most kMaxLongPerFile a file, and all looked at.
    static constexpr std::size_t kClasses = 5;
    static constexpr std::uint64_t kShortMost = std::uint64_t{4096} << (2 * (kClasses - 1));  // 1 MiB
    static constexpr std::size_t kMaxLongPerFile = 64;

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
    // start -> (end, seq); several records may start at one offset.
    using Ranges = std::multimap<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>>;
    struct File {
        std::array<Ranges, kClasses> by_length;  // class c: at most 4 KiB << 2c long
        Ranges long_ranges;                      // longer than kShortMost
        bool empty() const;
    };
    // The class of a range of this length; kClasses: a long one.
    static std::size_t length_class(std::uint64_t length);
    static Ranges& ranges_of(File& f, std::uint64_t length);

    std::unordered_map<InodeId, File> by_file_;
    std::size_t count_ = 0;
};

}  // namespace hiodsfs
