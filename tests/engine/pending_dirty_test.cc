// PendingDirty (engine/pending_dirty.h): which queued ranges cover a write,
// and that a record the pass has taken covers nothing any more.
#include <catch2/catch.hpp>

#include "dedup/background_pass.h"
#include "engine/pending_dirty.h"

using namespace hiodsfs;

namespace {

DirtyRecord record(InodeId ino, std::uint64_t offset, std::uint64_t length, std::uint64_t seq) {
    DirtyRecord r;
    r.ino = ino;
    r.offset = offset;
    r.length = length;
    r.seq = seq;
    return r;
}

}  // namespace

TEST_CASE("a pending range covers what lies wholly inside it, in its own file", "[engine][pending-dirty]") {
    PendingDirty p;
    p.add({{7, 4096, 8192, 1}, {7, 1 << 20, 4096, 2}, {8, 0, 4096, 3}});
    CHECK(p.size() == 3);
    CHECK(p.covers(7, 4096, 8192));
    CHECK(p.covers(7, 5000, 100));
    CHECK(p.covers(7, 12287, 1));
    CHECK_FALSE(p.covers(7, 12287, 2));  // one byte past it
    CHECK_FALSE(p.covers(7, 4095, 2));   // one byte before it
    CHECK_FALSE(p.covers(9, 4096, 1));   // another file
    CHECK(p.covers(7, 1 << 20, 4096));
    CHECK(p.covers(8, 0, 4096));
    // A long range far before the write still covers it.
    p.add({{9, 0, 64 << 20, 4}});
    CHECK(p.covers(9, 60 << 20, 4096));
    CHECK(p.covers(7, 4096, 4096));
}

TEST_CASE("a range the pass has taken covers nothing; others at the same offset still do", "[engine][pending-dirty]") {
    PendingDirty p;
    p.add({{7, 0, 4096, 1}, {7, 0, 4096, 2}});
    p.taken({record(7, 0, 4096, 1)});
    CHECK(p.size() == 1);
    CHECK(p.covers(7, 0, 4096));
    p.taken({record(7, 0, 4096, 2), record(7, 0, 4096, 99), record(5, 0, 1, 3)});  // unknown ones are ignored
    CHECK(p.size() == 0);
    CHECK_FALSE(p.covers(7, 0, 4096));
}

TEST_CASE("past its bound no range is added, and writes over them queue their own", "[engine][pending-dirty]") {
    PendingDirty p;
    std::vector<PendingDirty::Range> many;
    for (std::uint64_t i = 0; i < PendingDirty::kMaxRanges + 10; ++i) many.push_back({1, i * 4096, 4096, i});
    p.add(many);
    CHECK(p.size() == PendingDirty::kMaxRanges);
    CHECK(p.covers(1, 0, 4096));
    CHECK_FALSE(p.covers(1, PendingDirty::kMaxRanges * 4096, 4096));
}
