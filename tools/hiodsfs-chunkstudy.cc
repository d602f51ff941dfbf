// hiodsfs-chunkstudy: how much each chunking configuration saves on data
// with real duplication, and what it costs in metadata. Used to choose the
// default CDC average size (docs/chunking.md).
//
//   hiodsfs-chunkstudy [--change-pct P] [--seed N] [--mode tar|files|both] DIR...
//
// It reads every regular file under the DIRs (sorted, so runs repeat) and
// builds a second generation of the same tree in which P % of the files are
// edited (bytes inserted, overwritten or deleted somewhere inside, or
// appended; the mtime changes too). Then, for each configuration, it chunks
// both generations, fingerprints every chunk and counts what a store holding
// both would keep, in two layouts:
//  - tar:   each generation as one tar-like stream (512-byte header per file,
//           data padded to 512), as a backup tool writing archives would;
//  - files: each file chunked on its own, as after `cp -a` or rsync of the
//           tree into the file system.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

#include "hiodsfs/chunker.h"
#include "chunk/fingerprint.h"

namespace {

namespace fs = std::filesystem;
using hiodsfs::ChunkingParams;
using Bytes = std::vector<std::uint8_t>;

// Metadata estimate (see docs/chunking.md): LMDB node header 8 B + key +
// value, pages about 2/3 full under random-key inserts.
//  - per stored chunk: chunk record (8 B id -> ~24 B location, length,
//    refcount, state) ~60 B, plus fingerprint index entry (32 B digest ->
//    8 B id) ~70 B;
//  - per chunk reference: one extent (16 B inode+offset -> 16 B id, offset,
//    length), appended in order so pages stay nearly full, ~45 B.
constexpr double kBytesPerStoredChunk = 130;
constexpr double kBytesPerReference = 45;

struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
};

struct File {
    std::string name;
    Bytes data;
    std::uint64_t mtime = 0;
};

bool read_file(const fs::path& p, Bytes* out) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return false;
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return !in.bad();
}

// Every regular file under `root`, sorted by path; unreadable entries are
// skipped (counted), never fatal.
void collect(const fs::path& root, std::vector<File>* files, std::size_t* skipped) {
    std::error_code ec;
    std::vector<fs::path> paths;
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
        std::fprintf(stderr, "hiodsfs-chunkstudy: cannot read %s: %s\n", root.c_str(),
                     ec.message().c_str());
        return;
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        if (it->is_regular_file(ec) && !it->is_symlink(ec)) paths.push_back(it->path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
        File f;
        f.name = p.string();
        f.mtime = 1700000000;
        if (read_file(p, &f.data)) {
            files->push_back(std::move(f));
        } else {
            ++*skipped;
        }
    }
}

void put_octal(std::uint8_t* field, std::size_t width, std::uint64_t v) {
    std::snprintf(reinterpret_cast<char*>(field), width, "%0*" PRIo64, static_cast<int>(width - 1),
                  v);
}

// A ustar-like stream: what `tar cf` of the tree would give, near enough for
// chunking (header fields that change with the file do change here).
Bytes tar_stream(const std::vector<File>& files) {
    Bytes out;
    for (const auto& f : files) {
        std::uint8_t h[512] = {};
        std::memcpy(h, f.name.data(), std::min<std::size_t>(f.name.size(), 100));
        put_octal(h + 100, 8, 0644);
        put_octal(h + 124, 12, f.data.size());
        put_octal(h + 136, 12, f.mtime);
        std::memcpy(h + 257, "ustar", 5);
        out.insert(out.end(), h, h + 512);
        out.insert(out.end(), f.data.begin(), f.data.end());
        out.resize(out.size() + (512 - f.data.size() % 512) % 512, 0);
    }
    out.resize(out.size() + 1024, 0);
    return out;
}

// Edits change_pct % of the files the way a new version of a tree does.
std::size_t edit_generation(std::vector<File>* files, double change_pct, Rng* rng) {
    std::size_t edited = 0;
    for (auto& f : *files) {
        if (static_cast<double>(rng->below(1000000)) >= change_pct * 10000) continue;
        ++edited;
        f.mtime += 86400;
        Bytes& d = f.data;
        const std::size_t at = rng->below(d.size() + 1);
        const std::size_t n = 1 + rng->below(64);
        Bytes fresh(n);
        for (auto& b : fresh) b = static_cast<std::uint8_t>(rng->next());
        switch (rng->below(4)) {
            case 0:  // insert in the middle (shifts everything after it)
                d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), fresh.begin(), fresh.end());
                break;
            case 1:  // overwrite in place
                for (std::size_t i = 0; i < n && at + i < d.size(); ++i) d[at + i] = fresh[i];
                break;
            case 2:  // delete a few bytes
                d.erase(d.begin() + static_cast<std::ptrdiff_t>(at),
                        d.begin() + static_cast<std::ptrdiff_t>(std::min(d.size(), at + n)));
                break;
            default: {  // append a longer tail
                Bytes tail(100 + rng->below(4000));
                for (auto& b : tail) b = static_cast<std::uint8_t>(rng->next());
                d.insert(d.end(), tail.begin(), tail.end());
            }
        }
    }
    return edited;
}

struct DigestHash {
    std::size_t operator()(const hiodsfs::Digest& d) const {
        std::size_t h;
        std::memcpy(&h, d.bytes.data(), sizeof h);
        return h;
    }
};

struct Tally {
    std::uint64_t logical = 0;     // bytes written, both generations
    std::uint64_t references = 0;  // chunks written (extents)
    std::uint64_t stored_chunks = 0;
    std::uint64_t stored_bytes = 0;
    std::uint64_t gen2_logical = 0;
    std::uint64_t gen2_new_bytes = 0;  // what the second generation added
};

using Seen = std::unordered_map<hiodsfs::Digest, std::uint32_t, DigestHash>;

void add_stream(const ChunkingParams& params, const Bytes& s, bool second, Seen* seen, Tally* t) {
    hiodsfs::Sha256& sha = hiodsfs::thread_sha256();
    std::size_t pos = 0;
    for (const std::uint32_t len : hiodsfs::chunk_lengths(params, s.data(), s.size())) {
        const auto d = sha.digest(s.data() + pos, len);
        pos += len;
        ++t->references;
        t->logical += len;
        if (second) t->gen2_logical += len;
        if (seen->emplace(d, len).second) {
            ++t->stored_chunks;
            t->stored_bytes += len;
            if (second) t->gen2_new_bytes += len;
        }
    }
}

// Megabytes with one decimal everywhere, so rows compare digit by digit.
std::string human(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    return buf;
}

int usage() {
    std::fprintf(stderr,
                 "usage: hiodsfs-chunkstudy [--change-pct P] [--seed N] [--mode tar|files|both] "
                 "DIR...\n");
    return 2;
}

// One generation as the list of streams that get chunked separately.
std::vector<const Bytes*> streams_of(const std::vector<File>& files, const Bytes* tar) {
    std::vector<const Bytes*> out;
    if (tar != nullptr) {
        out.push_back(tar);
    } else {
        for (const auto& f : files) out.push_back(&f.data);
    }
    return out;
}

void print_table(const char* title, const std::vector<const Bytes*>& gen1,
                 const std::vector<const Bytes*>& gen2) {
    std::printf("\n%s\n", title);
    std::printf("%-22s %10s %7s %9s %8s %10s %10s %10s %7s\n", "chunking", "stored", "ratio",
                "chunks", "mean", "metadata", "total", "gen2 adds", "gen2 %");
    std::vector<ChunkingParams> configs = {ChunkingParams::fixed(4096),
                                           ChunkingParams::fixed(16384)};
    for (std::uint32_t avg = 4096; avg <= 65536; avg *= 2) {
        configs.push_back(ChunkingParams::cdc(avg / 4, avg, avg * 4));
    }
    for (const auto& p : configs) {
        Seen seen;
        Tally t;
        for (const Bytes* s : gen1) add_stream(p, *s, false, &seen, &t);
        for (const Bytes* s : gen2) add_stream(p, *s, true, &seen, &t);
        const double meta = kBytesPerStoredChunk * static_cast<double>(t.stored_chunks) +
                            kBytesPerReference * static_cast<double>(t.references);
        const double stored = static_cast<double>(t.stored_bytes);
        std::printf(
            "%-22s %10s %7.3f %9" PRIu64 " %8.0f %10s %10s %10s %6.2f%%\n", p.describe().c_str(),
            human(stored).c_str(), static_cast<double>(t.logical) / stored, t.stored_chunks,
            stored / static_cast<double>(t.stored_chunks), human(meta).c_str(),
            human(stored + meta).c_str(), human(static_cast<double>(t.gen2_new_bytes)).c_str(),
            100.0 * static_cast<double>(t.gen2_new_bytes) / static_cast<double>(t.gen2_logical));
    }
}

}  // namespace

int main(int argc, char** argv) {
    double change_pct = 3;
    Rng rng{1};
    std::string mode = "both";
    std::vector<std::string> roots;
    namespace po = boost::program_options;
    po::options_description opts;
    opts.add_options()("mode", po::value<std::string>(&mode))("change-pct", po::value<double>(&change_pct))(
        "seed", po::value<std::uint64_t>())("dir", po::value<std::vector<std::string>>(&roots));
    po::positional_options_description pos;
    pos.add("dir", -1);
    try {
        po::variables_map vm;
        po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
        po::notify(vm);
        if (vm.count("seed")) rng.s = vm["seed"].as<std::uint64_t>();
    } catch (const po::error& e) {
        std::fprintf(stderr, "hiodsfs-chunkstudy: %s\n", e.what());
        return usage();
    }
    if (mode != "tar" && mode != "files" && mode != "both") return usage();
    if (change_pct < 0 || change_pct > 100) return usage();
    if (roots.empty()) return usage();

    std::vector<File> gen1;
    std::size_t skipped = 0;
    for (const auto& r : roots) collect(r, &gen1, &skipped);
    if (gen1.empty()) {
        std::fprintf(stderr, "hiodsfs-chunkstudy: no readable files\n");
        return 1;
    }
    std::vector<File> gen2 = gen1;
    const std::size_t edited = edit_generation(&gen2, change_pct, &rng);
    const Bytes tar1 = tar_stream(gen1);
    const Bytes tar2 = tar_stream(gen2);
    std::printf(
        "%zu files (%zu unreadable skipped), %s; generation 2: %zu files edited "
        "(%.1f %%)\n",
        gen1.size(), skipped, human(static_cast<double>(tar1.size())).c_str(), edited, change_pct);
    std::printf("metadata estimate: %.0f B per stored chunk + %.0f B per chunk reference\n",
                kBytesPerStoredChunk, kBytesPerReference);
    if (mode != "files") {
        print_table("layout tar: each generation is one tar stream", streams_of(gen1, &tar1),
                    streams_of(gen2, &tar2));
    }
    if (mode != "tar") {
        print_table("layout files: each file chunked on its own", streams_of(gen1, nullptr),
                    streams_of(gen2, nullptr));
    }
    return 0;
}
