// The dirty queue's records (src/meta/dirty_queue.cc): a range round-trips
// at its limits, a value of the wrong size is refused, and the keys sort
// as the pass walks them: the queue in order, then what was set aside.
// tests/engine/inode_ops_test.cc shows queue_dirty writing them.
#include "meta/dirty_queue.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "meta/keys.h"

using namespace hiodsfs;

TEST_CASE("a dirty range round-trips at its limits; another size is refused", "[meta][dirty_queue]") {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    for (const DirtyRange& r : {DirtyRange{0, 0, 0}, DirtyRange{1, 4096, 65536}, DirtyRange{kMax, kMax, kMax}}) {
        const std::string v = encode_dirty(r);
        CHECK(v.size() == 24);
        DirtyRange back;
        REQUIRE(decode_dirty(v, &back));
        CHECK(back.ino == r.ino);
        CHECK(back.offset == r.offset);
        CHECK(back.length == r.length);
        DirtyRange out;
        CHECK_FALSE(decode_dirty(v.substr(0, 23), &out));
        CHECK_FALSE(decode_dirty(v + 'x', &out));
    }
}

TEST_CASE("a set-aside record keeps its range and its reason", "[meta][dirty_queue]") {
    const DirtyRange r{42, 8 << 20, 4096};
    DirtyRange back;
    std::string_view why;
    // why points into the value: kept while it is read.
    const std::string with_reason = encode_set_aside(r, "chunk 17 is damaged");
    REQUIRE(decode_set_aside(with_reason, &back, &why));
    CHECK(back.offset == r.offset);
    CHECK(why == "chunk 17 is damaged");
    const std::string without = encode_set_aside(r, "");
    REQUIRE(decode_set_aside(without, &back, &why));
    CHECK(why.empty());
    const std::string cut = encode_dirty(r).substr(0, 20);
    CHECK_FALSE(decode_set_aside(cut, &back, &why));
}

TEST_CASE("queue keys sort by number, before every set-aside key", "[meta][dirty_queue]") {
    std::vector<std::string> keys;
    for (std::uint64_t seq : {0ull, 1ull, 255ull, 256ull, 1ull << 40, ~0ull}) {
        keys.push_back(key_u64(seq));
        keys.push_back(set_aside_key(seq));
    }
    std::sort(keys.begin(), keys.end());
    // The first half is the queue, in number order; then the set-aside keys.
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const bool aside = i >= keys.size() / 2;
        INFO("key " << i);
        CHECK(past_dirty_queue(keys[i]) == aside);
        std::uint64_t seq = 0;
        if (aside) {
            REQUIRE(parse_set_aside_key(keys[i], &seq));
        } else {
            REQUIRE(parse_key_u64(keys[i], &seq));
            CHECK_FALSE(parse_set_aside_key(keys[i], &seq));
        }
        if (i != 0 && i != keys.size() / 2) CHECK(seq > last);
        last = seq;
    }
    // A key an upgrade found damaged (0xff first) is past the queue too.
    CHECK(past_dirty_queue(std::string("\xff") + "junk"));
    CHECK_FALSE(past_dirty_queue(""));
}
