#include "stat/estimate.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "chunk/fingerprint.h"
#include "common/units.h"
#include "hiodsfs/segment_store.h"
#include "stat/report.h"

namespace hiodsfs::stat {

namespace {

struct ChunkRef {
    ChunkKey key{};  // all zero with len 0 never occurs; zero chunks are kept out
    std::uint32_t len = 0;
};

struct FileEntry {
    std::uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
    std::map<std::string, std::vector<ChunkRef>> chunks;  // by chunking description
};

// The file entries, then (optionally: older versions wrote none and skip
// it) the compressed sizes: kSizesSection, the codec tag, the methods, and
// per chunk its key, length and payload size under each method.
constexpr char kCacheMagic[] = "HIODSFS-ESTIMATE-CACHE 1\n";
constexpr char kSizesSection[] = "compressed sizes";

// ---- cache file ----

void put_u32(std::string* o, std::uint32_t v) { o->append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string* o, std::uint64_t v) { o->append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string* o, const std::string& s) {
    put_u32(o, static_cast<std::uint32_t>(s.size()));
    o->append(s);
}

class Reader {
public:
    explicit Reader(std::string_view s) : s_(s) {}
    bool u32(std::uint32_t* v) { return raw(v, 4); }
    bool u64(std::uint64_t* v) { return raw(v, 8); }
    bool str(std::string* v) {
        std::uint32_t n;
        if (!u32(&n) || n > s_.size() - p_) return false;
        v->assign(s_.substr(p_, n));
        p_ += n;
        return true;
    }
    bool raw(void* v, std::size_t n) {
        if (n > s_.size() - p_) return false;
        std::memcpy(v, s_.data() + p_, n);
        p_ += n;
        return true;
    }
    bool done() const { return p_ == s_.size(); }
    std::string rest() const { return std::string(s_.substr(p_)); }

private:
    std::string_view s_;
    std::size_t p_ = 0;
};

// Loads the cache; a missing file is an empty cache, a damaged one is
// ignored with a note (it is only a cache).
void load_cache(const std::string& path, std::map<std::string, FileEntry>* out, std::string* sizes,
                bool* loaded, std::string* note) {
    out->clear();
    sizes->clear();
    *loaded = false;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) *note = "cache " + path + " not read: " + std::strerror(errno);
        return;
    }
    std::string data;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        data.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    const std::size_t m = sizeof(kCacheMagic) - 1;
    if (data.size() < m + 4 || data.compare(0, m, kCacheMagic) != 0) {
        *note = "cache " + path + " is not an estimate cache; starting afresh";
        return;
    }
    std::uint32_t crc;
    std::memcpy(&crc, data.data() + data.size() - 4, 4);
    std::string_view body(data.data() + m, data.size() - m - 4);
    if (crc32c(body.data(), body.size()) != crc) {
        *note = "cache " + path + " is damaged; starting afresh";
        return;
    }
    Reader r(body);
    std::uint64_t files = 0;
    if (!r.u64(&files)) return;
    for (std::uint64_t i = 0; i < files; ++i) {
        std::string p;
        FileEntry e;
        std::uint32_t nconf = 0;
        if (!r.str(&p) || !r.u64(&e.dev) || !r.u64(&e.ino) || !r.u64(&e.size) || !r.u64(&e.mtime_ns) ||
            !r.u64(&e.ctime_ns) || !r.u32(&nconf)) {
            out->clear();
            *note = "cache " + path + " is damaged; starting afresh";
            return;
        }
        for (std::uint32_t c = 0; c < nconf; ++c) {
            std::string desc;
            std::uint64_t n = 0;
            if (!r.str(&desc) || !r.u64(&n) || n > (1ull << 40)) {
                out->clear();
                *note = "cache " + path + " is damaged; starting afresh";
                return;
            }
            auto& v = e.chunks[desc];
            v.resize(n);
            for (auto& ref : v)
                if (!r.raw(ref.key.data(), 16) || !r.u32(&ref.len)) {
                    out->clear();
                    *note = "cache " + path + " is damaged; starting afresh";
                    return;
                }
        }
        (*out)[p] = std::move(e);
    }
    *sizes = r.rest();
    *loaded = true;
}

// Puts the sizes of a cache's last section into the estimate, if they were
// measured by this codec with these methods; false if they were not.
bool load_sizes(std::string_view section, CompressionEstimate* est) {
    Reader r(section);
    std::string name, tag, method;
    std::uint32_t methods = 0;
    std::uint64_t rows = 0;
    if (!r.str(&name) || name != kSizesSection || !r.str(&tag) ||
        tag != CompressionEstimate::codec_tag() || !r.u32(&methods) ||
        methods != est->methods().size())
        return false;
    for (const auto& m : est->methods())
        if (!r.str(&method) || method != compression_name(m)) return false;
    if (!r.u64(&rows)) return false;
    std::vector<std::uint32_t> payloads(methods);
    for (std::uint64_t i = 0; i < rows; ++i) {
        ChunkKey key;
        std::uint32_t len = 0;
        if (!r.raw(key.data(), key.size()) || !r.u32(&len)) return false;
        for (auto& p : payloads)
            if (!r.u32(&p)) return false;
        est->remember(key, len, payloads);
    }
    return true;
}

// The sizes section for the chunks in keep.
std::string save_sizes(const CompressionEstimate& est,
                       const std::unordered_set<ChunkKey, ChunkKeyHash>& keep) {
    std::string o;
    put_str(&o, kSizesSection);
    put_str(&o, CompressionEstimate::codec_tag());
    put_u32(&o, static_cast<std::uint32_t>(est.methods().size()));
    for (const auto& m : est.methods()) put_str(&o, compression_name(m));
    const std::size_t count_at = o.size();
    put_u64(&o, 0);
    std::uint64_t rows = 0;
    est.for_each_row([&](const ChunkKey& key, std::uint32_t len, const std::uint32_t* payloads) {
        if (keep.count(key) == 0) return;
        o.append(reinterpret_cast<const char*>(key.data()), key.size());
        put_u32(&o, len);
        for (std::size_t m = 0; m < est.methods().size(); ++m) put_u32(&o, payloads[m]);
        ++rows;
    });
    std::memcpy(o.data() + count_at, &rows, sizeof(rows));
    return o;
}

Status mkdirs(const std::string& dir) {
    if (dir.empty()) return Status::ok();
    struct stat st{};
    if (::stat(dir.c_str(), &st) == 0) return Status::ok();
    auto slash = dir.rfind('/');
    if (slash != std::string::npos && slash > 0) HIODSFS_TRY(mkdirs(dir.substr(0, slash)));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::from_errno(errno, "mkdir " + dir);
    return Status::ok();
}

// Writes the cache to a temporary file, syncs it and renames it over the old
// one: whatever happens meanwhile, the cache on disk is whole.
Status save_cache(const std::string& path, const std::map<std::string, FileEntry>& files,
                  const std::string& sizes) {
    auto slash = path.rfind('/');
    if (slash != std::string::npos) HIODSFS_TRY(mkdirs(path.substr(0, slash)));
    std::string body;
    put_u64(&body, files.size());
    for (const auto& [p, e] : files) {
        put_str(&body, p);
        put_u64(&body, e.dev);
        put_u64(&body, e.ino);
        put_u64(&body, e.size);
        put_u64(&body, e.mtime_ns);
        put_u64(&body, e.ctime_ns);
        put_u32(&body, static_cast<std::uint32_t>(e.chunks.size()));
        for (const auto& [desc, refs] : e.chunks) {
            put_str(&body, desc);
            put_u64(&body, refs.size());
            for (const auto& ref : refs) {
                body.append(reinterpret_cast<const char*>(ref.key.data()), 16);
                put_u32(&body, ref.len);
            }
        }
    }
    body += sizes;
    std::string data = kCacheMagic + body;
    put_u32(&data, crc32c(body.data(), body.size()));
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::from_errno(errno, "write cache " + tmp);
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            return Status::from_errno(err, "write cache " + tmp);
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        return Status::from_errno(err, "sync cache " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        return Status::from_errno(err, "rename cache " + tmp);
    }
    return Status::ok();
}

// ---- the walk ----

struct Candidate {
    std::string path;
    struct stat st;
};

thread_local std::vector<Candidate>* g_files = nullptr;
thread_local std::uint64_t g_skipped = 0;
int collect(const char* path, const struct stat* st, int flag, struct FTW*) {
    if (flag == FTW_NS || flag == FTW_DNR) {
        std::fprintf(stderr, "hiodsfs-stat: cannot read %s: %s\n", path, std::strerror(errno));
        ++g_skipped;
        return 0;
    }
    if (flag == FTW_F && S_ISREG(st->st_mode)) g_files->push_back({path, *st});
    return 0;
}

std::uint64_t ns_of(const struct timespec& ts) {
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != 0) return false;
    return true;
}

// One chunking's streaming state over one file.
struct Stream {
    std::unique_ptr<Chunker> chunker;
    std::vector<std::uint8_t> pending;
    std::vector<ChunkRef>* out = nullptr;
    CompressionEstimate* compression = nullptr;  // the first chunking's, when asked
    void emit(Sha256& sha) {
        if (pending.empty()) return;
        if (!all_zero(pending.data(), pending.size())) {  // all-zero chunks become holes
            Digest d = sha.digest(pending.data(), pending.size());
            ChunkRef ref;
            std::memcpy(ref.key.data(), d.bytes.data(), 16);
            ref.len = static_cast<std::uint32_t>(pending.size());
            out->push_back(ref);
            if (compression != nullptr) compression->add(ref.key, pending.data(), ref.len);
        }
        pending.clear();
    }
    void feed(Sha256& sha, const std::uint8_t* data, std::size_t len) {
        std::size_t pos = 0;
        while (pos < len) {
            std::size_t n = chunker->next_cut(data + pos, len - pos);
            if (n == Chunker::kNoCut) {
                pending.insert(pending.end(), data + pos, data + len);
                return;
            }
            pending.insert(pending.end(), data + pos, data + pos + n);
            emit(sha);
            pos += n;
        }
    }
};

}  // namespace

std::vector<ChunkingParams> comparison_chunkings() {
    std::vector<ChunkingParams> out;
    for (std::uint32_t k : {4u, 8u, 16u, 32u}) out.push_back(ChunkingParams::fixed(k * 1024));
    for (std::uint32_t k : {4u, 8u, 16u, 32u}) out.push_back(ChunkingParams::cdc(k * 256, k * 1024, k * 4096));
    return out;
}

std::vector<Compression> default_estimate_compressions() {
    return {Compression{CompressionMethod::kLz4, 0}, Compression{CompressionMethod::kZstd, 3},
            Compression{CompressionMethod::kZstd, 9}};
}

Status parse_compression_list(const std::string& text, std::vector<Compression>* out) {
    std::vector<Compression> list;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        const std::string item =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        Compression c;
        if (item.empty())
            return Status::error(EINVAL, "--compression '" + text + "': an empty method");
        HIODSFS_TRY(parse_compression(item, &c));
        if (std::find(list.begin(), list.end(), c) != list.end())
            return Status::error(EINVAL,
                                 "--compression '" + text + "': " + compression_name(c) + " twice");
        list.push_back(c);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    const bool has_none = std::find_if(list.begin(), list.end(),
                                       [](const Compression& c) { return c.none(); }) != list.end();
    if (has_none && list.size() > 1)
        return Status::error(EINVAL, "--compression '" + text + "': none goes alone");
    if (has_none) list.clear();
    *out = std::move(list);
    return Status::ok();
}

std::string default_cache_path() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    std::string base;
    if (xdg != nullptr && xdg[0] == '/') base = xdg;
    else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') base = std::string(home) + "/.cache";
    else base = "/tmp";
    return base + "/hiodsfs/estimate.cache";
}

Status run_estimate(const EstimateOptions& opt, EstimateReport* out) {
    *out = EstimateReport{};
    if (opt.chunkings.empty()) return Status::error(EINVAL, "no chunking to estimate");
    for (const auto& c : opt.chunkings) HIODSFS_TRY(c.validate());
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

    // Roots, as absolute paths (cache keys).
    std::vector<std::string> roots;
    for (const auto& r : opt.roots) {
        char* real = ::realpath(r.c_str(), nullptr);
        if (real == nullptr) return Status::from_errno(errno, r);
        roots.emplace_back(real);
        std::free(real);
    }
    std::vector<Candidate> files;
    g_files = &files;
    g_skipped = 0;
    for (const auto& r : roots) {
        struct stat st{};
        if (::stat(r.c_str(), &st) != 0) return Status::from_errno(errno, r);
        if (::nftw(r.c_str(), collect, 32, FTW_PHYS | FTW_MOUNT) != 0) return Status::from_errno(errno, "walk " + r);
    }
    g_files = nullptr;
    out->skipped = g_skipped;

    // Hard links once; the same path given twice once.
    std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
    std::vector<Candidate> unique;
    for (auto& f : files)
        if (seen.insert({f.st.st_dev, f.st.st_ino}).second) unique.push_back(std::move(f));

    std::map<std::string, FileEntry> cache, next;
    std::string cached_sizes;  // the cache's compressed sizes, as they are on disk
    if (!opt.cache_path.empty())
        load_cache(opt.cache_path, &cache, &cached_sizes, &out->cache_loaded, &out->cache_note);
    // Distinct chunks of the first chunking are encoded as they are first
    // seen; chunks of cached files need their sizes from the cache.
    const bool compressing = !opt.compressions.empty();
    CompressionEstimate compression(opt.compressions, compressing ? opt.helpers : 0);
    if (compressing) load_sizes(cached_sizes, &compression);

    std::vector<std::string> descs;
    for (const auto& c : opt.chunkings) descs.push_back(c.describe());

    EstimateProgress prog;
    prog.files_total = unique.size();
    auto cached_entry = [&](const Candidate& f) -> const FileEntry* {
        auto it = cache.find(f.path);
        if (it == cache.end()) return nullptr;
        const FileEntry& e = it->second;
        if (e.dev != static_cast<std::uint64_t>(f.st.st_dev) || e.ino != f.st.st_ino ||
            e.size != static_cast<std::uint64_t>(f.st.st_size) || e.mtime_ns != ns_of(f.st.st_mtim) ||
            e.ctime_ns != ns_of(f.st.st_ctim))
            return nullptr;
        for (const auto& d : descs)
            if (e.chunks.count(d) == 0) return nullptr;
        for (const auto& ref : e.chunks.at(descs[0]))
            if (compressing && !compression.known(ref.key)) return nullptr;
        return &e;
    };
    // Decided before the loop: chunks encoded meanwhile do not make a file
    // cached half-way through the progress figures.
    std::vector<const FileEntry*> cached_entries(unique.size());
    for (std::size_t i = 0; i < unique.size(); ++i) {
        const auto& f = unique[i];
        cached_entries[i] = cached_entry(f);
        prog.bytes_total += static_cast<std::uint64_t>(f.st.st_size);
        if (cached_entries[i] == nullptr)
            prog.bytes_to_read += static_cast<std::uint64_t>(f.st.st_size);
    }
    out->files = unique.size();
    out->apparent_bytes = prog.bytes_total;

    std::vector<std::unordered_set<ChunkKey, ChunkKeyHash>> stored(opt.chunkings.size());
    out->results.resize(opt.chunkings.size());
    for (std::size_t i = 0; i < opt.chunkings.size(); ++i) out->results[i].chunking = opt.chunkings[i];
    auto account = [&](const FileEntry& e) {
        for (std::size_t i = 0; i < descs.size(); ++i) {
            auto& res = out->results[i];
            for (const auto& ref : e.chunks.at(descs[i])) {
                res.logical_bytes += ref.len;
                res.chunks += 1;
                if (stored[i].insert(ref.key).second) {
                    res.stored_bytes += ref.len;
                    res.unique_chunks += 1;
                }
            }
        }
    };

    Sha256 sha;
    std::vector<std::uint8_t> buf(1 << 20);
    double last_report = -1;
    auto report = [&](bool force) {
        if (!opt.progress) return;
        double now = elapsed();
        if (!force && now - last_report < opt.progress_interval_s) return;
        last_report = now;
        prog.elapsed_s = now;
        opt.progress(prog);
    };
    auto interrupted = [&] { return opt.interrupt != nullptr && opt.interrupt->load(); };

    for (std::size_t fi = 0; fi < unique.size(); ++fi) {
        const auto& f = unique[fi];
        if (interrupted()) break;
        if (const FileEntry* e = cached_entries[fi]) {
            account(*e);
            next[f.path] = *e;
            ++out->files_cached;
            ++prog.files_done;
            prog.bytes_done += static_cast<std::uint64_t>(f.st.st_size);
            report(false);
            continue;
        }
        int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            std::fprintf(stderr, "hiodsfs-stat: cannot read %s: %s\n", f.path.c_str(), std::strerror(errno));
            ++out->skipped;
            continue;
        }
        FileEntry e;
        e.dev = f.st.st_dev;
        e.ino = f.st.st_ino;
        e.size = static_cast<std::uint64_t>(f.st.st_size);
        e.mtime_ns = ns_of(f.st.st_mtim);
        e.ctime_ns = ns_of(f.st.st_ctim);
        std::vector<Stream> streams(opt.chunkings.size());
        for (std::size_t i = 0; i < streams.size(); ++i) {
            streams[i].chunker = Chunker::make(opt.chunkings[i]);
            streams[i].chunker->reset(0);
            streams[i].out = &e.chunks[descs[i]];
        }
        if (compressing) streams[0].compression = &compression;
        bool ok = true, stopped = false;
        std::uint64_t got = 0;
        for (;;) {
            if (interrupted()) {
                stopped = true;
                break;
            }
            ssize_t n = ::read(fd, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                std::fprintf(stderr, "hiodsfs-stat: cannot read %s: %s\n", f.path.c_str(), std::strerror(errno));
                ok = false;
                break;
            }
            if (n == 0) break;
            got += static_cast<std::uint64_t>(n);
            out->bytes_read += static_cast<std::uint64_t>(n);
            prog.bytes_read += static_cast<std::uint64_t>(n);
            prog.bytes_done += static_cast<std::uint64_t>(n);
            for (auto& s : streams) s.feed(sha, buf.data(), static_cast<std::size_t>(n));
            report(false);
        }
        ::close(fd);
        if (stopped) break;  // a partly read file is neither counted nor cached
        if (!ok) {
            ++out->skipped;
            continue;
        }
        for (auto& s : streams) s.emit(sha);
        // A file that changed while it was read is counted but not cached.
        struct stat after{};
        bool stable = ::stat(f.path.c_str(), &after) == 0 && ns_of(after.st_mtim) == e.mtime_ns &&
                      ns_of(after.st_ctim) == e.ctime_ns && got == e.size;
        account(e);
        if (stable) next[f.path] = std::move(e);
        ++out->files_read;
        ++prog.files_done;
    }
    out->interrupted = interrupted();
    compression.flush();
    out->compression = compression.figures(stored[0], out->results[0].logical_bytes);
    report(true);

    if (!opt.cache_path.empty()) {
        // Keep entries of other trees; entries under these roots that were
        // not seen this time (deleted files) go, unless the run stopped early.
        auto under_roots = [&](const std::string& p) {
            for (const auto& r : roots)
                if (p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && (r == "/" || p[r.size()] == '/')))
                    return true;
            return false;
        };
        for (auto& [p, e] : cache) {
            if (next.count(p) != 0) continue;
            if (!under_roots(p) || out->interrupted) next.emplace(p, std::move(e));
        }
        // The sizes of chunks the files kept refer to; a run without
        // compression keeps those it found.
        std::string sizes = cached_sizes;
        if (compressing) {
            std::unordered_set<ChunkKey, ChunkKeyHash> keep;
            for (const auto& [p, e] : next)
                for (const auto& [desc, refs] : e.chunks)
                    for (const auto& ref : refs) keep.insert(ref.key);
            sizes = save_sizes(compression, keep);
        }
        // Nothing read, nothing dropped and no sizes learnt: the cache on
        // disk is already this.
        const bool same = out->cache_loaded && out->files_read == 0 &&
                          next.size() == cache.size() && sizes == cached_sizes;
        if (!same) HIODSFS_TRY(save_cache(opt.cache_path, next, sizes));
    }
    out->elapsed_s = elapsed();
    return Status::ok();
}

std::string format_estimate_text(const EstimateReport& r) {
    std::string o;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%s%llu files, %s (%s read from %llu files, %llu from the cache) in %.1f s\n",
                  r.interrupted ? "INTERRUPTED after " : "",
                  static_cast<unsigned long long>(r.files), human_bytes(static_cast<double>(r.apparent_bytes)).c_str(),
                  human_bytes(static_cast<double>(r.bytes_read)).c_str(),
                  static_cast<unsigned long long>(r.files_read), static_cast<unsigned long long>(r.files_cached),
                  r.elapsed_s);
    o += buf;
    if (r.skipped > 0) o += std::to_string(r.skipped) + " unreadable files left out\n";
    std::snprintf(buf, sizeof(buf), "%-22s %12s %12s %12s %8s %12s\n", "chunking", "logical", "stored", "saved",
                  "ratio", "mean chunk");
    o += buf;
    for (const auto& x : r.results) {
        std::uint64_t saved = x.logical_bytes > x.stored_bytes ? x.logical_bytes - x.stored_bytes : 0;
        double mean = x.unique_chunks ? static_cast<double>(x.stored_bytes) / static_cast<double>(x.unique_chunks) : 0;
        std::snprintf(buf, sizeof(buf), "%-22s %12s %12s %12s %8.2f %12s\n", x.chunking.describe().c_str(),
                      human_bytes(static_cast<double>(x.logical_bytes)).c_str(),
                      human_bytes(static_cast<double>(x.stored_bytes)).c_str(),
                      human_bytes(static_cast<double>(saved)).c_str(), x.ratio(), human_bytes(mean).c_str());
        o += buf;
    }
    if (r.results.empty()) return o;
    const EstimateResult& first = r.results[0];
    std::snprintf(buf, sizeof(buf), "%s: %llu chunks, %llu unique\n",
                  first.chunking.describe().c_str(), static_cast<unsigned long long>(first.chunks),
                  static_cast<unsigned long long>(first.unique_chunks));
    o += buf;
    if (r.compression.empty()) return o;
    std::snprintf(buf, sizeof(buf),
                  "compressed, with each payload's prefix and a %u-byte record header per chunk:\n",
                  SegmentStore::kHeaderBytes);
    o += buf;
    std::snprintf(buf, sizeof(buf), "%-10s %12s %8s %9s %11s %10s\n", "method", "stored", "ratio",
                  "combined", "compressed", "CPU s/GiB");
    o += buf;
    for (const auto& f : r.compression) {
        const double share =
            f.chunks ? 100.0 * static_cast<double>(f.encoded_chunks) / static_cast<double>(f.chunks)
                     : 0;
        const auto cpu = f.cpu_s_per_gib();
        char cpu_text[32] = "-";
        if (cpu) std::snprintf(cpu_text, sizeof(cpu_text), "%.2f", *cpu);
        std::snprintf(buf, sizeof(buf), "%-10s %12s %8.2f %9.2f %9.0f %% %10s\n",
                      compression_name(f.method).c_str(),
                      human_bytes(static_cast<double>(f.stored_bytes)).c_str(), f.ratio(),
                      f.combined_ratio(), share, cpu_text);
        o += buf;
    }
    return o;
}

std::string format_estimate_json(const EstimateReport& r) {
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (const auto& x : r.results)
        results.push_back({{"chunking", x.chunking.describe()},
                           {"logical_bytes", x.logical_bytes},
                           {"stored_bytes", x.stored_bytes},
                           {"saved_bytes", x.logical_bytes > x.stored_bytes ? x.logical_bytes - x.stored_bytes : 0},
                           {"ratio", json_number(x.ratio())},
                           {"chunks", x.chunks},
                           {"unique_chunks", x.unique_chunks}});
    nlohmann::ordered_json methods = nlohmann::ordered_json::array();
    for (const auto& f : r.compression) {
        const auto cpu = f.cpu_s_per_gib();
        methods.push_back({{"method", compression_name(f.method)},
                           {"raw_bytes", f.raw_bytes},
                           {"stored_bytes", f.stored_bytes},
                           {"ratio", json_number(f.ratio())},
                           {"combined_ratio", json_number(f.combined_ratio())},
                           {"chunks", f.chunks},
                           {"encoded_chunks", f.encoded_chunks},
                           {"timed_bytes", f.timed_bytes},
                           {"cpu_s", json_number(f.cpu_s)},
                           {"cpu_s_per_gib", cpu ? nlohmann::ordered_json(json_number(*cpu))
                                                 : nlohmann::ordered_json()}});
    }
    nlohmann::ordered_json compression = {
        {"chunking", r.results.empty() ? std::string() : r.results[0].chunking.describe()},
        {"record_header_bytes", SegmentStore::kHeaderBytes},
        {"methods", std::move(methods)}};
    nlohmann::ordered_json j = {{"schema", "hiodsfs-stat-estimate/1"},
                                {"files", r.files},
                                {"apparent_bytes", r.apparent_bytes},
                                {"files_read", r.files_read},
                                {"files_cached", r.files_cached},
                                {"bytes_read", r.bytes_read},
                                {"skipped", r.skipped},
                                {"elapsed_s", json_number(r.elapsed_s)},
                                {"interrupted", r.interrupted},
                                {"results", std::move(results)},
                                {"compression", std::move(compression)}};
    return j.dump(2) + "\n";
}

}  // namespace hiodsfs::stat
