// ChunkingParams: validation messages, describe/parse round trips.
#include <catch2/catch.hpp>
#include <cerrno>

#include "hiodsfs/chunker.h"

using hiodsfs::ChunkingParams;

namespace {

// The error message of parsing `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
    ChunkingParams p;
    const auto st = ChunkingParams::parse(text, &p);
    if (st.is_ok()) return "";
    CHECK(st.err() == EINVAL);
    return st.message();
}

}  // namespace

TEST_CASE("defaults and constructors validate", "[params]") {
    CHECK(ChunkingParams{}.validate().is_ok());
    CHECK(ChunkingParams{}.kind == ChunkingParams::Kind::kCdc);
    // The default chosen in docs/chunking.md; stores record what they use.
    CHECK(ChunkingParams{}.describe() == "cdc:2048/8192/32768");
    CHECK(ChunkingParams::fixed(4096).validate().is_ok());
    CHECK(ChunkingParams::fixed(256).validate().is_ok());
    CHECK(ChunkingParams::fixed(4u << 20).validate().is_ok());
    CHECK(ChunkingParams::cdc(256, 512, 4u << 20).validate().is_ok());
    const auto f = ChunkingParams::fixed(8192);
    CHECK(f.kind == ChunkingParams::Kind::kFixed);
    CHECK(f.avg_size == 8192);
}

TEST_CASE("validate rejects bad sizes with a message naming the problem", "[params]") {
    using Catch::Matchers::Contains;
    CHECK_THAT(ChunkingParams::fixed(4000).validate().message(),
               Contains("4000") && Contains("power of two"));
    CHECK_THAT(ChunkingParams::fixed(128).validate().message(), Contains("out of range"));
    CHECK_THAT(ChunkingParams::fixed(8u << 20).validate().message(), Contains("out of range"));
    CHECK_THAT(ChunkingParams::fixed(0).validate().message(), Contains("out of range"));
    CHECK_THAT(ChunkingParams::cdc(4096, 4096, 65536).validate().message(),
               Contains("min < avg < max"));
    CHECK_THAT(ChunkingParams::cdc(4096, 16384, 16384).validate().message(),
               Contains("min < avg < max"));
    CHECK_THAT(ChunkingParams::cdc(8192, 4096, 65536).validate().message(),
               Contains("min < avg < max"));
    CHECK_THAT(ChunkingParams::cdc(4096, 16000, 65536).validate().message(),
               Contains("average") && Contains("power of two"));
    CHECK_THAT(ChunkingParams::cdc(100, 16384, 65536).validate().message(),
               Contains("minimum") && Contains("out of range"));
    ChunkingParams bad_kind;
    bad_kind.kind = static_cast<ChunkingParams::Kind>(7);
    CHECK_THAT(bad_kind.validate().message(), Contains("unknown kind"));
    CHECK(ChunkingParams::fixed(4000).validate().err() == EINVAL);
}

TEST_CASE("describe and parse round-trip", "[params]") {
    const ChunkingParams p =
        GENERATE(ChunkingParams{}, ChunkingParams::fixed(4096), ChunkingParams::fixed(256),
                 ChunkingParams::cdc(2048, 8192, 32768), ChunkingParams::cdc(256, 4096, 4u << 20));
    const std::string text = p.describe();
    ChunkingParams back = ChunkingParams::fixed(512);
    REQUIRE(ChunkingParams::parse(text, &back).is_ok());
    CHECK(back == p);
    CHECK(back.describe() == text);
}

TEST_CASE("describe prints the documented forms", "[params]") {
    CHECK(ChunkingParams::fixed(4096).describe() == "fixed:4096");
    CHECK(ChunkingParams::cdc(4096, 16384, 65536).describe() == "cdc:4096/16384/65536");
}

TEST_CASE("parse rejects malformed text and leaves the output alone", "[params]") {
    using Catch::Matchers::Contains;
    CHECK_THAT(parse_error(""), Contains("fixed:SIZE or cdc:MIN/AVG/MAX"));
    CHECK_THAT(parse_error("cdc"), Contains("fixed:SIZE or cdc:MIN/AVG/MAX"));
    CHECK_THAT(parse_error("rabin:4096"), Contains("unknown kind 'rabin'"));
    CHECK_THAT(parse_error("fixed:"), Contains("not a decimal number"));
    CHECK_THAT(parse_error("fixed:4k"), Contains("'4k'"));
    CHECK_THAT(parse_error("fixed:-4096"), Contains("not a decimal number"));
    CHECK_THAT(parse_error("fixed: 4096"), Contains("not a decimal number"));
    CHECK_THAT(parse_error("fixed:99999999999999"), Contains("not a decimal number"));
    CHECK_THAT(parse_error("fixed:4095"), Contains("power of two"));
    CHECK_THAT(parse_error("cdc:4096/16384"), Contains("exactly three sizes"));
    CHECK_THAT(parse_error("cdc:4096/16384/65536/1"), Contains("exactly three sizes"));
    CHECK_THAT(parse_error("cdc:4096//65536"), Contains("average"));
    CHECK_THAT(parse_error("cdc:4096/16384/1024"), Contains("min < avg < max"));
    CHECK(parse_error("cdc:4096/16384/65536").empty());
    CHECK(parse_error("fixed:65536").empty());

    ChunkingParams out = ChunkingParams::fixed(512);
    CHECK_FALSE(ChunkingParams::parse("cdc:1/2/3", &out).is_ok());
    CHECK(out == ChunkingParams::fixed(512));
}
