// The record encodings: every field round-trips at its limits, the common
// records are small, and a damaged value is refused, never misread.
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
    // flags, mode 2, uid 2, gid 2, size 3, mtime 5 + 5 (was 88 bytes in
    // format 1, 28 in format 3)
    CHECK(v.size() == 20);
    InodeRecord back;
    std::string target = "x";
    REQUIRE(decode(v, &back, &target));
    CHECK(r == back);
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
        CHECK(r == back);
        std::swap(r.atime_s, r.ctime_s);  // atime - ctime past the range of int64 the other way
        REQUIRE(decode(encode(r), &back));
        CHECK(r == back);
    }
    SECTION("every field at its maximum, and a symlink's target") {
        r.nlink = r.uid = r.gid = std::numeric_limits<std::uint32_t>::max();
        r.rdev = r.size = r.mapped = r.parent = std::numeric_limits<std::uint64_t>::max();
        r.mode = S_IFLNK | 07777;
        const std::string link(4000, 'L');
        v = encode(r, link);
        REQUIRE(decode(v, &back, &target));
        CHECK(r == back);
        CHECK(target == link);
        check_truncations_refused<InodeRecord>(v.substr(0, v.size() - link.size()));
    }
    SECTION("a file extracted by tar: an old mtime, atime and ctime now") {
        r.mtime_s = 1600000000;
        r.ctime_s = 1796195050;
        r.ctime_ns = 987654321;
        r.atime_s = r.ctime_s;
        r.atime_ns = 987000000;
        v = encode(r);
        // ctime: 196195050 s after mtime (5 bytes), its ns (5); atime: 0 s and
        // -654321 ns from ctime (1 + 3)
        CHECK(v.size() == 20 + 10 + 4);
        REQUIRE(decode(v, &back));
        CHECK(r == back);
        check_truncations_refused<InodeRecord>(v);
    }
    SECTION("each field that has a default is stored only when it differs") {
        // {what, how to set it off its default, bytes it then costs}
        struct Optional {
            const char* name;
            void (*set)(InodeRecord*);
            std::size_t bytes;
        };
        const Optional fields[] = {
            {"nlink", [](InodeRecord* x) { x->nlink = 2; }, 1},
            {"rdev", [](InodeRecord* x) { x->rdev = 0x103; }, 2},
            {"mapped (a sparse file)", [](InodeRecord* x) { x->mapped = 4096; }, 2},
            {"mapped 0 (all holes)", [](InodeRecord* x) { x->mapped = 0; }, 1},
            {"parent", [](InodeRecord* x) { x->parent = 300; }, 2},
            {"ctime",
             [](InodeRecord* x) {
                 x->ctime_ns += 1;
                 x->atime_ns += 1;
             },
             6},
            {"ctime a day after mtime", [](InodeRecord* x) { x->atime_s = x->ctime_s += 86400; },
             8},
            {"atime", [](InodeRecord* x) { x->atime_s += 1; }, 2},
            {"atime ns before ctime's", [](InodeRecord* x) { x->atime_ns = 0; }, 6},
        };
        for (const Optional& f : fields) {
            INFO(f.name);
            InodeRecord o = file_record();
            f.set(&o);
            v = encode(o);
            CHECK(v.size() == 20 + f.bytes);
            REQUIRE(decode(v, &back));
            CHECK(o == back);
            check_truncations_refused<InodeRecord>(v);
        }
        // Not a regular file: mapped is 0 unless stored, whatever the size.
        InodeRecord d = file_record();
        d.mode = S_IFDIR | 0755;
        d.nlink = 2;
        d.parent = 1;
        d.mapped = 0;
        REQUIRE(decode(encode(d), &back));
        CHECK(d == back);
        d.mapped = d.size;
        REQUIRE(decode(encode(d), &back));
        CHECK(d == back);
    }
    SECTION("every file type, and only a file and a symlink have a tail") {
        for (std::uint32_t type :
             {S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK}) {
            INFO(std::oct << type);
            InodeRecord o = file_record();
            o.mode = type | 01777;
            std::string_view tail;
            REQUIRE(decode_inode_tail(encode(o), &back, &tail));
            CHECK(o == back);
            CHECK(decode_inode_tail(encode(o, "tail"), &back, &tail) ==
                  (S_ISREG(type) || S_ISLNK(type)));
        }
    }
    SECTION("damage is refused") {
        auto with_mode = [&](std::uint64_t m) {
            std::string bad = encode(r);
            std::string mode;
            put_varint(&mode, m);
            return bad.substr(0, 1) + mode + bad.substr(3);  // 0100644 takes two bytes
        };
        REQUIRE(decode(with_mode(0644 << 4 | 8), &back));        // the record itself, rebuilt
        CHECK_FALSE(decode(with_mode(0644 << 4 | 0), &back));    // not a file type
        CHECK_FALSE(decode(with_mode(0644 << 4 | 3), &back));    // nor is 3
        CHECK_FALSE(decode(with_mode(010000 << 4 | 8), &back));  // a permission bit past 07777
        CHECK_FALSE(decode(with_mode(std::uint64_t{1} << 40 | 8), &back));  // past 32 bits
        for (int bit = 6; bit < 8; ++bit) {
            std::string bad = v;
            bad[0] = static_cast<char>(bad[0] | 1 << bit);  // an unknown flag
            CHECK_FALSE(decode(bad, &back));
        }
        // A flag set for a field at its default: encode() never writes it.
        std::string bad = v.substr(0, 1) + v.substr(1, 2) + '\x01' + v.substr(3);
        bad[0] = static_cast<char>(bad[0] | 1);  // nlink 1, stored
        CHECK_FALSE(decode(bad, &back));
        bad[3] = 2;  // nlink 2: the same record is whole
        REQUIRE(decode(bad, &back));
        CHECK(back.nlink == 2);
        // A varint not in its shortest form: uid 1000 in three bytes.
        bad = v.substr(0, 3) + std::string("\xe8\x87\x00", 3) + v.substr(5);
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
