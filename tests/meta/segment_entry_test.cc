// A segment's entry (meta/segment_entry.h): the live bytes alone, as every
// format-5 store before settled marks wrote them, or with a mark; anything
// else is refused, never read as some count.
#include <catch2/catch.hpp>

#include <string>

#include "meta/keys.h"
#include "meta/segment_entry.h"

using namespace hiodsfs;

TEST_CASE("a segment entry round-trips with and without a settled mark", "[meta][segment-entry]") {
    SegmentEntry plain{123456789012ull, std::nullopt};
    SegmentEntry out;
    const std::string p = encode_segment_entry(plain);
    CHECK(p == be64(123456789012ull));  // the entry an unmarked store holds
    REQUIRE(decode_segment_entry(p, &out));
    CHECK(out.live == plain.live);
    CHECK(!out.settled);

    const SegmentEntry marked{77, SettledMark{0xe6, 0xdeadbeefu, (1ull << 40) + 3}};
    REQUIRE(decode_segment_entry(encode_segment_entry(marked), &out));
    CHECK(out.live == 77);
    REQUIRE(out.settled);
    CHECK(*out.settled == *marked.settled);
}

TEST_CASE("a damaged segment entry is refused", "[meta][segment-entry]") {
    const std::string good = encode_segment_entry({5, SettledMark{1, 2, 3}});
    SegmentEntry out;
    for (std::size_t n = 0; n < good.size(); ++n)
        if (n != 8) CHECK(!decode_segment_entry(good.substr(0, n), &out));
    CHECK(!decode_segment_entry(good + "x", &out));
    std::string wrong_tag = good;
    wrong_tag[8] = 2;
    CHECK(!decode_segment_entry(wrong_tag, &out));
}
