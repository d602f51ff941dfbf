#include "chunkbench_codec.h"

#include <fcntl.h>
#include <ftw.h>
#include <lz4.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_set>

#include "chunk/fingerprint.h"
#include "common/cpu_time.h"
#include "common/units.h"

namespace hiodsfs::bench {

namespace {

// Distinct chunks, back to back.
struct Chunks {
    std::vector<char> bytes;
    std::vector<std::size_t> ends;  // chunk i is [begin(i), ends[i])
    std::uint64_t files = 0, file_bytes = 0, skipped = 0, cut = 0;
    std::size_t count() const { return ends.size(); }
    std::size_t begin(std::size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
    const char* data(std::size_t i) const { return bytes.data() + begin(i); }
    std::uint32_t len(std::size_t i) const {
        return static_cast<std::uint32_t>(ends[i] - begin(i));
    }
};

// Runs of chunks of at least 16 MiB: each is timed on its own and counts
// with its best time over the repeats, so a slice that shared its core
// with a compiler once is measured again on the next repeat.
std::vector<std::pair<std::size_t, std::size_t>> slices_of(const Chunks& c) {
    constexpr std::size_t kSlice = std::size_t{16} << 20;
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::size_t first = 0;
    for (std::size_t i = 0; i < c.count(); ++i) {
        if (c.ends[i] - c.begin(first) >= kSlice || i + 1 == c.count()) {
            out.emplace_back(first, i + 1);
            first = i + 1;
        }
    }
    return out;
}

thread_local std::vector<std::string>* g_paths = nullptr;
thread_local std::uint64_t g_unwalkable = 0;
int collect_path(const char* path, const struct stat* st, int flag, struct FTW*) {
    if (flag == FTW_NS || flag == FTW_DNR) ++g_unwalkable;
    if (flag == FTW_F && S_ISREG(st->st_mode)) g_paths->push_back(path);
    return 0;
}

bool read_file(const std::string& path, std::vector<std::uint8_t>* out) {
    out->clear();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    std::uint8_t buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::close(fd);
            return n == 0;
        }
        out->insert(out->end(), buf, buf + n);
    }
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
    return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
}

// Cuts data as the daemon does and appends the chunks not seen before
// (all-zero ones are holes in a store, so they are left out too).
void add_chunks(const ChunkingParams& params, const std::vector<std::uint8_t>& data,
                std::size_t limit, std::unordered_set<std::string>* seen, Chunks* out) {
    Sha256& sha = thread_sha256();
    std::size_t pos = 0;
    for (const std::uint32_t len : chunk_lengths(params, data.data(), data.size())) {
        const std::uint8_t* p = data.data() + pos;
        pos += len;
        ++out->cut;
        if (all_zero(p, len) || (limit != 0 && out->bytes.size() >= limit)) continue;
        const Digest d = sha.digest(p, len);
        if (!seen->insert(std::string(d.bytes.begin(), d.bytes.end())).second) continue;
        out->bytes.insert(out->bytes.end(), p, p + len);
        out->ends.push_back(out->bytes.size());
    }
}

// What the codec would do without its entropy sample: compress every chunk
// into the room the codec gives it, keeping the result if it fits.
class UnsampledEncoder {
public:
    UnsampledEncoder()
        : lz4_state_(static_cast<std::size_t>(LZ4_sizeofState())), zstd_(ZSTD_createCCtx()) {}
    ~UnsampledEncoder() { ZSTD_freeCCtx(zstd_); }
    UnsampledEncoder(const UnsampledEncoder&) = delete;
    UnsampledEncoder& operator=(const UnsampledEncoder&) = delete;

    // The payload: the compressed bytes (after room for the prefix, which
    // is left unwritten), or the chunk as it is.
    ChunkEncoder::Payload encode(const char* raw, std::uint32_t len, const Compression& c) {
        const ChunkEncoder::Payload as_is{raw, len, false};
        const auto limit = static_cast<std::uint32_t>(len * kWorthIt);
        if (c.none() || limit <= kMaxCodecPrefixBytes) return as_is;
        const std::uint32_t room = limit - kMaxCodecPrefixBytes;
        if (out_.size() < limit) out_.resize(limit);
        char* body = out_.data() + kMaxCodecPrefixBytes;
        std::size_t got = 0;
        if (c.method == CompressionMethod::kLz4) {
            const int n = LZ4_compress_fast_extState(
                lz4_state_.data(), raw, body, static_cast<int>(len), static_cast<int>(room), 1);
            got = n > 0 ? static_cast<std::size_t>(n) : 0;
        } else {
            const std::size_t r = ZSTD_compressCCtx(zstd_, body, room, raw, len, c.level);
            got = ZSTD_isError(r) ? 0 : r;
        }
        if (got == 0) return as_is;
        return {out_.data(), static_cast<std::uint32_t>(kMaxCodecPrefixBytes + got), true};
    }

private:
    std::vector<char> lz4_state_;
    ZSTD_CCtx* zstd_;
    std::vector<char> out_;
};

struct Figures {
    double compress_s = 0, decompress_s = 0;  // sums of the slices' best CPU times
    std::uint64_t raw = 0, stored = 0, encoded = 0;
    bool decompressed = false;
};

double sum(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
}

// The codec as the write path uses it: encode, then append the payload (the
// copy into the segment buffer is part of the cost); then reads: decode
// into a reply buffer, or copy a chunk stored raw.
bool measure_codec(const Chunks& c, const Compression& method, const DictionarySet* dicts,
                   int repeat, Figures* f, std::string* error) {
    const std::shared_ptr<const Dictionary> dict = dicts != nullptr ? dicts->newest() : nullptr;
    const auto slices = slices_of(c);
    ChunkEncoder encoder;
    std::vector<char> payloads;
    std::vector<std::size_t> payload_ends(c.count());
    std::vector<bool> encoded(c.count());
    std::vector<double> best_c(slices.size(), std::numeric_limits<double>::infinity()),
        best_d = best_c;
    // Touched before the clock runs: no payload is larger than its chunk.
    payloads.resize(c.bytes.size());
    payloads.clear();
    for (int rep = 0; rep < repeat; ++rep) {
        payloads.clear();
        for (std::size_t s = 0; s < slices.size(); ++s) {
            const double t0 = thread_cpu_seconds();
            for (std::size_t i = slices[s].first; i < slices[s].second; ++i) {
                const ChunkEncoder::Payload p =
                    encoder.encode(c.data(i), c.len(i), method, dict.get());
                payloads.insert(payloads.end(), p.data, p.data + p.length);
                payload_ends[i] = payloads.size();
                encoded[i] = p.encoded;
            }
            best_c[s] = std::min(best_c[s], thread_cpu_seconds() - t0);
        }
    }
    *f = Figures{};
    f->compress_s = sum(best_c);
    f->raw = c.bytes.size();
    f->stored = payloads.size();
    f->encoded = static_cast<std::uint64_t>(std::count(encoded.begin(), encoded.end(), true));

    std::vector<char> out(std::size_t{4} << 20);  // the largest chunk there is
    auto decode = [&](std::size_t i) {
        const std::size_t at = i == 0 ? 0 : payload_ends[i - 1];
        const auto len = static_cast<std::uint32_t>(payload_ends[i] - at);
        if (!encoded[i]) {
            std::memcpy(out.data(), payloads.data() + at, len);
            return Status::ok();
        }
        return decode_chunk(payloads.data() + at, len, out.data(), c.len(i), dicts);
    };
    // Checked once, untimed: every chunk comes back as it was.
    for (std::size_t i = 0; i < c.count(); ++i) {
        const Status st = decode(i);
        if (!st || std::memcmp(out.data(), c.data(i), c.len(i)) != 0) {
            *error = compression_name(method) + ": chunk " + std::to_string(i) +
                     " did not come back: " + (st ? "other bytes" : st.message());
            return false;
        }
    }
    for (int rep = 0; rep < repeat; ++rep) {
        for (std::size_t s = 0; s < slices.size(); ++s) {
            const double t0 = thread_cpu_seconds();
            for (std::size_t i = slices[s].first; i < slices[s].second; ++i) (void)decode(i);
            best_d[s] = std::min(best_d[s], thread_cpu_seconds() - t0);
        }
    }
    f->decompress_s = sum(best_d);
    f->decompressed = true;
    return true;
}

// The same write path without the entropy sample (compressed, or not, by
// liblz4 and libzstd themselves), payload copied as above.
Figures measure_unsampled(const Chunks& c, const Compression& method, int repeat) {
    const auto slices = slices_of(c);
    UnsampledEncoder encoder;
    std::vector<char> payloads;
    // Touched before the clock runs: no payload is larger than its chunk.
    payloads.resize(c.bytes.size());
    payloads.clear();
    std::vector<double> best(slices.size(), std::numeric_limits<double>::infinity());
    Figures f;
    for (int rep = 0; rep < repeat; ++rep) {
        payloads.clear();
        std::uint64_t encoded = 0;
        for (std::size_t s = 0; s < slices.size(); ++s) {
            const double t0 = thread_cpu_seconds();
            for (std::size_t i = slices[s].first; i < slices[s].second; ++i) {
                const ChunkEncoder::Payload p = encoder.encode(c.data(i), c.len(i), method);
                payloads.insert(payloads.end(), p.data, p.data + p.length);
                encoded += p.encoded ? 1 : 0;
            }
            best[s] = std::min(best[s], thread_cpu_seconds() - t0);
        }
        f.encoded = encoded;
    }
    f.compress_s = sum(best);
    f.raw = c.bytes.size();
    f.stored = payloads.size();
    return f;
}

// The entropy sample alone, on every chunk: what a chunk it sends back
// raw costs before the copy.
Figures measure_sample(const Chunks& c, int repeat) {
    const auto slices = slices_of(c);
    std::vector<double> best(slices.size(), std::numeric_limits<double>::infinity());
    Figures f;
    for (int rep = 0; rep < repeat; ++rep) {
        std::uint64_t random = 0;
        for (std::size_t s = 0; s < slices.size(); ++s) {
            const double t0 = thread_cpu_seconds();
            for (std::size_t i = slices[s].first; i < slices[s].second; ++i)
                random += looks_incompressible(c.data(i), c.len(i)) ? 1 : 0;
            best[s] = std::min(best[s], thread_cpu_seconds() - t0);
        }
        f.encoded = c.count() - random;  // the chunks it would let the compressor try
    }
    f.compress_s = sum(best);
    f.raw = f.stored = c.bytes.size();
    return f;
}

void print_header() {
    std::printf("%-22s %14s %16s %8s %12s %11s\n", "method", "compress MB/s", "decompress MB/s",
                "ratio", "left of raw", "compressed");
}

void print_row(const std::string& name, const Figures& f, std::size_t chunks) {
    const double raw = static_cast<double>(f.raw), stored = static_cast<double>(f.stored);
    char decompress[32] = "-";
    if (f.decompressed)
        std::snprintf(decompress, sizeof decompress, "%.0f", raw / 1e6 / f.decompress_s);
    std::printf(
        "%-22s %14.1f %16s %8.3f %12.3f %9.0f %%\n", name.c_str(), raw / 1e6 / f.compress_s,
        decompress, raw / stored, stored / raw,
        chunks ? 100.0 * static_cast<double>(f.encoded) / static_cast<double>(chunks) : 0.0);
    std::fflush(stdout);
}

// A dictionary as a store would train one: from every 100th distinct chunk.
bool train_dictionary(const Chunks& c, std::size_t bytes, DictionarySet* out, std::string* error) {
    std::string samples;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < c.count(); i += 100) {
        samples.append(c.data(i), c.len(i));
        sizes.push_back(c.len(i));
    }
    std::string dict(bytes, '\0');
    const std::size_t n = ZDICT_trainFromBuffer(dict.data(), dict.size(), samples.data(),
                                                sizes.data(), static_cast<unsigned>(sizes.size()));
    if (ZDICT_isError(n)) {
        *error = std::string("training a dictionary: ") + ZDICT_getErrorName(n);
        return false;
    }
    dict.resize(n);
    std::shared_ptr<const Dictionary> d;
    const Status st = Dictionary::make(1, std::move(dict), &d);
    if (!st) {
        *error = st.message();
        return false;
    }
    out->add(std::move(d));
    return true;
}

bool run_methods(const Chunks& c, const CodecBenchOptions& o, bool with_unsampled) {
    print_header();
    DictionarySet dicts;
    std::string error;
    // Too few chunks, or ones zstd finds nothing in (random bytes), train
    // none, as in a store: the rows without a dictionary still stand.
    if (o.dictionary_kib > 0 && !train_dictionary(c, o.dictionary_kib << 10, &dicts, &error))
        std::printf("(no dictionary for these chunks, %s)\n", error.c_str());
    for (const auto& m : o.methods) {
        for (const bool with_dict : {false, true}) {
            if (with_dict && (dicts.size() == 0 || m.method != CompressionMethod::kZstd)) continue;
            Figures f;
            if (!measure_codec(c, m, with_dict ? &dicts : nullptr, o.repeat, &f, &error)) {
                std::fprintf(stderr, "hiodsfs-chunkbench: %s\n", error.c_str());
                return false;
            }
            print_row(compression_name(m) + (with_dict ? " + dictionary" : ""), f, c.count());
        }
    }
    if (with_unsampled) {
        for (const auto& m : o.methods)
            print_row(compression_name(m) + ", no sample", measure_unsampled(c, m, o.repeat),
                      c.count());
        print_row("entropy sample alone", measure_sample(c, o.repeat), c.count());
    }
    return true;
}

}  // namespace

std::vector<Compression> default_bench_methods() {
    std::vector<Compression> out{{CompressionMethod::kLz4, 0}};
    for (int level : {1, 3, 6, 9, 19}) out.push_back({CompressionMethod::kZstd, level});
    return out;
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

int run_codec_bench(const CodecBenchOptions& o) {
    std::printf(
        "hiodsfs-chunkbench --compression: single-threaded, CPU time, best of %d per 16 MiB slice; "
        "lz4 %s, zstd %s\n",
        o.repeat, LZ4_versionString(), ZSTD_versionString());
    Chunks tree;
    std::unordered_set<std::string> seen;
    std::vector<std::uint8_t> data;
    for (const auto& root : o.roots) {
        std::vector<std::string> paths;
        g_paths = &paths;
        g_unwalkable = 0;
        const int rc = ::nftw(root.c_str(), collect_path, 32, FTW_PHYS | FTW_MOUNT);
        g_paths = nullptr;
        if (rc != 0) {
            std::fprintf(stderr, "hiodsfs-chunkbench: %s: %s\n", root.c_str(),
                         std::strerror(errno));
            return 1;
        }
        tree.skipped += g_unwalkable;
        std::sort(paths.begin(), paths.end());  // the same chunks in the same order on every run
        for (const auto& p : paths) {
            if (!read_file(p, &data)) {
                ++tree.skipped;
                continue;
            }
            ++tree.files;
            tree.file_bytes += data.size();
            add_chunks(o.chunking, data, o.limit_mib << 20, &seen, &tree);
        }
    }
    if (!o.roots.empty()) {
        std::string roots;
        for (const auto& r : o.roots) roots += (roots.empty() ? "" : " ") + r;
        std::printf(
            "\ntree %s: %llu files, %s (%llu unreadable), %llu chunks of %s, %zu distinct, %s%s\n",
            roots.c_str(), static_cast<unsigned long long>(tree.files),
            human_bytes(static_cast<double>(tree.file_bytes)).c_str(),
            static_cast<unsigned long long>(tree.skipped),
            static_cast<unsigned long long>(tree.cut), o.chunking.describe().c_str(), tree.count(),
            human_bytes(static_cast<double>(tree.bytes.size())).c_str(),
            o.limit_mib ? " (the first up to --limit)" : "");
        if (tree.count() > 0 && !run_methods(tree, o, false)) return 1;
    }
    if (o.random_mib > 0) {
        Chunks random;
        const auto bytes = make_random_data(o.random_mib << 20);
        std::size_t pos = 0;
        for (const std::uint32_t len : chunk_lengths(o.chunking, bytes.data(), bytes.size())) {
            random.bytes.insert(random.bytes.end(),
                                bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                                bytes.begin() + static_cast<std::ptrdiff_t>(pos + len));
            random.ends.push_back(random.bytes.size());
            pos += len;
        }
        std::printf("\nrandom bytes: %zu MiB, %zu chunks of %s\n", o.random_mib, random.count(),
                    o.chunking.describe().c_str());
        if (!run_methods(random, o, true)) return 1;
    }
    return 0;
}

}  // namespace hiodsfs::bench
