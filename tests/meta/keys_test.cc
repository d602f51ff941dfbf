// The key codec (meta/keys.h): byte order is numeric order, a number's
// encoding is an exact prefix of its keys and of no other number's, and
// every malformed key is refused rather than read as some number.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

// Numbers around every change of encoded length, and some at random.
std::vector<std::uint64_t> edge_numbers() {
    std::vector<std::uint64_t> v = {0, 1, 2, ~std::uint64_t{0}, ~std::uint64_t{0} - 1};
    for (unsigned bits = 8; bits < 64; bits += 8) {
        const std::uint64_t p = std::uint64_t{1} << bits;
        v.insert(v.end(), {p - 2, p - 1, p, p + 1});
    }
    std::mt19937_64 rng(14);
    for (int i = 0; i < 200; ++i) v.push_back(rng() >> (rng() % 64));
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

}  // namespace

TEST_CASE("encoded numbers sort as the numbers and read back", "[meta][keys]") {
    const auto nums = edge_numbers();
    std::string prev;
    for (std::size_t i = 0; i < nums.size(); ++i) {
        const std::string k = key_u64(nums[i]);
        INFO("number " << nums[i]);
        CHECK(k.size() == 1 + (nums[i] == 0 ? 0u : (64u - static_cast<unsigned>(__builtin_clzll(nums[i])) + 7u) / 8u));
        if (i > 0) CHECK(prev < k);
        std::uint64_t back = 1;
        CHECK((parse_key_u64(k, &back) && back == nums[i]));
        prev = k;
    }
    CHECK(key_u64(0) == std::string(1, '\0'));
    CHECK(key_u64(255) == std::string("\x01\xff", 2));
    CHECK(key_u64(256) == std::string("\x02\x01\x00", 3));
    // Pairs sort by the first number, then the second, whatever their lengths.
    CHECK(key_u64_u64(255, ~std::uint64_t{0}) < key_u64_u64(256, 0));
    CHECK(key_u64_u64(256, 255) < key_u64_u64(256, 256));
    CHECK(key_u64_str(255, "\xff\xff") < key_u64_str(256, ""));
    std::uint64_t a = 0, b = 0;
    CHECK((parse_key_u64_u64(key_u64_u64(65536, 4096), &a, &b) && a == 65536 && b == 4096));
    std::string_view rest;
    CHECK((parse_key_u64_str(key_u64_str(70000, "name"), &a, &rest) && a == 70000 && rest == "name"));
}

TEST_CASE("malformed keys are refused", "[meta][keys]") {
    std::uint64_t v = 0;
    CHECK_FALSE(parse_key_u64("", &v));
    CHECK_FALSE(parse_key_u64(std::string("\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09", 10), &v));  // 9 bytes
    CHECK_FALSE(parse_key_u64(std::string("\x02\x01", 2), &v));       // cut short
    CHECK_FALSE(parse_key_u64(std::string("\x02\x00\x05", 3), &v));   // not the shortest form
    CHECK_FALSE(parse_key_u64(std::string("\x01\x00", 2), &v));       // 0 is the length byte alone
    CHECK_FALSE(parse_key_u64(std::string("\x01\x05\x00", 3), &v));   // trailing byte
    CHECK_FALSE(parse_key_u64(std::string("\xff\x01", 2), &v));       // an old key set aside by the upgrade
    // A format-2 key (8 big-endian bytes) is not a format-3 one.
    CHECK_FALSE(parse_key_u64(be64(5), &v));
    std::uint64_t a = 0, b = 0;
    CHECK_FALSE(parse_key_u64_u64(key_u64(5), &a, &b));
    CHECK_FALSE(parse_key_u64_u64(key_u64(5) + std::string("\x01", 1), &a, &b));
    std::string_view rest = "unchanged";
    std::string_view in = std::string_view("\x03\x01\x02", 3);
    CHECK_FALSE(read_key_u64(&in, &v));
    CHECK(in.size() == 3);  // left as it was
    // The fingerprint index's tail form.
    std::string t;
    append_tail_u64(&t, 0x1234);
    CHECK(t == std::string("\x12\x34", 2));
    CHECK((read_tail_u64(t, &v) && v == 0x1234));
    CHECK_FALSE(read_tail_u64("", &v));
    CHECK_FALSE(read_tail_u64(std::string("\x00\x01", 2), &v));
    CHECK_FALSE(read_tail_u64(std::string(9, '\x01'), &v));
    CHECK(rest == "unchanged");
}

TEST_CASE("a prefix scan of one inode's keys sees no neighbour's", "[meta][keys]") {
    test::MetaTempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    const std::vector<std::uint64_t> inos = {0, 1, 255, 256, 257, 65535, 65536, 65537, 1ull << 32, ~0ull};
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    // Names that begin with bytes a longer number's encoding would have.
    const std::vector<std::string> names = {std::string("\x00", 1), "\x01", "a", "\xff"};
    for (std::uint64_t ino : inos) {
        for (const std::string& n : names) REQUIRE(t->put(Db::kDirents, key_u64_str(ino, n), "x").is_ok());
        for (std::uint64_t off : {0ull, 255ull, 256ull, 1ull << 40})
            REQUIRE(t->put(Db::kExtents, key_u64_u64(ino, off), "x").is_ok());
    }
    for (std::uint64_t ino : inos) {
        INFO("inode " << ino);
        const std::string prefix = key_u64(ino);
        std::vector<std::string> seen;
        Cursor c = t->cursor(Db::kDirents);
        for (bool ok = c.seek(prefix); ok && c.key().starts_with(prefix); ok = c.next()) {
            std::uint64_t parent = 0;
            std::string_view name;
            REQUIRE(parse_key_u64_str(c.key(), &parent, &name));
            CHECK(parent == ino);
            seen.emplace_back(name);
        }
        CHECK(seen == names);
        std::vector<std::uint64_t> offs;
        Cursor e = t->cursor(Db::kExtents);
        for (bool ok = e.seek(prefix); ok && e.key().starts_with(prefix); ok = e.next()) {
            std::uint64_t kino = 0, off = 0;
            REQUIRE(parse_key_u64_u64(e.key(), &kino, &off));
            CHECK(kino == ino);
            offs.push_back(off);
        }
        CHECK(offs == std::vector<std::uint64_t>{0, 255, 256, 1ull << 40});
    }
}
