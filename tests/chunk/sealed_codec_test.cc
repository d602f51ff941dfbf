// An encrypted store's payloads (chunk/codec.h, seal_chunk_payload): every
// method, and a chunk stored as it is, round-trips sealed; the sealed bytes
// hold none of the chunk's; and a payload opens only as its own chunk, with
// the key it was sealed with, unchanged.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "chunk/codec.h"

using namespace hiodsfs;

namespace {

std::unique_ptr<ChunkCipher> cipher_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed + 7 * i);
    const std::string store_id = "sealed-codec-store";
    std::unique_ptr<ChunkCipher> c;
    REQUIRE(ChunkCipher::make(StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(b)),
                              std::span(reinterpret_cast<const std::uint8_t*>(store_id.data()), store_id.size()), &c)
                .is_ok());
    return c;
}

// Compressible text with a marker in it.
std::string text(std::size_t n) {
    std::string s;
    for (int i = 0; s.size() < n; ++i) s += "MARKER-5e2f line " + std::to_string(i % 97) + " of the chunk\n";
    s.resize(n);
    return s;
}

struct Sealed {
    std::vector<std::uint8_t> bytes;
    const char* data() const { return reinterpret_cast<const char*>(bytes.data()); }
    std::uint32_t size() const { return static_cast<std::uint32_t>(bytes.size()); }
};

Sealed seal(const ChunkCipher& c, ChunkId id, const std::string& raw, const Compression& how) {
    ChunkEncoder enc;
    const ChunkEncoder::Payload p = enc.encode(raw.data(), static_cast<std::uint32_t>(raw.size()), how);
    Sealed s;
    REQUIRE(seal_chunk_payload(c, id, p.data, p.length, p.encoded, &s.bytes).is_ok());
    return s;
}

}  // namespace

TEST_CASE("sealed payloads: each method round-trips, and the chunk's bytes do not show", "[chunk][cipher]") {
    auto c = cipher_of(1);
    const std::string raw = text(8192);
    for (const char* how : {"none", "lz4", "zstd:3"}) {
        INFO(how);
        Compression comp;
        REQUIRE(parse_compression(how, &comp));
        const Sealed s = seal(*c, 42, raw, comp);
        CodecPrefix p;
        REQUIRE(read_codec_prefix(s.data(), s.size(), &p));
        CHECK(p.sealed);
        CHECK(p.method == comp.method);
        CHECK(p.raw_length == raw.size());
        const std::string stored(s.data(), s.size());
        CHECK(stored.find("MARKER-5e2f") == std::string::npos);
        std::string out(raw.size(), '\0');
        REQUIRE(decode_chunk(s.data(), s.size(), out.data(), static_cast<std::uint32_t>(raw.size()), nullptr, c.get(),
                             42)
                    .is_ok());
        CHECK(out == raw);
    }
}

TEST_CASE("sealed payloads: another chunk's id, another key, no key, a flipped byte or prefix do not open",
          "[chunk][cipher]") {
    auto c = cipher_of(1);
    auto other = cipher_of(2);
    const std::string raw = text(4096);
    Compression lz4;
    REQUIRE(parse_compression("lz4", &lz4));
    const Sealed s = seal(*c, 7, raw, lz4);
    std::string out(raw.size(), '\0');
    const auto n = static_cast<std::uint32_t>(raw.size());
    auto decodes = [&](const Sealed& x, const ChunkCipher* k, ChunkId id) {
        return decode_chunk(x.data(), x.size(), out.data(), n, nullptr, k, id);
    };
    REQUIRE(decodes(s, c.get(), 7).is_ok());
    // Moved to another chunk's place (the record's bytes swapped).
    Status st = decodes(s, c.get(), 8);
    CHECK(st.err() == EIO);
    CHECK(st.message().find("does not authenticate") != std::string::npos);
    CHECK(decodes(s, other.get(), 7).err() == EIO);
    st = decodes(s, nullptr, 7);
    CHECK(st.err() == EIO);
    CHECK(st.message().find("no key") != std::string::npos);
    for (std::size_t at : {std::size_t{1}, std::size_t{s.size() / 2}, std::size_t{s.size() - 1}}) {
        Sealed bad = s;
        bad.bytes[at] ^= 0x20;
        INFO("byte " << at);
        CHECK_FALSE(decodes(bad, c.get(), 7).is_ok());
    }
    // A prefix that claims no compression (method bits cleared) is bound too.
    Sealed relabeled = s;
    relabeled.bytes[0] = static_cast<std::uint8_t>(relabeled.bytes[0] & ~0x03);
    CHECK_FALSE(decodes(relabeled, c.get(), 7).is_ok());
}

TEST_CASE("sealed payloads: a plain decoder's prefix rules still hold", "[chunk][cipher]") {
    // Method none is a payload only when sealed; an unknown flag is refused.
    const char none_plain[] = {static_cast<char>(0x80), 0, 0, 8, 'a', 'b'};
    CodecPrefix p;
    CHECK_FALSE(read_codec_prefix(none_plain, sizeof none_plain, &p));
    const char unknown_flag[] = {static_cast<char>(0x80 | 0x08 | 1), 0, 0, 8, 'a', 'b'};
    CHECK_FALSE(read_codec_prefix(unknown_flag, sizeof unknown_flag, &p));
    const char lz4_plain[] = {static_cast<char>(0x80 | 1), 0, 0, 8, 'a', 'b'};
    REQUIRE(read_codec_prefix(lz4_plain, sizeof lz4_plain, &p));
    CHECK_FALSE(p.sealed);
}
