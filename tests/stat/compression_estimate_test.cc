// hiodsfs-stat --estimate's compression figures without a mount: on a tree
// of two identical files, a random file and text, the deduplication and
// every method's stored bytes equal what a model computes chunk by chunk
// with the store's codec; random bytes stay raw; the helpers change
// nothing; and the cache carries the sizes.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "chunk/codec.h"
#include "chunk/fingerprint.h"
#include "hiodsfs/segment_store.h"
#include "stat/estimate.h"
#include "stat_test_util.h"

using namespace hiodsfs;

namespace {

using test::ScratchDir;
using test::write_whole_file;

// Prose-like text from a vocabulary large enough that no two 4 KiB blocks
// are equal, small enough that every method finds repeats.
std::string prose(std::size_t n, unsigned seed) {
    static const char* words[] = {"the ",   "chunk ", "store ",   "segment ", "record ", "of ",
                                  "a ",     "file ",  "written ", "to ",      "disk, ",  "and ",
                                  "read\n", "back ",  "when ",    "its ",     "map ",    "says; ",
                                  "every ", "byte ",  "counts. ", "while ",   "the ",    "pass "};
    std::mt19937 rng(seed);
    std::string s;
    while (s.size() < n) s += words[rng() % (sizeof(words) / sizeof(words[0]))];
    s.resize(n);
    return s;
}

std::string noise(std::size_t n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

std::vector<Compression> methods_of(std::initializer_list<const char*> names) {
    std::vector<Compression> out;
    for (const char* n : names) {
        Compression c;
        REQUIRE(parse_compression(n, &c));
        out.push_back(c);
    }
    return out;
}

// The model: files cut into 4 KiB blocks, the distinct ones (by SHA-256)
// each encoded with the store's codec, plus a record header each.
struct Model {
    std::uint64_t logical = 0, unique_bytes = 0, chunks = 0, unique_chunks = 0;
    std::vector<std::uint64_t> stored;   // by method
    std::vector<std::uint64_t> encoded;  // by method
};
Model model_of(const std::vector<std::string>& files, const std::vector<Compression>& methods) {
    Model m;
    m.stored.resize(methods.size());
    m.encoded.resize(methods.size());
    std::set<std::string> seen;
    Sha256 sha;
    ChunkEncoder enc;
    for (const auto& f : files) {
        for (std::size_t off = 0; off < f.size(); off += 4096) {
            const std::string block = f.substr(off, 4096);
            const Digest d = sha.digest(block.data(), block.size());
            m.logical += block.size();
            ++m.chunks;
            if (!seen.insert(std::string(d.bytes.begin(), d.bytes.end())).second) continue;
            m.unique_bytes += block.size();
            ++m.unique_chunks;
            for (std::size_t i = 0; i < methods.size(); ++i) {
                const auto p =
                    enc.encode(block.data(), static_cast<std::uint32_t>(block.size()), methods[i]);
                m.stored[i] += p.length + SegmentStore::kHeaderBytes;
                m.encoded[i] += p.encoded ? 1 : 0;
            }
        }
    }
    return m;
}

// The compression figures describe the first chunking's distinct chunks.
void check_consistent(const stat::EstimateReport& r) {
    for (const auto& f : r.compression) {
        CHECK(f.raw_bytes == r.results.at(0).stored_bytes);
        CHECK(f.chunks == r.results.at(0).unique_chunks);
        CHECK(f.logical_bytes == r.results.at(0).logical_bytes);
    }
}

}  // namespace

TEST_CASE(
    "estimate: dedup and compression figures equal a chunk-by-chunk model of the store's codec",
    "[stat][estimate][compression]") {
    ScratchDir d;
    const std::string root = d.path + "/tree";
    std::filesystem::create_directories(root + "/docs");
    const std::string text = prose(200 * 1024 + 123, 1), other = prose(96 * 1024, 2),
                      random = noise(256 * 1024, 3);
    write_whole_file(root + "/docs/a.txt", text);
    write_whole_file(root + "/docs/b.txt", text);  // identical: stored once
    write_whole_file(root + "/random.bin", random);
    write_whole_file(root + "/other.txt", other);
    const auto methods = methods_of({"lz4", "zstd:3", "zstd:9"});
    const Model want = model_of({text, text, random, other}, methods);

    stat::EstimateOptions o;
    o.roots = {root};
    o.chunkings = {ChunkingParams::fixed(4096), ChunkingParams::cdc(2048, 8192, 32768)};
    o.compressions = methods;
    stat::EstimateReport r;
    for (unsigned helpers : {0u, 1u}) {
        INFO("helpers " << helpers);
        o.helpers = helpers;
        REQUIRE(stat::run_estimate(o, &r));
        CHECK(r.files == 4);
        const auto& x = r.results.at(0);
        CHECK(x.logical_bytes == want.logical);
        CHECK(x.chunks == want.chunks);
        CHECK(x.unique_chunks == want.unique_chunks);
        CHECK(x.stored_bytes == want.unique_bytes);
        CHECK(x.ratio() ==
              Approx(static_cast<double>(want.logical) / static_cast<double>(want.unique_bytes)));
        REQUIRE(r.compression.size() == methods.size());
        check_consistent(r);
        for (std::size_t i = 0; i < methods.size(); ++i) {
            const auto& f = r.compression[i];
            INFO(compression_name(f.method));
            CHECK(f.method == methods[i]);
            CHECK(f.stored_bytes == want.stored[i]);
            CHECK(f.encoded_chunks == want.encoded[i]);
            CHECK(f.ratio() == Approx(static_cast<double>(want.unique_bytes) /
                                      static_cast<double>(want.stored[i])));
            CHECK(f.combined_ratio() == Approx(x.ratio() * f.ratio()));
            // Every distinct chunk was encoded in this run, and that took time.
            CHECK(f.timed_bytes == want.unique_bytes);
            CHECK(f.cpu_s > 0);
            CHECK(f.cpu_s_per_gib().has_value());
        }
        // The random file stays as it is (plus headers), the text shrinks
        // by more than a third; zstd more than lz4.
        const std::uint64_t random_stored = random.size() + 64 * SegmentStore::kHeaderBytes;
        for (const auto& f : r.compression)
            CHECK(f.stored_bytes - random_stored < (text.size() + other.size()) * 6 / 10);
        CHECK(r.compression[1].stored_bytes < r.compression[0].stored_bytes);
    }

    // Random bytes alone: every chunk stays raw, and costs a record header.
    stat::EstimateOptions ro = o;
    std::filesystem::create_directories(d.path + "/noise");
    write_whole_file(d.path + "/noise/random.bin", random);
    ro.roots = {d.path + "/noise"};
    REQUIRE(stat::run_estimate(ro, &r));
    check_consistent(r);
    for (const auto& f : r.compression) {
        INFO(compression_name(f.method));
        CHECK(f.encoded_chunks == 0);
        CHECK(f.stored_bytes == random.size() + 64 * SegmentStore::kHeaderBytes);
        CHECK(f.ratio() > 0.99);
        CHECK(f.ratio() < 1.0);
    }

    // No methods: no compression figures.
    ro.compressions.clear();
    REQUIRE(stat::run_estimate(ro, &r));
    CHECK(r.compression.empty());
}

TEST_CASE("estimate: the cache carries compressed sizes, for the methods they were measured with",
          "[stat][estimate][compression]") {
    ScratchDir d;
    const std::string root = d.path + "/tree";
    std::filesystem::create_directories(root);
    for (unsigned i = 0; i < 6; ++i)
        write_whole_file(root + "/t" + std::to_string(i), prose(64 * 1024 + i * 999, 10 + i));
    write_whole_file(root + "/copy", prose(64 * 1024, 10));
    write_whole_file(root + "/random", noise(100 * 1024, 5));
    stat::EstimateOptions o;
    o.roots = {root};
    o.chunkings = {ChunkingParams::cdc(2048, 8192, 32768)};
    o.compressions = methods_of({"lz4", "zstd:3"});
    o.cache_path = d.path + "/estimate.cache";

    stat::EstimateReport first, cached;
    REQUIRE(stat::run_estimate(o, &first));
    CHECK(first.bytes_read == first.apparent_bytes);
    check_consistent(first);
    REQUIRE(stat::run_estimate(o, &cached));
    CHECK(cached.bytes_read == 0);
    CHECK(cached.files_cached == first.files);
    check_consistent(cached);
    REQUIRE(cached.compression.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
        CHECK(cached.compression[i].stored_bytes == first.compression[i].stored_bytes);
        CHECK(cached.compression[i].encoded_chunks == first.compression[i].encoded_chunks);
        // Nothing was encoded, so no CPU figure.
        CHECK(cached.compression[i].timed_bytes == 0);
        CHECK_FALSE(cached.compression[i].cpu_s_per_gib().has_value());
    }

    // Other methods: the sizes are measured again, so the files are read.
    stat::EstimateOptions other = o;
    other.compressions = methods_of({"zstd:1"});
    stat::EstimateReport measured;
    REQUIRE(stat::run_estimate(other, &measured));
    CHECK(measured.bytes_read == measured.apparent_bytes);
    check_consistent(measured);
    CHECK(measured.compression.at(0).timed_bytes == measured.results[0].stored_bytes);

    // A run without compression needs only fingerprints, and keeps the
    // sizes in the cache for the next run that asks for them.
    stat::EstimateOptions plain = o;
    plain.compressions.clear();
    stat::EstimateReport fingerprints, again;
    REQUIRE(stat::run_estimate(plain, &fingerprints));
    CHECK(fingerprints.bytes_read == 0);
    REQUIRE(stat::run_estimate(other, &again));
    CHECK(again.bytes_read == 0);
    CHECK(again.compression.at(0).stored_bytes == measured.compression.at(0).stored_bytes);

    // A file that changed is read again; its new chunks are encoded, the
    // rest come from the cache.
    write_whole_file(root + "/t0", prose(64 * 1024, 77));
    stat::EstimateReport changed;
    REQUIRE(stat::run_estimate(other, &changed));
    CHECK(changed.files_read == 1);
    check_consistent(changed);
    CHECK(changed.compression.at(0).timed_bytes > 0);
    CHECK(changed.compression.at(0).timed_bytes <= 64 * 1024);
}
