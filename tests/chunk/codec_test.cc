#include "chunk/codec.h"

#include <zdict.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

using namespace hiodsfs;

namespace {

// Text-like bytes: words from a small vocabulary, compressible by any method.
std::string word_bytes(std::size_t n, unsigned seed) {
    static const char* words[] = {"alpha ", "beta ", "gamma ", "delta\n", "epsilon ", "zeta; ", "eta ",
                                  "theta(", ") ", "iota, "};
    std::mt19937 rng(seed);
    std::string s;
    while (s.size() < n) s += words[rng() % 10];
    s.resize(n);
    return s;
}

std::string noise_bytes(std::size_t n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

Compression parse(const char* text) {
    Compression c;
    REQUIRE(parse_compression(text, &c));
    return c;
}

void round_trip(const std::string& raw, const Compression& c, const Dictionary* dict = nullptr,
                const DictionarySet* dicts = nullptr) {
    ChunkEncoder enc;
    ChunkEncoder::Payload p = enc.encode(raw.data(), static_cast<std::uint32_t>(raw.size()), c, dict);
    REQUIRE(p.encoded);
    CHECK(p.length <= raw.size() * kWorthIt);
    CodecPrefix prefix;
    REQUIRE(read_codec_prefix(p.data, p.length, &prefix));
    CHECK(prefix.method == c.method);
    CHECK(prefix.level == c.level);
    CHECK(prefix.raw_length == raw.size());
    CHECK(prefix.dictionary == (dict != nullptr ? dict->id() : 0u));
    std::string back(raw.size(), '\0');
    REQUIRE(decode_chunk(p.data, p.length, back.data(), static_cast<std::uint32_t>(raw.size()), dicts));
    CHECK(back == raw);
}

}  // namespace

TEST_CASE("compression options parse and name themselves", "[codec]") {
    CHECK(parse("none").none());
    CHECK(parse("lz4").method == CompressionMethod::kLz4);
    CHECK(parse("zstd") == Compression{CompressionMethod::kZstd, kDefaultZstdLevel});
    CHECK(parse("zstd:19").level == 19);
    CHECK(compression_name(parse("zstd:9")) == "zstd:9");
    CHECK(compression_name(parse("lz4")) == "lz4");
    CHECK(compression_name(parse("none")) == "none");
    for (const char* bad : {"", "zstd:", "zstd:0", "zstd:20", "zstd:x", "zstd9", "gzip", "lz4:1", "zstd:-1"}) {
        Compression c;
        Status st = parse_compression(bad, &c);
        CHECK(st.err() == EINVAL);
        CHECK(st.message().find("compression '") == 0);
    }
}

TEST_CASE("every method and level round-trips a chunk", "[codec]") {
    const std::string raw = word_bytes(8192, 1);
    round_trip(raw, parse("lz4"));
    for (int level : {1, 3, 9, 19}) round_trip(raw, Compression{CompressionMethod::kZstd, level});
    // Sizes a chunker makes: small, odd, the largest.
    for (std::size_t n : {300u, 4097u, 65536u, 1u << 20}) round_trip(word_bytes(n, 7), parse("zstd:3"));
}

TEST_CASE("a chunk that does not shrink is stored as it is", "[codec]") {
    ChunkEncoder enc;
    for (const char* method : {"lz4", "zstd:3", "zstd:19"}) {
        const std::string raw = noise_bytes(8192, 3);
        ChunkEncoder::Payload p = enc.encode(raw.data(), 8192, parse(method), nullptr);
        CHECK_FALSE(p.encoded);
        CHECK(p.data == raw.data());
        CHECK(p.length == 8192);
    }
    CHECK(enc.compressed() == 0);
    CHECK(enc.skipped() == 3);
    // "none" never compresses, and a tiny chunk is not worth a prefix.
    const std::string text = word_bytes(8192, 2);
    CHECK_FALSE(enc.encode(text.data(), 8192, parse("none")).encoded);
    CHECK_FALSE(enc.encode(text.data(), 10, parse("zstd")).encoded);
}

TEST_CASE("the entropy sample tells random bytes from text", "[codec]") {
    for (std::size_t n : {256u, 1000u, 4096u, 65536u}) {
        CHECK(looks_incompressible(noise_bytes(n, 5).data(), static_cast<std::uint32_t>(n)));
        CHECK_FALSE(looks_incompressible(word_bytes(n, 5).data(), static_cast<std::uint32_t>(n)));
    }
    // Half random, half zeros compresses to about half: worth trying.
    std::string half = noise_bytes(8192, 6);
    std::fill(half.begin() + 4096, half.end(), '\0');
    CHECK_FALSE(looks_incompressible(half.data(), 8192));
    // Random 8-byte words whose first byte takes one of 16 values (as in
    // fio's random buffers): zstd gains nothing on them, and a sample of
    // single bytes 8 apart would see only that lane.
    for (std::uint32_t n : {8192u, 12288u, 32768u}) {
        std::string words = noise_bytes(n, 7);
        for (std::size_t i = 0; i < words.size(); i += 8) words[i] = static_cast<char>(words[i] & 0x0f);
        INFO(n);
        CHECK(looks_incompressible(words.data(), n));
        ChunkEncoder enc;
        Compression zstd;
        REQUIRE(parse_compression("zstd:3", &zstd));
        CHECK_FALSE(enc.encode(words.data(), n, zstd).encoded);
    }
}

TEST_CASE("a dictionary is named in the payload and needed to read it", "[codec]") {
    // Train on samples of the text, as a store trains on its chunks.
    std::string samples;
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; i < 400; ++i) {
        const std::string s = word_bytes(1024, 100 + i);
        samples += s;
        sizes.push_back(s.size());
    }
    std::string dict_bytes(16 * 1024, '\0');
    const std::size_t n = ZDICT_trainFromBuffer(dict_bytes.data(), dict_bytes.size(), samples.data(),
                                                sizes.data(), static_cast<unsigned>(sizes.size()));
    REQUIRE_FALSE(ZDICT_isError(n));
    dict_bytes.resize(n);
    std::shared_ptr<const Dictionary> dict;
    REQUIRE(Dictionary::make(7, dict_bytes, &dict));
    DictionarySet dicts;
    dicts.add(dict);
    CHECK(dicts.newest()->id() == 7);

    const std::string raw = word_bytes(2048, 9);
    round_trip(raw, parse("zstd:3"), dict.get(), &dicts);

    ChunkEncoder enc;
    ChunkEncoder::Payload p = enc.encode(raw.data(), 2048, parse("zstd:3"), dict.get());
    REQUIRE(p.encoded);
    std::string back(2048, '\0');
    Status st = decode_chunk(p.data, p.length, back.data(), 2048, nullptr);
    CHECK(st.err() == EIO);
    CHECK(st.message().find("dictionary 7 is not in the store") != std::string::npos);
    DictionarySet other;
    CHECK(decode_chunk(p.data, p.length, back.data(), 2048, &other).err() == EIO);

    std::shared_ptr<const Dictionary> junk;
    CHECK(Dictionary::make(0, dict_bytes, &junk).err() == EINVAL);
}

TEST_CASE("damaged compressed bytes are EIO, never a crash", "[codec]") {
    const std::string raw = word_bytes(16384, 11);
    for (const char* method : {"lz4", "zstd:3"}) {
        ChunkEncoder enc;
        ChunkEncoder::Payload p = enc.encode(raw.data(), 16384, parse(method));
        REQUIRE(p.encoded);
        const std::string good(p.data, p.length);
        std::string back(raw.size(), '\0');
        // Each byte flipped in turn (the prefix too), and every cut.
        std::size_t rejected = 0;
        for (std::size_t i = 0; i < good.size(); ++i) {
            std::string bad = good;
            bad[i] = static_cast<char>(bad[i] ^ 0x5a);
            Status st = decode_chunk(bad.data(), static_cast<std::uint32_t>(bad.size()), back.data(), 16384, nullptr);
            if (!st) {
                CHECK(st.err() == EIO);
                ++rejected;
            }
        }
        // The segment record's CRC catches every flip; the decoder alone
        // must reject most and never overrun.
        CHECK(rejected > good.size() / 2);
        for (std::size_t cut = 0; cut < good.size(); cut += 7) {
            CHECK_FALSE(decode_chunk(good.data(), static_cast<std::uint32_t>(cut), back.data(), 16384, nullptr));
        }
        // The wrong expected size.
        CHECK(decode_chunk(good.data(), static_cast<std::uint32_t>(good.size()), back.data(), 16383, nullptr).err() == EIO);
    }
}

TEST_CASE("the prefix takes 5 or 6 bytes for a chunk of a few KiB, and the old 12-byte one still reads",
          "[codec]") {
    const std::string raw = word_bytes(8192, 21);
    ChunkEncoder enc;
    for (const char* method : {"lz4", "zstd:6"}) {
        INFO(method);
        ChunkEncoder::Payload p = enc.encode(raw.data(), 8192, parse(method));
        REQUIRE(p.encoded);
        CodecPrefix prefix;
        REQUIRE(read_codec_prefix(p.data, p.length, &prefix));
        // 0x80|method, level, dictionary 0 (1 byte), 8192 (2 bytes).
        CHECK(prefix.bytes == 5);
        CHECK(static_cast<std::uint8_t>(p.data[0]) == (0x80 | static_cast<int>(parse(method).method)));
    }
    // The first 0.6.0 builds' form: method, level, 0, 0, dictionary u32,
    // length u32 (little-endian), then the same compressed bytes.
    ChunkEncoder::Payload p = enc.encode(raw.data(), 8192, parse("zstd:3"));
    REQUIRE(p.encoded);
    CodecPrefix now;
    REQUIRE(read_codec_prefix(p.data, p.length, &now));
    std::string old = {2, 3, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0};
    old.append(p.data + now.bytes, p.length - now.bytes);
    CodecPrefix was;
    REQUIRE(read_codec_prefix(old.data(), static_cast<std::uint32_t>(old.size()), &was));
    CHECK(was.bytes == 12);
    CHECK(was.method == CompressionMethod::kZstd);
    CHECK(was.level == 3);
    CHECK(was.raw_length == 8192);
    std::string back(8192, '\0');
    REQUIRE(decode_chunk(old.data(), static_cast<std::uint32_t>(old.size()), back.data(), 8192, nullptr));
    CHECK(back == raw);
    // Prefixes this program never writes: a flag bit it does not know (the
    // sealed one, 0x04, is an encrypted store's: sealed_codec_test.cc), an unknown
    // method, a length in a longer form than it needs, one past 32 bits,
    // one that runs off the end, a zero length.
    const std::string body(p.data + now.bytes, p.length - now.bytes);
    for (const std::string& bad : {std::string{'\x8a', 3, 0, '\x80', '\x40'}, std::string{'\x83', 3, 0, '\x80', '\x40'},
                                   std::string{'\x82', 3, '\x80', 0, '\x80', '\x40'},
                                   std::string{'\x82', 3, 0, '\xff', '\xff', '\xff', '\xff', '\x7f'},
                                   std::string{'\x82', 3, 0, '\x80'}, std::string{'\x82', 3, 0, 0}}) {
        const std::string payload = bad + body;
        CodecPrefix x;
        CHECK_FALSE(read_codec_prefix(payload.data(), static_cast<std::uint32_t>(bad.size()), &x));
        if (bad.size() > 4) CHECK_FALSE(read_codec_prefix(payload.data(), static_cast<std::uint32_t>(payload.size()), &x));
        CHECK(decode_chunk(payload.data(), static_cast<std::uint32_t>(payload.size()), back.data(), 8192, nullptr).err() ==
              EIO);
    }
}

TEST_CASE("stronger_than says when compaction recompresses", "[codec]") {
    const Compression z9{CompressionMethod::kZstd, 9};
    CHECK(z9.stronger_than(CompressionMethod::kNone, 0));
    CHECK(z9.stronger_than(CompressionMethod::kLz4, 0));
    CHECK(z9.stronger_than(CompressionMethod::kZstd, 3));
    CHECK_FALSE(z9.stronger_than(CompressionMethod::kZstd, 9));
    CHECK_FALSE(z9.stronger_than(CompressionMethod::kZstd, 19));
    const Compression lz4{CompressionMethod::kLz4, 0};
    CHECK(lz4.stronger_than(CompressionMethod::kNone, 0));
    CHECK_FALSE(lz4.stronger_than(CompressionMethod::kLz4, 0));
    CHECK_FALSE(lz4.stronger_than(CompressionMethod::kZstd, 1));
    CHECK_FALSE(Compression{}.stronger_than(CompressionMethod::kNone, 0));
}

TEST_CASE("train_dictionary trains on chunk samples, and says why it cannot",
          "[codec][dictionary]") {
    std::string samples;
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; i < 300; ++i) {
        const std::string s = word_bytes(2048, 500 + i);
        samples += s;
        sizes.push_back(s.size());
    }
    std::string bytes;
    REQUIRE(train_dictionary(samples, sizes, 16 * 1024, &bytes));
    CHECK(bytes.size() > 1024);
    CHECK(bytes.size() <= 16 * 1024);
    std::shared_ptr<const Dictionary> dict;
    REQUIRE(Dictionary::make(1, bytes, &dict));
    DictionarySet dicts;
    dicts.add(dict);
    // A chunk of the same kind shrinks further with it.
    const std::string raw = word_bytes(4096, 77);
    ChunkEncoder enc;
    const std::uint32_t plain = enc.encode(raw.data(), 4096, parse("zstd:9")).length;
    const std::uint32_t with = enc.encode(raw.data(), 4096, parse("zstd:9"), dict.get()).length;
    CHECK(with < plain);
    round_trip(raw, parse("zstd:9"), dict.get(), &dicts);

    // Too little to learn from: an error that says so, and nothing made.
    std::string out = "untouched";
    const Status st = train_dictionary(samples.substr(0, 30), {10, 10, 10}, 16 * 1024, &out);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("no compression dictionary") != std::string::npos);
    CHECK(out == "untouched");
    CHECK(train_dictionary("", {}, 16 * 1024, &out).err() == EINVAL);
}
