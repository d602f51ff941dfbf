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
#include <memory>
#include <unordered_map>

#include "chunk/fingerprint.h"
#include "chunkbench_group.h"
#include "common/units.h"

namespace hiodsfs::bench {

namespace {

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
// (all-zero ones are holes in a store, so they are left out too), and the
// file's references to its chunks.
void add_chunks(const ChunkingParams& params, const std::vector<std::uint8_t>& data,
                std::size_t limit, std::unordered_map<std::string, std::uint32_t>* seen,
                Chunks* out) {
    Sha256& sha = thread_sha256();
    const auto file = static_cast<std::uint32_t>(out->ref_ends.size());
    std::size_t pos = 0;
    for (const std::uint32_t len : chunk_lengths(params, data.data(), data.size())) {
        const std::uint8_t* p = data.data() + pos;
        pos += len;
        ++out->cut;
        if (all_zero(p, len)) continue;
        const Digest d = sha.digest(p, len);
        std::string key(d.bytes.begin(), d.bytes.end());
        if (const auto it = seen->find(key); it != seen->end()) {
            out->refs.push_back(it->second);
            continue;
        }
        if (limit != 0 && out->bytes.size() >= limit) continue;
        const auto id = static_cast<std::uint32_t>(out->count());
        seen->emplace(std::move(key), id);
        out->refs.push_back(id);
        out->bytes.insert(out->bytes.end(), p, p + len);
        out->ends.push_back(out->bytes.size());
        out->file_of.push_back(file);
    }
    out->ref_ends.push_back(out->refs.size());
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

// The codec as the write path uses it: encode, then append the payload (the
// copy into the segment buffer is part of the cost); then reads: decode
// into a reply buffer, or copy a chunk stored raw.
bool measure_codec(const Chunks& c, const Compression& method, const DictionarySet* dicts,
                   int repeat, Figures* f, std::string* error) {
    const std::shared_ptr<const Dictionary> dict = dicts != nullptr ? dicts->newest() : nullptr;
    const auto slices = slices_of(c.ends);
    ChunkEncoder encoder;
    std::vector<char> payloads;
    std::vector<std::size_t> payload_ends(c.count());
    std::vector<bool> encoded(c.count());
    // Touched before the clock runs: no payload is larger than its chunk.
    payloads.resize(c.bytes.size());
    payloads.clear();
    *f = Figures{};
    f->compress_s = best_cpu_seconds(slices, repeat, [&](std::size_t a, std::size_t b) {
        if (a == 0) payloads.clear();
        for (std::size_t i = a; i < b; ++i) {
            const ChunkEncoder::Payload p = encoder.encode(c.data(i), c.len(i), method, dict.get());
            payloads.insert(payloads.end(), p.data, p.data + p.length);
            payload_ends[i] = payloads.size();
            encoded[i] = p.encoded;
        }
    });
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
    f->decompress_s = best_cpu_seconds(slices, repeat, [&](std::size_t a, std::size_t b) {
        for (std::size_t i = a; i < b; ++i) (void)decode(i);
    });
    f->decompressed = true;
    return true;
}

// The same write path without the entropy sample (compressed, or not, by
// liblz4 and libzstd themselves), payload copied as above.
Figures measure_unsampled(const Chunks& c, const Compression& method, int repeat) {
    const auto slices = slices_of(c.ends);
    UnsampledEncoder encoder;
    std::vector<char> payloads;
    // Touched before the clock runs: no payload is larger than its chunk.
    payloads.resize(c.bytes.size());
    payloads.clear();
    Figures f;
    f.compress_s = best_cpu_seconds(slices, repeat, [&](std::size_t a, std::size_t b) {
        if (a == 0) {
            payloads.clear();
            f.encoded = 0;
        }
        for (std::size_t i = a; i < b; ++i) {
            const ChunkEncoder::Payload p = encoder.encode(c.data(i), c.len(i), method);
            payloads.insert(payloads.end(), p.data, p.data + p.length);
            f.encoded += p.encoded ? 1 : 0;
        }
    });
    f.raw = c.bytes.size();
    f.stored = payloads.size();
    return f;
}

// The entropy sample alone, on every chunk: what a chunk it sends back
// raw costs before the copy.
Figures measure_sample(const Chunks& c, int repeat) {
    Figures f;
    std::uint64_t random = 0;
    f.compress_s = best_cpu_seconds(slices_of(c.ends), repeat, [&](std::size_t a, std::size_t b) {
        if (a == 0) random = 0;
        for (std::size_t i = a; i < b; ++i)
            random += looks_incompressible(c.data(i), c.len(i)) ? 1 : 0;
    });
    f.encoded = c.count() - random;  // the chunks it would let the compressor try
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

// Too few chunks, or ones zstd finds nothing in (random bytes), train
// none, as in a store: the rows without a dictionary still stand.
void train_if_asked(const Chunks& c, const CodecBenchOptions& o, DictionarySet* dicts) {
    std::string error;
    if (o.dictionary_kib > 0 && !train_dictionary(c, o.dictionary_kib << 10, dicts, &error))
        std::printf("(no dictionary for these chunks, %s)\n", error.c_str());
}

bool run_methods(const Chunks& c, const CodecBenchOptions& o, const DictionarySet& dicts,
                 bool with_unsampled) {
    print_header();
    std::string error;
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
    std::unordered_map<std::string, std::uint32_t> seen;
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
        if (tree.count() > 0) {
            DictionarySet dicts;
            train_if_asked(tree, o, &dicts);
            if (!run_methods(tree, o, dicts, false)) return 1;
            std::string error;
            if (!o.group_kib.empty() && !run_group_bench(tree, o, dicts, &error)) {
                std::fprintf(stderr, "hiodsfs-chunkbench: %s\n", error.c_str());
                return 1;
            }
        }
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
        DictionarySet dicts;
        train_if_asked(random, o, &dicts);
        if (!run_methods(random, o, dicts, true)) return 1;
    }
    return 0;
}

}  // namespace hiodsfs::bench
