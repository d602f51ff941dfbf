// CRC-32C (src/chunk/crc32c.cc): known vectors, a seed that continues a
// checksum, and the SSE4.2 and table paths agreeing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <iterator>
#include <string>

#include "chunk/crc32c_impl.h"
#include "chunk/fingerprint.h"
#include "../skip.h"
#include "test_data.h"

TEST_CASE("CRC-32C known vectors", "[crc32c]") {
    const std::string check = "123456789";
    CHECK(hiodsfs::crc32c(check.data(), check.size()) == 0xE3069283u);
    CHECK(hiodsfs::crc32c(check.data(), 0) == 0u);
    // RFC 3720 (iSCSI) appendix B.4 vectors.
    std::uint8_t buf[32];
    std::fill(std::begin(buf), std::end(buf), 0x00);
    CHECK(hiodsfs::crc32c(buf, 32) == 0x8A9136AAu);
    std::fill(std::begin(buf), std::end(buf), 0xFF);
    CHECK(hiodsfs::crc32c(buf, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<std::uint8_t>(i);
    CHECK(hiodsfs::crc32c(buf, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<std::uint8_t>(31 - i);
    CHECK(hiodsfs::crc32c(buf, 32) == 0x113FDB5Cu);
    for (auto* f : {&hiodsfs::chunk_detail::crc32c_portable, &hiodsfs::chunk_detail::crc32c_hw}) {
        if (f == &hiodsfs::chunk_detail::crc32c_hw && !hiodsfs::chunk_detail::crc32c_hw_available())
            continue;
        CHECK(f(check.data(), check.size(), 0) == 0xE3069283u);
    }
}

TEST_CASE("CRC-32C seed continues a checksum", "[crc32c]") {
    const auto data = hiodsfs::test::random_bytes(10007, 13);
    const std::uint32_t whole = hiodsfs::crc32c(data.data(), data.size());
    for (std::size_t split :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096}, data.size()}) {
        const std::uint32_t first = hiodsfs::crc32c(data.data(), split);
        CHECK(hiodsfs::crc32c(data.data() + split, data.size() - split, first) == whole);
    }
}

TEST_CASE("CRC-32C hardware and table paths agree", "[crc32c]") {
    if (!hiodsfs::chunk_detail::crc32c_hw_available()) {
        SKIP_TEST("no SSE4.2 on this CPU: only the table path can be tested");
    }
    const auto data = hiodsfs::test::random_bytes(1 << 16, 14);
    std::uint64_t seed = 15;
    int compared = 0;
    for (std::size_t align = 0; align < 16; ++align) {
        // Around the hardware path's rounds of three 256-byte blocks (768 bytes).
        for (std::size_t len : {0, 1, 3, 7, 8, 9, 15, 17, 63, 255, 767, 768, 769, 1021, 1543, 4099,
                                6143, 6144, 6145, 6913, 8192, 65519}) {
            if (align + len > data.size()) continue;
            const auto s = static_cast<std::uint32_t>(hiodsfs::test::splitmix64(seed));
            const std::uint8_t* p = data.data() + align;
            REQUIRE(hiodsfs::chunk_detail::crc32c_hw(p, len, s) ==
                    hiodsfs::chunk_detail::crc32c_portable(p, len, s));
            ++compared;
        }
    }
    for (int i = 0; i < 2000; ++i) {
        const std::size_t off = hiodsfs::test::splitmix64(seed) % data.size();
        const std::size_t len = hiodsfs::test::splitmix64(seed) % (data.size() - off + 1);
        REQUIRE(hiodsfs::chunk_detail::crc32c_hw(data.data() + off, len, 0) ==
                hiodsfs::chunk_detail::crc32c_portable(data.data() + off, len, 0));
        ++compared;
    }
    CHECK(compared > 2000);
}
