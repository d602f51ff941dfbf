// hiodsfs-chunkbench: per-core throughput of the chunkers, of SHA-256, of
// the segment records' CRC-32C and of an encrypted store's sealing (both
// of its ciphers, chunk/cipher.h) on random data, and (--compression) of
// the chunk codec on a tree's chunks and on random bytes, so performance
// claims in docs/chunking.md and docs/benchmarks.md are reproducible.
//
//   hiodsfs-chunkbench [--size MiB] [--repeat N] [--threads N] [--slice MiB]
//                      [--cdc cdc:MIN/AVG/MAX] [--fixed fixed:SIZE]
//   hiodsfs-chunkbench --compression [--methods LIST] [--random MiB] [--limit MiB]
//                      [--dictionary KiB] [--group KiB[,KiB...]] [--repeat N]
//                      [--cdc cdc:MIN/AVG/MAX] [DIR...]
//
// Defaults: 1024 MiB, 3 repeats, 2 threads, 64 MiB slices, the default CDC
// parameters and fixed:4096. The compression mode is in chunkbench_codec.h
// (defaults: lz4 and zstd at 1, 3, 6, 9 and 19, 256 MiB of random bytes);
// --group, units of several chunks against one a payload, in
// chunkbench_group.h.
// Two figures per line of the first mode:
//  - per core (CPU): bytes / thread CPU time, where each --slice of the data
//    counts with its best time over the repeats. On a shared machine this is
//    what one core does when nothing else runs on it.
//  - wall: bytes / wall-clock time of the best whole pass, everything included.
#include <boost/program_options.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hiodsfs/chunker.h"
#include "chunk/cipher.h"
#include "chunk/fingerprint.h"
#include "chunkbench_codec.h"
#include "common/cpu_time.h"
#include "stat/estimate.h"

namespace {

using hiodsfs::Chunker;
using hiodsfs::ChunkingParams;
using hiodsfs::thread_cpu_seconds;
using Clock = std::chrono::steady_clock;

struct Options {
    std::size_t size_mib = 1024;
    int repeat = 3;
    int threads = 2;
    std::size_t slice_mib = 64;
    ChunkingParams cdc{};
    ChunkingParams fixed = ChunkingParams::fixed(4096);
    bool compression = false;
    hiodsfs::bench::CodecBenchOptions codec;
};

void usage() {
    std::fprintf(
        stderr,
        "usage: hiodsfs-chunkbench [--size MiB] [--repeat N] [--threads N] [--slice MiB]\n"
        "                          [--cdc cdc:MIN/AVG/MAX] [--fixed fixed:SIZE]\n"
        "       hiodsfs-chunkbench --compression [--methods LIST] [--random MiB] [--limit MiB]\n"
        "                          [--dictionary KiB] [--group KiB[,KiB...]] [--repeat N]\n"
        "                          [--cdc cdc:MIN/AVG/MAX] [DIR...]\n");
}

// "16,32,64": unit sizes in KiB, each 1 to 4096 (a unit's raw length is
// a 32-bit field of the codec's prefix; 4 MiB is the largest chunk).
bool parse_group_sizes(const std::string& text, std::vector<std::size_t>* out) {
    std::size_t pos = 0;
    while (pos <= text.size()) {
        const std::size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        char* end = nullptr;
        const long n = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n < 1 || n > 4096) {
            std::fprintf(stderr,
                         "hiodsfs-chunkbench: --group wants sizes in KiB from 1 to 4096, "
                         "separated by commas, got \"%s\"\n",
                         text.c_str());
            return false;
        }
        out->push_back(static_cast<std::size_t>(n));
        pos = comma + 1;
    }
    return true;
}

bool parse_args(int argc, char** argv, Options* o) {
    namespace po = boost::program_options;
    po::options_description opts;
    opts.add_options()("help,h", "")("size", po::value<long>())("repeat", po::value<long>())(
        "threads", po::value<long>())("slice", po::value<long>())("cdc", po::value<std::string>())(
        "fixed", po::value<std::string>())("compression", "")("methods", po::value<std::string>())(
        "random", po::value<long>())("limit", po::value<long>())("dictionary", po::value<long>())(
        "group", po::value<std::string>())("dirs", po::value<std::vector<std::string>>());
    po::positional_options_description pos;
    pos.add("dirs", -1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    } catch (const po::error& e) {
        std::fprintf(stderr, "hiodsfs-chunkbench: %s\n", e.what());
        return false;
    }
    if (vm.count("help")) return false;
    o->compression = vm.count("compression") != 0;
    const std::vector<std::string> other_mode =
        o->compression
            ? std::vector<std::string>{"size", "threads", "slice", "fixed"}
            : std::vector<std::string>{"methods", "random", "limit", "dictionary", "group", "dirs"};
    for (const auto& name : other_mode) {
        if (!vm.count(name)) continue;
        const std::string what = name == "dirs" ? "DIR" : "--" + name;
        std::fprintf(stderr, "hiodsfs-chunkbench: %s goes %s --compression\n", what.c_str(),
                     o->compression ? "without" : "with");
        return false;
    }
    for (const char* name : {"random", "limit", "dictionary"}) {
        if (!vm.count(name)) continue;
        const long n = vm[name].as<long>();
        if (n < 0 || n > (1 << 20)) {
            std::fprintf(stderr, "hiodsfs-chunkbench: --%s wants 0 or a positive number, got %ld\n",
                         name, n);
            return false;
        }
        const std::string_view a = name;
        (a == "random"  ? o->codec.random_mib
         : a == "limit" ? o->codec.limit_mib
                        : o->codec.dictionary_kib) = static_cast<std::size_t>(n);
    }
    o->codec.methods = hiodsfs::bench::default_bench_methods();
    if (vm.count("methods")) {
        const auto st = hiodsfs::stat::parse_compression_list(vm["methods"].as<std::string>(),
                                                              &o->codec.methods);
        if (!st.is_ok() || o->codec.methods.empty()) {
            std::fprintf(stderr, "hiodsfs-chunkbench: %s\n",
                         st.is_ok() ? "--methods: none measures nothing" : st.message().c_str());
            return false;
        }
    }
    if (vm.count("group") && !parse_group_sizes(vm["group"].as<std::string>(), &o->codec.group_kib))
        return false;
    if (vm.count("dirs")) o->codec.roots = vm["dirs"].as<std::vector<std::string>>();
    for (const char* name : {"size", "repeat", "threads", "slice"}) {
        if (!vm.count(name)) continue;
        const long n = vm[name].as<long>();
        if (n <= 0 || n > (1 << 20)) {
            std::fprintf(stderr, "hiodsfs-chunkbench: --%s wants a positive number, got %ld\n", name, n);
            return false;
        }
        const std::string_view a = name;
        if (a == "size") o->size_mib = static_cast<std::size_t>(n);
        if (a == "repeat") o->repeat = static_cast<int>(n);
        if (a == "threads") o->threads = static_cast<int>(n);
        if (a == "slice") o->slice_mib = static_cast<std::size_t>(n);
    }
    for (const char* name : {"cdc", "fixed"}) {
        if (!vm.count(name)) continue;
        ChunkingParams p;
        const auto st = ChunkingParams::parse(vm[name].as<std::string>(), &p);
        if (!st.is_ok()) {
            std::fprintf(stderr, "hiodsfs-chunkbench: %s\n", st.message().c_str());
            return false;
        }
        (std::string_view(name) == "cdc" ? o->cdc : o->fixed) = p;
    }
    o->codec.chunking = o->cdc;
    o->codec.repeat = o->repeat;
    return true;
}

// What a pass produced; folded into the output so nothing is optimised away.
struct PassResult {
    std::uint64_t chunks = 0;
    std::uint64_t check = 0;
    double cpu_seconds = 0;  // of the busiest thread
};

// Chunks [data, data+len); with a Sha256, also fingerprints each chunk right
// after it is cut, while it is still in cache, as the write path does.
PassResult chunk_pass(const ChunkingParams& params, const std::uint8_t* data, std::size_t len,
                      hiodsfs::Sha256* sha) {
    PassResult r;
    auto chunker = Chunker::make(params);
    std::size_t start = 0, pos = 0;
    const auto emit = [&](std::size_t end) {
        ++r.chunks;
        if (sha != nullptr) {
            r.check ^= sha->digest(data + start, end - start).bytes[0];
        } else {
            r.check += end - start;
        }
        start = end;
    };
    while (pos < len) {
        const std::size_t n = chunker->next_cut(data + pos, len - pos);
        if (n == Chunker::kNoCut) break;
        pos += n;
        emit(pos);
    }
    if (start < len) emit(len);
    return r;
}

// SHA-256 straight through OpenSSL on 1 MiB blocks, one context: the ceiling
// for any chunk-then-hash pipeline.
PassResult raw_sha_pass(const std::uint8_t* data, std::size_t len) {
    PassResult r;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const EVP_MD* md = EVP_sha256();
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int out_len = 0;
    constexpr std::size_t kBlock = 1 << 20;
    for (std::size_t pos = 0; pos < len; pos += kBlock) {
        EVP_DigestInit_ex(ctx, md, nullptr);
        EVP_DigestUpdate(ctx, data + pos, std::min(kBlock, len - pos));
        EVP_DigestFinal_ex(ctx, out, &out_len);
        r.check ^= out[0];
        ++r.chunks;
    }
    EVP_MD_CTX_free(ctx);
    return r;
}

// CRC-32C over 8 KiB pieces, as a segment record's payload checksum over a
// chunk of the default average size.
PassResult crc_pass(const std::uint8_t* data, std::size_t len) {
    PassResult r;
    constexpr std::size_t kPiece = 8 << 10;
    for (std::size_t pos = 0; pos < len; pos += kPiece) {
        r.check ^= hiodsfs::crc32c(data + pos, std::min(kPiece, len - pos));
        ++r.chunks;
    }
    return r;
}

// Seals 8 KiB pieces, as an encrypted store seals chunks of the default
// average size (a fresh nonce each, and for XAES-256-GCM a key each).
PassResult seal_pass(const hiodsfs::ChunkCipher& cipher, const std::uint8_t* data, std::size_t len) {
    PassResult r;
    constexpr std::size_t kPiece = 8 << 10;
    std::vector<std::uint8_t> out;
    for (std::size_t pos = 0; pos < len; pos += kPiece) {
        out.clear();
        if (cipher.seal(std::span(data + pos, std::min(kPiece, len - pos)), {}, &out)) r.check ^= out.back();
        ++r.chunks;
    }
    return r;
}

// Opens one sealed 8 KiB piece as many times as len holds pieces: what
// reading an encrypted store's chunks costs.
PassResult open_pass(const hiodsfs::ChunkCipher& cipher, const std::vector<std::uint8_t>& sealed,
                     std::size_t len) {
    PassResult r;
    constexpr std::size_t kPiece = 8 << 10;
    std::vector<std::uint8_t> plain(sealed.size() - cipher.overhead());
    for (std::size_t pos = 0; pos < len; pos += kPiece) {
        if (cipher.open(sealed, {}, std::span<std::uint8_t>(plain))) r.check ^= plain.back();
        ++r.chunks;
    }
    return r;
}

using Pass = std::function<PassResult(const std::uint8_t*, std::size_t)>;

// Runs `pass` over [data, data+len) one slice at a time and keeps, per
// slice, the least CPU time seen over all repeats: a slice that shared its
// core with a compiler once is measured again on the next repeat.
PassResult run_slices(const Pass& pass, const std::uint8_t* data, std::size_t len,
                      std::size_t slice, std::vector<double>* best) {
    PassResult total;
    std::size_t i = 0;
    for (std::size_t pos = 0; pos < len; pos += slice, ++i) {
        const double c0 = thread_cpu_seconds();
        const PassResult r = pass(data + pos, std::min(slice, len - pos));
        const double c = thread_cpu_seconds() - c0;
        if (best->size() <= i) best->push_back(c);
        (*best)[i] = std::min((*best)[i], c);
        total.chunks += r.chunks;
        total.check ^= r.check;
    }
    return total;
}

struct Measure {
    double wall = 1e300;  // best wall-clock seconds of a whole pass
    double cpu = 0;       // sum of per-slice best CPU seconds, busiest thread
    PassResult result;
};

// Each of `threads` threads takes its own contiguous share of the data, with
// its own chunker and SHA-256 context, as the background workers do.
Measure measure(const Options& o, int threads, const std::uint8_t* data, std::size_t bytes,
                const Pass& pass) {
    const std::size_t slice = o.slice_mib << 20;
    const auto n = static_cast<std::size_t>(threads);
    std::vector<std::vector<double>> best(n);
    Measure m;
    for (int rep = 0; rep < o.repeat; ++rep) {
        std::vector<PassResult> results(n);
        const auto t0 = Clock::now();
        if (threads == 1) {
            results[0] = run_slices(pass, data, bytes, slice, &best[0]);
        } else {
            std::vector<std::thread> workers;
            const std::size_t share = bytes / n;
            for (std::size_t k = 0; k < n; ++k) {
                workers.emplace_back([&, k] {
                    const std::size_t len = k == n - 1 ? bytes - share * k : share;
                    results[k] = run_slices(pass, data + share * k, len, slice, &best[k]);
                });
            }
            for (auto& w : workers) w.join();
        }
        m.wall = std::min(m.wall, std::chrono::duration<double>(Clock::now() - t0).count());
        m.result = PassResult{};
        for (const auto& r : results) {
            m.result.chunks += r.chunks;
            m.result.check ^= r.check;
        }
    }
    for (const auto& b : best) {
        double sum = 0;
        for (double c : b) sum += c;
        m.cpu = std::max(m.cpu, sum);
    }
    return m;
}

void report(const char* name, std::size_t bytes, const Measure& m, int threads) {
    const double b = static_cast<double>(bytes);
    std::printf("%-34s %6.3f GB/s per core (CPU)  %6.3f GB/s wall", name, b / m.cpu / 1e9 / threads,
                b / m.wall / 1e9);
    if (threads > 1)
        std::printf("  [%d threads together: %.3f GB/s by CPU]", threads, b / m.cpu / 1e9);
    const double mean = m.result.chunks ? b / static_cast<double>(m.result.chunks) : 0;
    std::printf("  (%llu chunks, mean %.0f B)\n", static_cast<unsigned long long>(m.result.chunks),
                mean);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    if (o.compression) return hiodsfs::bench::run_codec_bench(o.codec);
    const std::size_t bytes = o.size_mib << 20;
    std::printf("hiodsfs-chunkbench: %zu MiB random data, %d repeats, %zu MiB slices, %s, %s\n",
                o.size_mib, o.repeat, o.slice_mib, o.fixed.describe().c_str(),
                o.cdc.describe().c_str());
    const auto data = hiodsfs::bench::make_random_data(bytes);
    const std::uint8_t* d = data.data();

    const auto fixed = [&](const std::uint8_t* p, std::size_t n) {
        return chunk_pass(o.fixed, p, n, nullptr);
    };
    const auto cdc = [&](const std::uint8_t* p, std::size_t n) {
        return chunk_pass(o.cdc, p, n, nullptr);
    };
    const auto fixed_sha = [&](const std::uint8_t* p, std::size_t n) {
        return chunk_pass(o.fixed, p, n, &hiodsfs::thread_sha256());
    };
    const auto cdc_sha = [&](const std::uint8_t* p, std::size_t n) {
        return chunk_pass(o.cdc, p, n, &hiodsfs::thread_sha256());
    };
    report("fixed chunking", bytes, measure(o, 1, d, bytes, fixed), 1);
    report("CDC chunking", bytes, measure(o, 1, d, bytes, cdc), 1);
    report("raw OpenSSL SHA-256, 1 MiB blocks", bytes, measure(o, 1, d, bytes, raw_sha_pass), 1);
    report("CRC-32C, 8 KiB pieces", bytes, measure(o, 1, d, bytes, crc_pass), 1);
    for (const auto mode : {hiodsfs::ChunkCipher::Mode::kAesGcm, hiodsfs::ChunkCipher::Mode::kXaesGcm}) {
        std::array<std::uint8_t, 32> key{};
        key.fill(0x5c);
        std::unique_ptr<hiodsfs::ChunkCipher> cipher;
        std::vector<std::uint8_t> one;
        if (!hiodsfs::ChunkCipher::with_chunk_key(key, mode, &cipher) ||
            !cipher->seal(std::span(d, std::min<std::size_t>(8 << 10, bytes)), {}, &one)) {
            std::fprintf(stderr, "hiodsfs-chunkbench: OpenSSL cannot seal\n");
            return 1;
        }
        const bool x = mode == hiodsfs::ChunkCipher::Mode::kXaesGcm;
        const auto seal = [&](const std::uint8_t* p, std::size_t n) { return seal_pass(*cipher, p, n); };
        const auto open = [&](const std::uint8_t*, std::size_t n) { return open_pass(*cipher, one, n); };
        report(x ? "XAES-256-GCM seal, 8 KiB pieces" : "AES-256-GCM seal, 8 KiB pieces", bytes,
               measure(o, 1, d, bytes, seal), 1);
        report(x ? "XAES-256-GCM open, 8 KiB pieces" : "AES-256-GCM open, 8 KiB pieces", bytes,
               measure(o, 1, d, bytes, open), 1);
    }
    report("fixed chunking + SHA-256", bytes, measure(o, 1, d, bytes, fixed_sha), 1);
    report("CDC chunking + SHA-256", bytes, measure(o, 1, d, bytes, cdc_sha), 1);
    const Measure both = measure(o, o.threads, d, bytes, cdc_sha);
    const std::string name = "CDC + SHA-256, " + std::to_string(o.threads) + " threads";
    report(name.c_str(), bytes, both, o.threads);
    // Printed so the compiler cannot drop the digests as unused.
    std::printf("(check %llx)\n", static_cast<unsigned long long>(both.result.check & 0xff));
    return 0;
}
