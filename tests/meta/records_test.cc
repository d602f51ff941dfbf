// The format-2 record encodings: every field round-trips at its limits, the
// common records are small, and a damaged value is refused, never misread.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include "meta/records.h"

using namespace hiodsfs;

namespace {

bool same(const InodeRecord& a, const InodeRecord& b) {
    return a.mode == b.mode && a.nlink == b.nlink && a.uid == b.uid && a.gid == b.gid && a.rdev == b.rdev &&
           a.size == b.size && a.mapped == b.mapped && a.parent == b.parent && a.atime_s == b.atime_s &&
           a.mtime_s == b.mtime_s && a.ctime_s == b.ctime_s && a.atime_ns == b.atime_ns &&
           a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

InodeRecord file_record() {
    InodeRecord r;
    r.mode = S_IFREG | 0644;
    r.nlink = 1;
    r.uid = r.gid = 1000;
    r.size = r.mapped = 123456;
    r.atime_s = r.mtime_s = r.ctime_s = 1796195043;
    r.atime_ns = r.mtime_ns = r.ctime_ns = 987135644;
    return r;
}

// Every prefix of a value is refused, and (but for an inode, whose value
// may end in a symlink's target) so is one byte more.
template <typename T>
void check_truncations_refused(const std::string& v) {
    for (std::size_t n = 0; n < v.size(); ++n) {
        T r;
        INFO("length " << n << " of " << v.size());
        CHECK_FALSE(decode(std::string_view(v).substr(0, n), &r));
    }
    if constexpr (!std::is_same_v<T, InodeRecord>) {
        T r;
        CHECK_FALSE(decode(v + '\x01', &r));
    }
}

}  // namespace

TEST_CASE("varints round-trip at every width and refuse overlong input", "[meta][records]") {
    std::vector<std::uint64_t> values = {0, 1, 127, 128, 16383, 16384, (1ull << 32) - 1, 1ull << 32,
                                         std::numeric_limits<std::uint64_t>::max()};
    for (int bit = 0; bit < 64; ++bit) values.push_back(1ull << bit);
    for (std::uint64_t v : values) {
        std::string s;
        put_varint(&s, v);
        std::size_t pos = 0;
        std::uint64_t back = 0;
        REQUIRE(get_varint(s, &pos, &back));
        CHECK(back == v);
        CHECK(pos == s.size());
    }
    std::string eleven(10, '\xff');
    eleven += '\x01';
    std::size_t pos = 0;
    std::uint64_t v = 0;
    CHECK_FALSE(get_varint(eleven, &pos, &v));  // more than 64 bits
    std::string top = std::string(9, '\xff') + '\x02';
    pos = 0;
    CHECK_FALSE(get_varint(top, &pos, &v));  // the tenth byte past bit 63
    // Padded forms of values that have a shorter one: 0 as two bytes and
    // as ten, 1 as three, 127 as two.
    for (const std::string& padded : {std::string("\x80\x00", 2), std::string(9, '\x80') + '\0',
                                      std::string("\x81\x80\x00", 3), std::string("\xff\x00", 2)}) {
        pos = 0;
        CHECK_FALSE(get_varint(padded, &pos, &v));
    }
    pos = 0;
    REQUIRE(get_varint(std::string(1, '\0'), &pos, &v));  // 0 itself is one zero byte
    CHECK(v == 0);
}

TEST_CASE("inode records round-trip and are small", "[meta][records]") {
    InodeRecord r = file_record();
    std::string v = encode(r);
    CHECK(v.size() <= 28);  // was 88 bytes in format 1
    InodeRecord back;
    std::string target = "x";
    REQUIRE(decode(v, &back, &target));
    CHECK(same(r, back));
    CHECK(target.empty());
    check_truncations_refused<InodeRecord>(v);

    SECTION("times that differ, before 1970 and at the limits") {
        r.atime_s = -14182940;
        r.atime_ns = 0;
        r.ctime_s = std::numeric_limits<std::int64_t>::max();
        r.ctime_ns = 999999999;
        r.mtime_s = std::numeric_limits<std::int64_t>::min();
        r.mtime_ns = 1;
        REQUIRE(decode(encode(r), &back));
        CHECK(same(r, back));
    }
    SECTION("every field at its maximum, and a symlink's target") {
        r.mode = r.nlink = r.uid = r.gid = std::numeric_limits<std::uint32_t>::max();
        r.rdev = r.size = r.mapped = r.parent = std::numeric_limits<std::uint64_t>::max();
        r.mode = S_IFLNK | 0777;
        const std::string link(4000, 'L');
        REQUIRE(decode(encode(r, link), &back, &target));
        CHECK(same(r, back));
        CHECK(target == link);
    }
    SECTION("a field too large for its type is refused") {
        std::string bad;
        bad.push_back(3);                          // atime and ctime are mtime
        put_varint(&bad, 1ull << 32);              // mode: past 32 bits
        for (int i = 0; i < 9; ++i) put_varint(&bad, 0);
        CHECK_FALSE(decode(bad, &back));
        bad[0] = 4;  // an unknown flag bit
        CHECK_FALSE(decode(bad, &back));
    }
}

TEST_CASE("directory entry records round-trip and refuse damage", "[meta][records]") {
    std::string v;
    for (std::uint32_t type : {S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK}) {
        DirentValue d{987654, type};
        v = encode(d);
        CHECK(v.size() <= 4);  // was 16 bytes
        DirentValue db;
        REQUIRE(decode(v, &db));
        CHECK(db.ino == d.ino);
        CHECK(db.type == type);
        check_truncations_refused<DirentValue>(v);
    }
    std::string bad;
    put_varint(&bad, 5);
    put_varint(&bad, 16);  // not a file type
    DirentValue db;
    CHECK_FALSE(decode(bad, &db));
}
