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

TEST_CASE("long ranges cover from anywhere before, and a file keeps a bounded number of them",
          "[engine][pending-dirty]") {
    PendingDirty p;
    const std::uint64_t longer = PendingDirty::kShortMost + 4096;
    // Short ranges far before a write are not looked at; a long one is.
    p.add({{3, 0, 4096, 1}, {3, 0, 256u << 20, 2}, {3, 300u << 20, 4096, 3}});
    CHECK(p.covers(3, 200u << 20, 4096));
    CHECK_FALSE(p.covers(3, 300u << 20, 8192));
    p.taken({record(3, 0, 256u << 20, 2)});
    CHECK_FALSE(p.covers(3, 200u << 20, 4096));
    CHECK(p.covers(3, 0, 4096));  // the short range at the same offset stays
    std::vector<PendingDirty::Range> many;
    for (std::uint64_t i = 0; i < PendingDirty::kMaxLongPerFile + 5; ++i)
        many.push_back({4, i * longer, longer, 10 + i});
    many.push_back({5, 0, longer, 99});  // another file's are its own
    p.add(many);
    CHECK(p.size() == 2 + PendingDirty::kMaxLongPerFile + 1);
    CHECK(p.covers(4, (PendingDirty::kMaxLongPerFile - 1) * longer, 4096));
    CHECK_FALSE(p.covers(4, PendingDirty::kMaxLongPerFile * longer, 4096));
    CHECK(p.covers(5, 0, longer));
    // A range of no length is not kept, and the ones after it are.
    p.add({{6, 0, 0, 200}, {6, 0, 4096, 201}});
    CHECK(p.covers(6, 0, 4096));
}

TEST_CASE("ranges of every length class cover from as far back as they reach", "[engine][pending-dirty]") {
    PendingDirty p;
    // One range of each class, and one a byte longer than the class before
    // allows, each reaching to 4 MiB.
    const std::uint64_t end = 4u << 20;
    std::uint64_t seq = 1;
    for (std::uint64_t len = 4096; len <= PendingDirty::kShortMost; len <<= 2) {
        p.add({{10 + seq, end - len, len, seq}});
        ++seq;
        p.add({{10 + seq, end - len - 1, len + 1, seq}});
        ++seq;
    }
    for (std::uint64_t s = 1; s < seq; ++s) {
        INFO("file " << 10 + s);
        CHECK(p.covers(10 + s, end - 4096, 4096));  // its last block, far from its start
        CHECK_FALSE(p.covers(10 + s, end - 4096, 4097));
    }
    // Dense 4 KiB ranges: each block is covered by its own, none by a neighbour.
    for (std::uint64_t i = 0; i < 1024; ++i) p.add({{1, i * 4096, 4096, 1000 + i}});
    CHECK(p.covers(1, 512 * 4096, 4096));
    CHECK_FALSE(p.covers(1, 512 * 4096, 8192));
    p.taken({record(1, 512 * 4096, 4096, 1000 + 512)});
    CHECK_FALSE(p.covers(1, 512 * 4096, 4096));
}
