// Chunkers: cut points independent of how input is split, size bounds,
// reset(), agreement with a plain byte-at-a-time model of the CDC rule, and
// the dedup behaviour that motivates CDC (an insertion shifts few chunks).
#include "hiodsfs/chunker.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <functional>
#include <numeric>
#include <unordered_set>

#include "chunk/chunker_impl.h"
#include "chunk/fingerprint.h"
#include "test_data.h"

using hiodsfs::Chunker;
using hiodsfs::ChunkingParams;
using hiodsfs::test::random_bytes;

namespace {

constexpr std::size_t kMiB = 1 << 20;

// Feeds data in pieces whose sizes `piece()` chooses and returns the absolute
// offsets of all cuts (the end of data is not included).
std::vector<std::uint64_t> cuts_fed(const ChunkingParams& params,
                                    const std::vector<std::uint8_t>& d,
                                    const std::function<std::size_t()>& piece) {
    auto chunker = Chunker::make(params);
    REQUIRE(chunker);
    std::vector<std::uint64_t> cuts;
    std::size_t pos = 0;
    while (pos < d.size()) {
        const std::size_t end = std::min(d.size(), pos + piece());
        while (pos < end) {
            const std::size_t n = chunker->next_cut(d.data() + pos, end - pos);
            if (n == Chunker::kNoCut) {
                pos = end;
            } else {
                REQUIRE(n >= 1);
                REQUIRE(n <= end - pos);
                pos += n;
                cuts.push_back(pos);
            }
        }
    }
    return cuts;
}

// Same as cuts_fed with one byte per call, without std::function overhead:
// 64 Mi virtual calls must stay quick even under sanitizers.
std::vector<std::uint64_t> cuts_bytewise(const ChunkingParams& params,
                                         const std::vector<std::uint8_t>& d) {
    auto chunker = Chunker::make(params);
    std::vector<std::uint64_t> cuts;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (chunker->next_cut(d.data() + i, 1) != Chunker::kNoCut) cuts.push_back(i + 1);
    }
    return cuts;
}

// The CDC rule written as plainly as possible, independently of the fast
// multi-lane scanner: skip min bytes, then roll and test the high bits.
std::vector<std::uint64_t> cdc_model_cuts(const ChunkingParams& p,
                                          const std::vector<std::uint8_t>& d) {
    const std::uint64_t* gear = hiodsfs::chunk_detail::gear_table();
    const unsigned bits = static_cast<unsigned>(std::countr_zero(p.avg_size));
    const std::uint64_t strict = ~std::uint64_t{0} << (64 - (bits + 2));
    const std::uint64_t loose = ~std::uint64_t{0} << (64 - (bits - 2));
    std::vector<std::uint64_t> cuts;
    std::uint64_t len = 0, h = 0;
    for (std::size_t i = 0; i < d.size(); ++i) {
        ++len;
        bool cut = false;
        if (len > p.min_size) {
            h = (h << 1) + gear[d[i]];
            cut = (h & (len <= p.avg_size ? strict : loose)) == 0;
        }
        if (cut || len == p.max_size) {
            cuts.push_back(i + 1);
            len = 0;
            h = 0;
        }
    }
    return cuts;
}

std::vector<std::uint32_t> lengths_of(const std::vector<std::uint64_t>& cuts, std::size_t total) {
    std::vector<std::uint32_t> out;
    std::uint64_t prev = 0;
    for (auto c : cuts) {
        out.push_back(static_cast<std::uint32_t>(c - prev));
        prev = c;
    }
    if (prev < total) out.push_back(static_cast<std::uint32_t>(total - prev));
    return out;
}

}  // namespace

TEST_CASE("cut points do not depend on input piece sizes", "[chunker]") {
    const auto data = random_bytes(64 * kMiB, 1);
    const ChunkingParams params =
        GENERATE(ChunkingParams::fixed(4096), ChunkingParams::fixed(65536), ChunkingParams{});
    INFO("params " << params.describe());

    const auto whole = cuts_fed(params, data, [] { return std::size_t{1} << 40; });
    REQUIRE(whole.size() > 1000);
    CHECK(lengths_of(whole, data.size()) ==
          hiodsfs::chunk_lengths(params, data.data(), data.size()));

    CHECK(cuts_fed(params, data, [] { return std::size_t{4096}; }) == whole);
    CHECK(cuts_fed(params, data, [] { return std::size_t{128 * 1024}; }) == whole);
    std::uint64_t seed = 7;
    const auto random_piece = [&seed]() -> std::size_t {
        const std::uint64_t r = hiodsfs::test::splitmix64(seed);
        // Mostly small pieces (FUSE writes, odd tails), sometimes large ones.
        return (r & 3) == 0 ? 1 + (r >> 8) % 300000 : 1 + (r >> 8) % 5000;
    };
    CHECK(cuts_fed(params, data, random_piece) == whole);
    CHECK(cuts_bytewise(params, data) == whole);
}

TEST_CASE("CDC chunker matches the byte-at-a-time model of the rule", "[chunker][cdc]") {
    const auto data = random_bytes(16 * kMiB, 2);
    const ChunkingParams params = GENERATE(
        ChunkingParams{}, ChunkingParams::cdc(256, 512, 1024),
        ChunkingParams::cdc(1024, 4096, 16384), ChunkingParams::cdc(2048, 8192, 65536),
        ChunkingParams::cdc(16384, 65536, 262144), ChunkingParams::cdc(512, 4096, 4194304));
    INFO("params " << params.describe());
    const auto model = cdc_model_cuts(params, data);
    REQUIRE(model.size() > 50);
    CHECK(cuts_fed(params, data, [] { return std::size_t{1} << 40; }) == model);
    CHECK(cuts_fed(params, data, [] { return std::size_t{3001}; }) == model);
}

TEST_CASE("CDC cut points are pinned (the Gear table is part of the format)", "[chunker][cdc]") {
    // Changing the Gear constants or the cut rule would silently break dedup
    // against every existing store; this must fail first.
    const std::uint64_t* gear = hiodsfs::chunk_detail::gear_table();
    CHECK(gear[0] == 0xb591005810c6afb3ull);
    CHECK(gear[255] == 0x08a3fa7b7d1383aaull);
    const auto data = random_bytes(1 * kMiB, 42);
    const auto lens =
        hiodsfs::chunk_lengths(ChunkingParams::cdc(4096, 16384, 65536), data.data(), data.size());
    const std::vector<std::uint32_t> expected_prefix = {8307,  21302, 19599, 17004,
                                                        18712, 33292, 26798, 12509};
    REQUIRE(lens.size() >= expected_prefix.size());
    CHECK(std::vector<std::uint32_t>(lens.begin(), lens.begin() + expected_prefix.size()) ==
          expected_prefix);
    CHECK(lens.size() == 55u);
}

TEST_CASE("CDC chunk sizes respect min/max and average near avg", "[chunker][cdc]") {
    const auto data = random_bytes(64 * kMiB, 3);
    const std::uint32_t avg = GENERATE(4096u, 8192u, 16384u, 32768u, 65536u);
    const auto params = ChunkingParams::cdc(avg / 4, avg, avg * 4);
    INFO("params " << params.describe());
    const auto lens = hiodsfs::chunk_lengths(params, data.data(), data.size());
    REQUIRE(lens.size() > 500);
    // Every chunk but the last one is longer than min (hashing starts at
    // min, the earliest cut is after the first hashed byte) and at most max.
    const auto body = std::vector<std::uint32_t>(lens.begin(), lens.end() - 1);
    CHECK(*std::min_element(body.begin(), body.end()) > params.min_size);
    CHECK(*std::max_element(lens.begin(), lens.end()) <= params.max_size);
    CHECK(std::accumulate(lens.begin(), lens.end(), std::uint64_t{0}) == data.size());
    const double mean = static_cast<double>(data.size()) / static_cast<double>(lens.size());
    // Normalized chunking with min = avg/4 gives a mean of about 1.1 x avg.
    CHECK(mean > 0.9 * avg);
    CHECK(mean < 1.3 * avg);
    // Chunks forced at max should be rare on random data (normalization).
    const auto at_max = std::count(body.begin(), body.end(), params.max_size);
    CHECK(static_cast<double>(at_max) < 0.001 * static_cast<double>(body.size()) + 1);
}

TEST_CASE("fixed chunker cuts on the absolute size grid", "[chunker][fixed]") {
    auto c = Chunker::make(ChunkingParams::fixed(4096));
    REQUIRE(c);
    std::vector<std::uint8_t> buf(20000, 0xab);
    CHECK(c->pending() == 0);
    CHECK(c->next_cut(buf.data(), 0) == Chunker::kNoCut);
    CHECK(c->next_cut(buf.data(), 1000) == Chunker::kNoCut);
    CHECK(c->pending() == 1000);
    CHECK(c->next_cut(buf.data(), 20000) == 3096);
    CHECK(c->pending() == 0);
    CHECK(c->next_cut(buf.data(), 4096) == 4096);

    SECTION("reset at a multiple of the size starts a whole chunk") {
        c->reset(8192);
        CHECK(c->pending() == 0);
        CHECK(c->next_cut(buf.data(), 4095) == Chunker::kNoCut);
        CHECK(c->next_cut(buf.data(), 10) == 1);
    }
    SECTION("reset anywhere else cuts at the next multiple") {
        c->reset(5000);
        CHECK(c->pending() == 0);
        CHECK(c->next_cut(buf.data(), 20000) == 8192 - 5000);
        CHECK(c->next_cut(buf.data(), 20000) == 4096);
        c->next_cut(buf.data(), 100);
        c->reset(4095);
        CHECK(c->next_cut(buf.data(), 20000) == 1);
    }
}

TEST_CASE("CDC reset starts a fresh chunk wherever it is called", "[chunker][cdc]") {
    const auto data = random_bytes(4 * kMiB, 4);
    const ChunkingParams params;
    const auto fresh = hiodsfs::chunk_lengths(params, data.data(), data.size());

    auto c = Chunker::make(params);
    REQUIRE(c);
    // Leave state behind in every phase: inside min, the strict and the loose
    // region, then reset and expect exactly the fresh chunker's cuts.
    for (std::size_t partial : {std::size_t{100}, std::size_t{5000}, std::size_t{20000}}) {
        // Junk that holds no cut of its own (found deterministically), so the
        // reset really interrupts an open chunk.
        std::vector<std::uint8_t> junk;
        for (std::uint64_t seed = 100;; ++seed) {
            junk = random_bytes(partial, seed);
            if (hiodsfs::chunk_lengths(params, junk.data(), junk.size()).size() == 1) break;
        }
        CHECK(c->next_cut(junk.data(), junk.size()) == Chunker::kNoCut);
        CHECK(c->pending() == partial);
        c->reset(123456);
        CHECK(c->pending() == 0);
        std::vector<std::uint32_t> lens;
        std::size_t pos = 0, start = 0;
        while (pos < data.size()) {
            const std::size_t n = c->next_cut(data.data() + pos, data.size() - pos);
            if (n == Chunker::kNoCut) break;
            pos += n;
            lens.push_back(static_cast<std::uint32_t>(pos - start));
            start = pos;
        }
        lens.push_back(static_cast<std::uint32_t>(data.size() - start));
        CHECK(lens == fresh);
        c->reset(0);
    }
    CHECK(c->next_cut(data.data(), 0) == Chunker::kNoCut);
    CHECK(c->pending() == 0);
}

TEST_CASE("invalid parameters give no chunker", "[chunker]") {
    CHECK_FALSE(Chunker::make(ChunkingParams::fixed(1000)));
    CHECK_FALSE(Chunker::make(ChunkingParams::cdc(4096, 4096, 65536)));
    std::uint8_t b = 0;
    CHECK(hiodsfs::chunk_lengths(ChunkingParams::fixed(3), &b, 1).empty());
}

namespace {

std::vector<hiodsfs::Digest> chunk_digests(const ChunkingParams& params,
                                           const std::vector<std::uint8_t>& d) {
    const auto lens = hiodsfs::chunk_lengths(params, d.data(), d.size());
    std::vector<hiodsfs::Digest> out;
    out.reserve(lens.size());
    std::size_t pos = 0;
    for (auto l : lens) {
        out.push_back(hiodsfs::thread_sha256().digest(d.data() + pos, l));
        pos += l;
    }
    return out;
}

struct DigestHash {
    std::size_t operator()(const hiodsfs::Digest& d) const {
        std::size_t h;
        std::memcpy(&h, d.bytes.data(), sizeof h);
        return h;
    }
};

// Fraction of the original's chunks (by count) whose digest the edited
// version also has.
double shared_fraction(const ChunkingParams& params, const std::vector<std::uint8_t>& original,
                       const std::vector<std::uint8_t>& edited) {
    const auto a = chunk_digests(params, original);
    const auto b = chunk_digests(params, edited);
    const std::unordered_set<hiodsfs::Digest, DigestHash> in_b(b.begin(), b.end());
    const auto shared =
        std::count_if(a.begin(), a.end(), [&](const auto& d) { return in_b.count(d) > 0; });
    return static_cast<double>(shared) / static_cast<double>(a.size());
}

}  // namespace

TEST_CASE("a small insertion near the start keeps CDC chunks shared, not fixed ones",
          "[chunker][dedup]") {
    const auto original = random_bytes(100 * kMiB, 5);
    std::vector<std::uint8_t> edited;
    edited.reserve(original.size() + 5);
    const std::size_t at = 1000;
    edited.insert(edited.end(), original.begin(), original.begin() + at);
    for (std::uint8_t b : {'h', 'i', 'o', 'd', 's'}) edited.push_back(b);
    edited.insert(edited.end(), original.begin() + at, original.end());

    const double cdc = shared_fraction(ChunkingParams{}, original, edited);
    INFO("cdc shared " << cdc);
    CHECK(cdc >= 0.99);
    const double fixed = shared_fraction(ChunkingParams::fixed(4096), original, edited);
    INFO("fixed shared " << fixed);
    CHECK(fixed < 0.01);
}
