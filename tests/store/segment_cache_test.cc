// SegmentCache: which sealed segments the directory keeps in front of a
// tier, least recently used uploaded ones deleted first, and a scan larger
// than the cache that evicts what it has read, not what it will read.

#include "store/segment_cache.h"

#include <vector>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

TEST_CASE("segment cache: least recently used uploaded segments go first, the newest use stays",
          "[tier]") {
    SegmentCache c(100);
    c.add(1, 40, true);
    c.add(2, 40, false);  // not uploaded: never a victim
    c.add(3, 40, true);
    c.add(4, 40, true);
    REQUIRE(c.bytes() == 160);
    // 160 > 100: 1 goes (oldest), 2 may not, 3 goes next -> 80.
    REQUIRE(c.victims(0) == std::vector<SegmentId>{1, 3});
    c.touch(1);  // now the most recent: 3 goes first, then 4
    REQUIRE(c.victims(0) == std::vector<SegmentId>{3, 4});
    // The active segment's bytes count toward the limit.
    REQUIRE(c.victims(50) == std::vector<SegmentId>{3, 4});
    c.erase(3);
    c.erase(4);
    REQUIRE(c.victims(0).empty());  // 80 fits
    // A limit below one segment keeps the most recently used anyway.
    SegmentCache tiny(1);
    tiny.add(7, 40, true);
    REQUIRE(tiny.victims(0).empty());
    tiny.add(8, 40, true);
    REQUIRE(tiny.victims(0) == std::vector<SegmentId>{7});
    c.mark_uploaded(2);
    c.add(5, 100, true);
    REQUIRE(c.victims(0) == std::vector<SegmentId>{2, 1});
}

TEST_CASE("segment cache: a scan larger than the cache evicts what it has read, not what it will read",
          "[tier]") {
    // Ten cached segments of 10 (written, uploaded) under a limit of 95: a
    // scan reads segments 1..10 in order after 1 was evicted.
    SegmentCache c(95);
    for (SegmentId id = 1; id <= 10; ++id) c.add(id, 10, true);
    c.erase(1);
    int misses = 0;
    for (SegmentId id = 1; id <= 10; ++id) {
        if (!c.contains(id)) {
            ++misses;
            c.add(id, 10, true, true);  // fetched
        }
        c.touch(id);
        for (SegmentId v : c.victims(0)) c.erase(v);
    }
    // Plain LRU missed all ten (each fetch evicted the next to read); here
    // the first fetch evicts one cached segment, and the rest hit.
    CHECK(misses == 2);
    // A second scan: fetched segments still there are on probation, used
    // again after two other fetches: kept (promoted) like any other.
    SegmentCache p(30);
    p.add(1, 10, true, true);
    p.add(2, 10, true, true);
    p.touch(1);  // one fetch since: still on probation
    p.add(3, 10, true, true);
    p.add(4, 10, true, true);
    CHECK(p.victims(0) == std::vector<SegmentId>{1});  // the oldest fetch
    p.touch(1);  // three fetches since: promoted
    CHECK(p.victims(0) == std::vector<SegmentId>{2});
    // The newest fetch stays however small the cache.
    SegmentCache tiny(1);
    tiny.add(5, 40, true);
    tiny.add(6, 40, true, true);
    CHECK(tiny.victims(0) == std::vector<SegmentId>{5});
}

}  // namespace
}  // namespace hiodsfs
