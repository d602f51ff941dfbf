// Helpers shared by the engine tests: a temporary directory, reproducible
// random data, an engine opened on a store, and an invariant check that reads
// the metadata directly (reference counts, counters, extents inside chunks).
#pragma once

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "chunk/cipher.h"
#include "engine/engine_test_hooks.h"
#include "fsck/fsck.h"
#include "hiodsfs/engine.h"
#include "hiodsfs/segment_store.h"
#include "meta/chunk_table.h"
#include "meta/extent_map.h"
#include "meta/meta_store.h"
#include "meta/records.h"
#include "store/fault_env.h"

namespace hiodsfs::test {

// True in a sanitizer build. ASan turns each LMDB nested transaction (3 MiB
// of malloc) into fresh mmaps and page faults, so an engine operation costs
// about 40 times as much as in the regular build; the longest randomized
// tests do fewer operations there (the regular build runs them in full).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "hiodsfs-engine-XXXXXX").string();
        path_ = ::mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }
    std::string store() const { return path_ + "/store"; }

private:
    std::string path_;
};

// Fault k of a sweep over a step's I/O (a dying disk): the (k / 2)-th write
// (k even) or sync (k odd) from now on fails with EIO, and every later one.
struct DyingDisk {
    bool sync = false;
    std::uint64_t at = 0;
    explicit DyingDisk(int k) : sync(k % 2 == 1), at(static_cast<std::uint64_t>(k / 2)) {}
    std::string describe() const { return std::string(sync ? "sync" : "write") + " #" + std::to_string(at); }
    void arm(FaultInjectionEnv& fenv) const {
        if (sync)
            fenv.fail_sync_at(at, EIO, true);
        else
            fenv.fail_write_at(at, WriteFault::kIoError, true);
    }
};

inline std::vector<std::uint8_t> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w = rng();
        std::memcpy(v.data() + i, &w, 8);
    }
    for (; i < n; ++i) v[i] = static_cast<std::uint8_t>(rng());
    return v;
}

// Fixed 4 KiB chunks: chunk boundaries a test can predict.
inline const ChunkingParams kFixed = ChunkingParams::fixed(4096);
// Content-defined chunks of 4 to 64 KiB (16 KiB on average).
inline const ChunkingParams kCdc = ChunkingParams::cdc(4096, 16384, 65536);

inline EngineOptions options_for(const std::string& store, const ChunkingParams& chunking) {
    EngineOptions o;
    o.store_dir = store;
    o.chunking = chunking;
    o.chunking_given = true;
    o.lmdb_map_bytes = 1ull << 32;
    o.segments.max_segment_bytes = 4ull << 20;
    // Deletes are freed in the request and nothing compacts behind the
    // test's back, so counters are exact when checked (reclaim_test.cc
    // tests the reclaimer).
    o.reclaim = ReclaimMode::kOff;
    return o;
}

inline std::unique_ptr<Engine> open_engine(const EngineOptions& o, const EngineHooks& hooks = {}) {
    std::unique_ptr<Engine> e;
    Status st = open_engine_with_hooks(o, hooks, &e);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    return e;
}

inline Attr make_file(Engine& e, const std::string& name, InodeId parent = kRootInode) {
    NewNode n;
    n.mode = S_IFREG | 0644;
    Attr a;
    Status st = e.create(parent, name, n, &a);
    INFO(name << ": " << st.to_string());
    REQUIRE(st.is_ok());
    return a;
}

inline void write_all(Engine& e, InodeId ino, std::uint64_t off, const std::vector<std::uint8_t>& d,
                      std::size_t piece = 128 * 1024) {
    for (std::size_t done = 0; done < d.size(); done += piece) {
        std::size_t n = std::min(piece, d.size() - done);
        Status st = e.write(ino, off + done, d.data() + done, n);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
    }
}

inline std::vector<std::uint8_t> read_all(Engine& e, InodeId ino) {
    Attr a;
    REQUIRE(e.getattr(ino, &a).is_ok());
    std::vector<std::uint8_t> out(a.size);
    std::size_t got = 0;
    Status st = e.read(ino, 0, out.size(), out.data(), &got);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    REQUIRE(got == out.size());
    return out;
}

// The whole content of the file `name` in the root directory.
inline std::vector<std::uint8_t> read_named(Engine& e, const std::string& name) {
    Attr a;
    Status st = e.lookup(kRootInode, name, &a);
    INFO(name << ": " << st.to_string());
    REQUIRE(st.is_ok());
    return read_all(e, a.ino);
}

// A new file `name` in the root directory with `data`, fsynced.
inline Attr write_synced(Engine& e, const std::string& name, const std::vector<std::uint8_t>& data) {
    const Attr f = make_file(e, name);
    write_all(e, f.ino, 0, data);
    REQUIRE(e.fsync(f.ino, false).is_ok());
    return f;
}

// A path's permission bits, without following a link.
inline mode_t mode_of(const std::string& path) {
    struct stat st {};
    INFO("lstat " << path);
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

inline SpaceCounters counters_of(Engine& e) {
    SpaceCounters c;
    REQUIRE(e.counters(&c).is_ok());
    return c;
}

// Waits up to 10 s for the engine's own pass to drain the backlog; the
// counters as they were last read.
inline SpaceCounters wait_for_empty_backlog(Engine& e) {
    SpaceCounters c = counters_of(e);
    for (int i = 0; i < 200 && c.backlog_records != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        c = counters_of(e);
    }
    return c;
}

// Every extent of the store, with its inode, in key order (blocks decoded;
// a damaged block fails the test).
inline std::vector<std::pair<InodeId, MappedExtent>> all_extents(Txn& t) {
    std::vector<std::pair<InodeId, MappedExtent>> out;
    std::vector<MappedExtent> block;
    REQUIRE(for_each_extent_block(t, [&](const StoredBlock& b) {
                block.clear();
                REQUIRE(b.key_ok);
                REQUIRE(decode_extent_block(b.start, b.value, &block));
                for (const MappedExtent& m : block) out.emplace_back(b.ino, m);
                return Status::ok();
            }).is_ok());
    return out;
}

// Every record of every segment file of a closed store, in order (payloads
// checked against their CRC-32C when verify is set).
inline void for_each_segment_record(const std::string& store, bool verify,
                                    const std::function<void(const SegmentRecord&)>& fn) {
    std::unique_ptr<SegmentStore> segs;
    SegmentStoreOptions so;
    so.read_only = true;
    REQUIRE(SegmentStore::open(Env::posix(), store + "/segments", so, &segs).is_ok());
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    REQUIRE(segs->list_segments(&files).is_ok());
    for (const auto& f : files)
        REQUIRE(segs->scan(f.first, verify, [&](const SegmentRecord& r) {
            fn(r);
            return true;
        }).is_ok());
}

// The ids and records of every chunk (their blocks must all decode).
inline std::map<ChunkId, ChunkRecord> all_chunk_records(Txn& t) {
    std::map<ChunkId, ChunkRecord> out;
    Status st = for_each_chunk_block(t, [&](const StoredChunkBlock& b) {
        REQUIRE(b.value_ok);
        for (const auto& [id, r] : b.chunks) out[id] = r;
        return Status::ok();
    });
    REQUIRE(st.is_ok());
    return out;
}

// The number of a key that holds one number (a malformed key fails the test).
inline std::uint64_t key_number(std::string_view key) {
    std::uint64_t v = 0;
    REQUIRE(parse_key_u64(key, &v));
    return v;
}

// The extent of ino that starts at off (the test fails if there is none).
inline ExtentRecord extent_at(Txn& t, InodeId ino, std::uint64_t off) {
    std::vector<MappedExtent> ex;
    REQUIRE(extents_overlapping(t, ino, off, off + 1, &ex).is_ok());
    REQUIRE(ex.size() == 1);
    REQUIRE(ex[0].start == off);
    return ex[0].e;
}

// Checks the metadata invariants of a closed store, then runs hiodsfs-fsck's
// check on it; returns a description of every violation (empty when consistent).
// exact_dead_bytes: fsck's note that the dead-bytes counter differs from
// what the segments hold counts as a problem (a crash during compaction may
// leave it: pass false there).
// key: an encrypted store's.
inline std::vector<std::string> check_invariants(const std::string& store, bool exact_dead_bytes = true,
                                                 std::shared_ptr<const StoreKey> key = nullptr) {
    std::vector<std::string> problems;
    std::unique_ptr<MetaStore> m;
    Status st = MetaStore::open(store + "/meta", 1ull << 32, true, &m);
    if (!st) return {"open metadata: " + st.to_string()};
    std::unique_ptr<Txn> t;
    if (!m->begin(&t)) return {"begin"};
    std::map<ChunkId, std::uint64_t> refs;
    std::map<InodeId, std::uint64_t> mapped;
    std::uint64_t logical = 0;
    {
        for (const auto& [ino, m] : all_extents(*t)) {
            refs[m.e.chunk] += 1;
            mapped[ino] += m.e.length;
            logical += m.e.length;
        }
    }
    const std::map<ChunkId, ChunkRecord> chunks = all_chunk_records(*t);
    std::uint64_t stored = 0, content = 0;
    for (const auto& [id, r] : chunks) {
        if (r.lost()) continue;  // bytes lost with their segment are stored nowhere
        stored += r.stored_length();
        content += r.length;
    }
    for (const auto& [id, n] : refs) {
        auto it = chunks.find(id);
        if (it == chunks.end()) problems.push_back("extent refers to missing chunk " + std::to_string(id));
        else if (it->second.refs() != n)
            problems.push_back("chunk " + std::to_string(id) + " refs " + std::to_string(it->second.refs()) +
                               " but " + std::to_string(n) + " extents");
    }
    for (const auto& [id, r] : chunks)
        if (refs.find(id) == refs.end()) problems.push_back("chunk " + std::to_string(id) + " is unreferenced");
    {
        for (const auto& [ino, m] : all_extents(*t)) {
            const ExtentRecord& e = m.e;
            auto it = chunks.find(e.chunk);
            if (it != chunks.end() && std::uint64_t(e.chunk_off) + e.length > it->second.length)
                problems.push_back("extent reaches past its chunk");
        }
    }
    {
        Cursor c = t->cursor(Db::kInodes);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeRecord r;
            decode(c.value(), &r);
            InodeId ino = key_number(c.key());
            if (r.mapped != mapped[ino])
                problems.push_back("inode " + std::to_string(ino) + " mapped " + std::to_string(r.mapped) +
                                   " but extents hold " + std::to_string(mapped[ino]));
        }
    }
    const auto& cnt = t->super().counters;
    if (cnt.logical_bytes != logical)
        problems.push_back("logical_bytes " + std::to_string(cnt.logical_bytes) + " != " + std::to_string(logical));
    if (cnt.stored_bytes != stored)
        problems.push_back("stored_bytes " + std::to_string(cnt.stored_bytes) + " != " + std::to_string(stored));
    if (cnt.content_bytes != content)
        problems.push_back("content_bytes " + std::to_string(cnt.content_bytes) + " != " + std::to_string(content));
    if (cnt.chunk_count != chunks.size()) problems.push_back("chunk_count mismatch");
    t.reset();
    m.reset();
    // And hiodsfs-fsck's full check (every invariant, segment records too).
    FsckReport report;
    FsckOptions fo;
    fo.store = store;
    fo.key = std::move(key);
    st = run_fsck(fo, &report);
    if (!st) problems.push_back("fsck: " + st.to_string());
    for (const auto& p : report.problems) problems.push_back("fsck: " + p.what);
    for (const auto& n : report.notes)
        if (exact_dead_bytes && n.find("dead chunk bytes") != std::string::npos) problems.push_back("fsck: " + n);
    return problems;
}

// Flips one payload byte of a chunk in its segment file (rec: its record;
// at: the byte within the payload), as a disk's damage would.
inline void flip_chunk_byte(const std::string& store, const ChunkRecord& rec, std::uint64_t at) {
    char name[64];
    std::snprintf(name, sizeof name, "/segments/%08x.seg", rec.segment);
    std::fstream f(store + name, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekg(static_cast<std::streamoff>(rec.offset + at));
    char c = 0;
    f.read(&c, 1);
    c ^= 1;
    f.seekp(static_cast<std::streamoff>(rec.offset + at));
    f.write(&c, 1);
    REQUIRE(f.good());
}

// Each file's name, size and last change under dir: what a refused open
// must leave as it was (but the lock file, which every open writes its
// pid into).
inline std::set<std::string> files_state(const std::string& dir) {
    std::set<std::string> out;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
        if (f.path().filename() == "lock") continue;
        struct stat st {};
        REQUIRE(::lstat(f.path().c_str(), &st) == 0);
        out.insert(f.path().string() + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
                   "." + std::to_string(st.st_mtim.tv_nsec));
    }
    return out;
}

}  // namespace hiodsfs::test
