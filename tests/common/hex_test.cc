// Hex digits both ways (src/common/hex.h): a round trip, and what is refused.
#include "common/hex.h"

#include <catch2/catch.hpp>

using namespace hiodsfs;

TEST_CASE("hex: bytes round trip through lowercase digits", "[hex]") {
    const std::vector<std::uint8_t> bytes = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    REQUIRE(to_hex(bytes) == "00017f80abff");
    std::vector<std::uint8_t> back;
    REQUIRE(from_hex("00017f80abff", &back));
    REQUIRE(back == bytes);
    REQUIRE(to_hex({}) == "");
}

TEST_CASE("hex: odd lengths, capitals and other characters are refused", "[hex]") {
    std::vector<std::uint8_t> out = {9};
    REQUIRE_FALSE(from_hex("abc", &out));
    REQUIRE_FALSE(from_hex("AB", &out));
    REQUIRE_FALSE(from_hex("0g", &out));
    REQUIRE_FALSE(from_hex("0 ", &out));
    REQUIRE(out == std::vector<std::uint8_t>{9});
}
