// hiodsfs-chunkbench: per-core throughput of the chunkers and of SHA-256 on
// random data, so performance claims in docs/chunking.md are reproducible.
//
//   hiodsfs-chunkbench [--size MiB] [--repeat N] [--threads N]
//                      [--cdc cdc:MIN/AVG/MAX] [--fixed fixed:SIZE]
//
// Every figure is the best of --repeat runs over the same in-memory data. Two
// numbers are printed: by thread CPU time (what one core does when it is not
// shared; the machine's other work does not count against it) and by wall
// clock (what was actually delivered, including any time the CPU was away).
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hiodsfs/chunker.h"
#include "hiodsfs/fingerprint.h"

namespace {

using hiodsfs::Chunker;
using hiodsfs::ChunkingParams;
using Clock = std::chrono::steady_clock;

struct Options {
    std::size_t size_mib = 1024;
    int repeat = 3;
    int threads = 2;
    ChunkingParams cdc{};
    ChunkingParams fixed = ChunkingParams::fixed(4096);
};

void usage() {
    std::fprintf(stderr,
                 "usage: hiodsfs-chunkbench [--size MiB] [--repeat N] [--threads N]\n"
                 "                          [--cdc cdc:MIN/AVG/MAX] [--fixed fixed:SIZE]\n");
}

bool parse_args(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") return false;
        if (i + 1 >= argc) {
            std::fprintf(stderr, "hiodsfs-chunkbench: %s needs a value\n", a.c_str());
            return false;
        }
        const std::string v = argv[++i];
        if (a == "--size" || a == "--repeat" || a == "--threads") {
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || n <= 0 || n > (1 << 20)) {
                std::fprintf(stderr, "hiodsfs-chunkbench: %s wants a positive number, got '%s'\n",
                             a.c_str(), v.c_str());
                return false;
            }
            if (a == "--size") o->size_mib = static_cast<std::size_t>(n);
            if (a == "--repeat") o->repeat = static_cast<int>(n);
            if (a == "--threads") o->threads = static_cast<int>(n);
        } else if (a == "--cdc" || a == "--fixed") {
            ChunkingParams p;
            const auto st = ChunkingParams::parse(v, &p);
            if (!st.is_ok()) {
                std::fprintf(stderr, "hiodsfs-chunkbench: %s\n", st.message().c_str());
                return false;
            }
            (a == "--cdc" ? o->cdc : o->fixed) = p;
        } else {
            std::fprintf(stderr, "hiodsfs-chunkbench: unknown option %s\n", a.c_str());
            return false;
        }
    }
    return true;
}

std::vector<std::uint8_t> make_random_data(std::size_t n) {
    std::vector<std::uint8_t> out(n);
    std::uint64_t s = 0x243F6A8885A308D3ull;
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        std::memcpy(out.data() + i, &z, 8);
    }
    return out;
}

// What a pass produced; folded into the output so nothing is optimised away.
struct PassResult {
    std::uint64_t chunks = 0;
    std::uint64_t check = 0;
    double cpu_seconds = 0;  // of the busiest thread
};

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

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

struct Measure {
    double wall = 1e300;  // best wall-clock seconds
    double cpu = 1e300;   // best CPU seconds of the busiest thread
    PassResult result;
};

// Runs a single-threaded pass on this thread, timing its CPU use here.
PassResult timed_here(const std::function<PassResult()>& pass) {
    const double c0 = thread_cpu_seconds();
    PassResult r = pass();
    r.cpu_seconds = thread_cpu_seconds() - c0;
    return r;
}

Measure best_of(int repeat, const std::function<PassResult()>& pass) {
    Measure m;
    for (int i = 0; i < repeat; ++i) {
        const auto t0 = Clock::now();
        const PassResult r = pass();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        m.wall = std::min(m.wall, s);
        m.cpu = std::min(m.cpu, r.cpu_seconds);
        m.result = r;
    }
    return m;
}

void report(const char* name, std::size_t bytes, const Measure& m, int threads = 1) {
    const double b = static_cast<double>(bytes);
    const double per_core = b / m.cpu / 1e9 / (threads > 1 ? threads : 1);
    std::printf("%-36s %7.3f GB/s per core (CPU time) %7.3f GB/s wall", name, per_core,
                b / m.wall / 1e9);
    if (threads > 1) std::printf(" [%d threads, %.3f GB/s by CPU time]", threads, b / m.cpu / 1e9);
    const double mean = m.result.chunks ? b / static_cast<double>(m.result.chunks) : 0;
    std::printf("  chunks %llu mean %.0f B\n", static_cast<unsigned long long>(m.result.chunks),
                mean);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    const std::size_t bytes = o.size_mib << 20;
    std::printf("hiodsfs-chunkbench: %zu MiB random data, best of %d, fixed %s, cdc %s\n",
                o.size_mib, o.repeat, o.fixed.describe().c_str(), o.cdc.describe().c_str());
    const auto data = make_random_data(bytes);
    const std::uint8_t* d = data.data();
    hiodsfs::Sha256 sha;

    report("fixed chunking", bytes,
           best_of(o.repeat, [&] { return timed_here([&] { return chunk_pass(o.fixed, d, bytes, nullptr); }); }));
    report("CDC chunking", bytes,
           best_of(o.repeat, [&] { return timed_here([&] { return chunk_pass(o.cdc, d, bytes, nullptr); }); }));
    report("raw OpenSSL SHA-256 (1 MiB blocks)", bytes,
           best_of(o.repeat, [&] { return timed_here([&] { return raw_sha_pass(d, bytes); }); }));
    report("fixed chunking + SHA-256", bytes,
           best_of(o.repeat, [&] { return timed_here([&] { return chunk_pass(o.fixed, d, bytes, &sha); }); }));
    report("CDC chunking + SHA-256", bytes,
           best_of(o.repeat, [&] { return timed_here([&] { return chunk_pass(o.cdc, d, bytes, &sha); }); }));

    // Each thread chunks and hashes its own contiguous share with its own
    // chunker and SHA-256 context, as the background workers do.
    const int t = o.threads;
    const auto parallel = best_of(o.repeat, [&] {
        std::vector<PassResult> results(static_cast<std::size_t>(t));
        std::vector<std::thread> workers;
        const std::size_t share = bytes / static_cast<std::size_t>(t);
        for (int k = 0; k < t; ++k) {
            workers.emplace_back([&, k] {
                const std::size_t from = share * static_cast<std::size_t>(k);
                const std::size_t len = k == t - 1 ? bytes - from : share;
                results[static_cast<std::size_t>(k)] = timed_here(
                    [&] { return chunk_pass(o.cdc, d + from, len, &hiodsfs::thread_sha256()); });
            });
        }
        for (auto& w : workers) w.join();
        PassResult sum;
        for (const auto& r : results) {
            sum.chunks += r.chunks;
            sum.check ^= r.check;
            sum.cpu_seconds = std::max(sum.cpu_seconds, r.cpu_seconds);
        }
        return sum;
    });
    const std::string name = "CDC + SHA-256, " + std::to_string(t) + " threads";
    report(name.c_str(), bytes, parallel, t);
    // Printed so the compiler cannot drop the digests as unused.
    std::printf("(check %llx)\n", static_cast<unsigned long long>(parallel.result.check & 0xff));
    return 0;
}
