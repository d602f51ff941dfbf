// common/units.h: sizes as options and reports spell them (binary
// multiples), decimal counts within bounds, and sizes shown to people.
#include "common/units.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

using namespace hiodsfs;

namespace {

bool size_of(const std::string& text, std::uint64_t* out,
             std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    return parse_size(text, max, out);
}

}  // namespace

TEST_CASE("parse_size reads plain numbers and binary suffixes", "[common][units]") {
    std::uint64_t v = 0;
    CHECK((size_of("4096", &v) && v == 4096));
    CHECK((size_of("0", &v) && v == 0));
    CHECK((size_of("512B", &v) && v == 512));
    CHECK((size_of("64K", &v) && v == 64 << 10));
    CHECK((size_of("64k", &v) && v == 64 << 10));
    CHECK((size_of("64KB", &v) && v == 64 << 10));
    CHECK((size_of("64KiB", &v) && v == 64 << 10));
    CHECK((size_of("1M", &v) && v == 1 << 20));
    CHECK((size_of("1MiB", &v) && v == 1 << 20));
    CHECK((size_of("2G", &v) && v == 2ull << 30));
    CHECK((size_of("2gb", &v) && v == 2ull << 30));
}

TEST_CASE("parse_size refuses what is not a size, and sizes over the bound", "[common][units]") {
    std::uint64_t v = 7;
    for (const char* bad : {"", "K", "-1", "+4", " 4", "4 ", "4.5M", "4T", "4KK", "4MiBs", "4Bi", "0x10",
                            "12abc"}) {
        INFO("'" << bad << "'");
        CHECK_FALSE(size_of(bad, &v));
    }
    CHECK(v == 7);  // left as it was
    CHECK((size_of("1M", &v, 1 << 20) && v == 1 << 20));
    CHECK_FALSE(size_of("1025K", &v, 1 << 20));
    CHECK_FALSE(size_of("1048577", &v, 1 << 20));
    // n * multiple must not wrap around.
    CHECK_FALSE(size_of("18014398509481984K", &v));  // 2^54 KiB = 2^64 B
    CHECK_FALSE(size_of("99999999999999999999999", &v));
}

TEST_CASE("parse_uint takes decimal digits within [min, max] only", "[common][units]") {
    std::uint64_t v = 0;
    CHECK((parse_uint("0", 0, 10, &v) && v == 0));
    CHECK((parse_uint("10", 0, 10, &v) && v == 10));
    CHECK((parse_uint("007", 1, 10, &v) && v == 7));
    CHECK_FALSE(parse_uint("11", 0, 10, &v));
    CHECK_FALSE(parse_uint("0", 1, 10, &v));
    for (const char* bad : {"", "-1", "1.0", "1e3", " 1", "1K", "18446744073709551616"}) {
        INFO("'" << bad << "'");
        CHECK_FALSE(parse_uint(bad, 0, std::numeric_limits<std::uint64_t>::max(), &v));
    }
    CHECK((parse_uint("18446744073709551615", 0, std::numeric_limits<std::uint64_t>::max(), &v) &&
           v == std::numeric_limits<std::uint64_t>::max()));
}

TEST_CASE("human_bytes shows three significant digits in binary units", "[common][units]") {
    CHECK(human_bytes(0) == "0 B");
    CHECK(human_bytes(812) == "812 B");
    CHECK(human_bytes(1023) == "1023 B");
    CHECK(human_bytes(1024) == "1.00 KiB");
    CHECK(human_bytes(1536) == "1.50 KiB");
    CHECK(human_bytes(12.3 * (1 << 20)) == "12.3 MiB");
    CHECK(human_bytes(640.0 * (1ull << 30)) == "640 GiB");
    CHECK(human_bytes(2.0 * (1ull << 40)) == "2.00 TiB");
    CHECK(human_bytes(-1536) == "-1.50 KiB");  // a change that shrank
}
