// Deferred mode: data is written raw with a dirty record; the background
// pass later chunks, fingerprints and shares it. After the pass the store
// holds what inline mode would hold for the same content, cut at the same
// points as the content written in one go (also after inline writes that
// arrive out of order).
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "engine_test_util.h"
#include "common/parallel_loop.h"
#include "dedup/background_pass.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

struct Dataset {
    std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files;
};

Dataset make_dataset(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    Dataset d;
    auto base = random_bytes(rng, 6u << 20);
    d.files.emplace_back("base", base);
    d.files.emplace_back("copy", base);
    // The same data shifted by an insertion near the start.
    auto shifted = base;
    auto ins = random_bytes(rng, 1000);
    shifted.insert(shifted.begin() + 5000, ins.begin(), ins.end());
    d.files.emplace_back("shifted", shifted);
    d.files.emplace_back("unique", random_bytes(rng, 3u << 20));
    return d;
}

void write_dataset(Engine& e, const Dataset& d, std::size_t piece) {
    for (const auto& [name, data] : d.files) {
        Attr a = make_file(e, name);
        write_all(e, a.ino, 0, data, piece);
        REQUIRE(e.flush(a.ino).is_ok());
    }
}

}  // namespace

TEST_CASE("deferred writes converge to what inline mode stores", "[engine][deferred]") {
    for (auto params : {ChunkingParams::cdc(4096, 16384, 65536), ChunkingParams::fixed(4096)}) {
        DYNAMIC_SECTION(params.describe()) {
            Dataset d = make_dataset(21);
            TempDir inline_dir, deferred_dir;
            auto ie = open_engine(options_for(inline_dir.store(), params));
            write_dataset(*ie, d, 128 * 1024);
            SpaceCounters inline_c = counters_of(*ie);

            EngineOptions o = options_for(deferred_dir.store(), params);
            o.mode = DedupMode::kDeferred;
            o.background_threads = 0;
            auto de = open_engine(o);
            write_dataset(*de, d, 128 * 1024);
            SpaceCounters before = counters_of(*de);
            std::uint64_t total = 0;
            for (const auto& f : d.files) total += f.second.size();
            CHECK(before.raw_bytes == total);  // nothing shared yet
            CHECK(before.stored_bytes == total);
            CHECK(before.backlog_bytes == total);
            CHECK(before.backlog_records > 0);
            CHECK(before.dedup_hits == 0);
            for (const auto& [name, data] : d.files) {
                Attr a;
                REQUIRE(de->lookup(kRootInode, name, &a).is_ok());
                CHECK(read_all(*de, a.ino) == data);
            }

            REQUIRE(de->run_background().is_ok());
            SpaceCounters after = counters_of(*de);
            CHECK(after.backlog_records == 0);
            CHECK(after.backlog_bytes == 0);
            CHECK(after.raw_bytes == 0);
            INFO("inline stored " << inline_c.stored_bytes << ", deferred stored " << after.stored_bytes);
            double diff = std::abs(double(after.stored_bytes) - double(inline_c.stored_bytes));
            CHECK(diff <= 0.01 * double(inline_c.stored_bytes));
            CHECK(after.logical_bytes == inline_c.logical_bytes);
            CHECK(after.dead_bytes >= total - after.stored_bytes);
            for (const auto& [name, data] : d.files) {
                Attr a;
                REQUIRE(de->lookup(kRootInode, name, &a).is_ok());
                CHECK(read_all(*de, a.ino) == data);
            }
            REQUIRE(de->close().is_ok());
            auto problems = check_invariants(deferred_dir.store());
            for (auto& p : problems) UNSCOPED_INFO(p);
            CHECK(problems.empty());
        }
    }
}

TEST_CASE("a clone of deferred data made before the pass is deduplicated by it", "[engine][deferred]") {
    // cp uses copy_file_range, which shares the source's chunks: raw ones too.
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    auto e = open_engine(o);
    std::mt19937_64 rng(8);
    const auto data = random_bytes(rng, 300000);
    Attr a = make_file(*e, "a"), b = make_file(*e, "b"), c = make_file(*e, "c");
    write_all(*e, a.ino, 0, data);
    std::uint64_t copied = 0;
    REQUIRE(e->clone_range(a.ino, 0, b.ino, 0, data.size(), &copied).is_ok());
    REQUIRE(copied == data.size());
    // And a part of it into the middle of another file.
    write_all(*e, c.ino, 0, std::vector<std::uint8_t>(50000, 7));
    REQUIRE(e->clone_range(a.ino, 100000, c.ino, 20000, 60000, &copied).is_ok());
    REQUIRE(e->run_background().is_ok());
    SpaceCounters cnt = counters_of(*e);
    CHECK(cnt.raw_bytes == 0);
    CHECK(cnt.backlog_records == 0);
    // a's bytes once, and c's own (one run of sevens, and the chunk cut around the clone).
    CHECK(cnt.stored_bytes < data.size() + 50000);
    CHECK(read_all(*e, b.ino) == data);
    auto expect_c = std::vector<std::uint8_t>(80000, 7);
    std::copy(data.begin() + 100000, data.begin() + 160000, expect_c.begin() + 20000);
    CHECK(read_all(*e, c.ino) == expect_c);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

namespace {

// One extent of a file's map, read from a closed store's metadata.
struct MapEntry {
    std::uint64_t start = 0;
    ExtentRecord e;
    bool indexed = false;
};

std::vector<MapEntry> file_map(const std::string& store, InodeId ino) {
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(store + "/meta", 1ull << 32, true, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    std::vector<MapEntry> out;
    std::vector<MappedExtent> ex;
    REQUIRE(extents_overlapping(*t, ino, 0, ~std::uint64_t{0}, &ex).is_ok());
    for (const MappedExtent& m : ex) {
        MapEntry me;
        me.start = m.start;
        me.e = m.e;
        bool found = false;
        ChunkRecord rec;
        REQUIRE(get_chunk(*t, me.e.chunk, &rec, &found).is_ok());
        me.indexed = found && (rec.flags & ChunkRecord::kIndexed);
        out.push_back(me);
    }
    return out;
}

// 4 KiB blocks as fio's dedupe_percentage=50 makes them: half fresh random
// bytes, half copies of an earlier block.
struct BlockSource {
    std::mt19937_64 rng;
    std::vector<std::vector<std::uint8_t>> made;
    explicit BlockSource(std::uint64_t seed) : rng(seed) {}
    std::vector<std::uint8_t> next(std::size_t len = 4096) {
        std::vector<std::uint8_t> b;
        if (!made.empty() && rng() % 2 == 0)
            b = made[rng() % made.size()];
        else
            b = random_bytes(rng, 4096);
        made.push_back(b);
        b.resize(len);
        return b;
    }
};

// Compares the map of file ino in the closed store with the canonical
// chunking of the same bytes: `content` written sequentially in inline mode
// to a fresh store. Every extent must start at a canonical boundary, and the
// stores must hold the same bytes.
void check_canonical(const std::string& store, InodeId ino, const std::vector<std::uint8_t>& content,
                     const ChunkingParams& params) {
    TempDir canonical_dir;
    auto ce = open_engine(options_for(canonical_dir.store(), params));
    Attr ca = make_file(*ce, "f");
    write_all(*ce, ca.ino, 0, content);
    REQUIRE(ce->flush(ca.ino).is_ok());
    REQUIRE(ce->close().is_ok());
    ce.reset();

    auto stored_of = [](const std::string& dir) {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir + "/meta", 1ull << 32, true, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        return t->super().counters.stored_bytes;
    };
    auto got = file_map(store, ino);
    auto want = file_map(canonical_dir.store(), ca.ino);
    std::map<std::uint64_t, const MapEntry*> canonical;
    for (const auto& m : want) canonical[m.start] = &m;
    std::size_t differ = 0;
    for (const auto& m : got) {
        if (canonical.count(m.start)) continue;
        if (++differ > 20) continue;
        auto prev = std::prev(canonical.upper_bound(m.start));
        UNSCOPED_INFO("extent at " << m.start << " (length " << m.e.length << ", chunk_off "
                      << m.e.chunk_off << (m.indexed ? ", indexed" : ", raw")
                      << ") is no canonical boundary; canonical chunk [" << prev->first << ", "
                      << prev->first + prev->second->e.length << ")");
    }
    const std::uint64_t stored = stored_of(store), canonical_stored = stored_of(canonical_dir.store());
    INFO(got.size() << " extents, " << want.size() << " canonical, " << differ
         << " boundaries differ; stored " << stored << ", canonical " << canonical_stored);
    CHECK(differ == 0);
    CHECK(got.size() == want.size());
    CHECK(stored == canonical_stored);
}


// Drains the pass over file ino: it must then read back as content with
// nothing raw or queued, be cut as content written in one go inline (once
// the engine is closed), and leave a consistent store. before_close runs on
// the drained engine first (more checks, or cleaning up).
void check_drained(std::unique_ptr<Engine>& e, const std::string& store, InodeId ino,
                   const std::vector<std::uint8_t>& content, const ChunkingParams& params,
                   const std::function<void(Engine&)>& before_close = nullptr) {
    REQUIRE(e->flush(ino).is_ok());
    REQUIRE(e->run_background().is_ok());
    CHECK(read_all(*e, ino) == content);
    SpaceCounters c = counters_of(*e);
    CHECK(c.raw_bytes == 0);
    CHECK(c.backlog_records == 0);
    CHECK(c.backlog_bytes == 0);
    if (before_close) before_close(*e);
    REQUIRE(e->close().is_ok());
    e.reset();
    check_canonical(store, ino, content, params);
    auto problems = check_invariants(store);
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
}

}  // namespace

// Random 4 KiB overwrites and odd-sized appends (fio's dedupable blocks) in
// deferred mode, the pass catching up now and then; in the hybrid variant
// stretches of the writes are inline. Once drained, the file must be cut
// exactly as the same final bytes written sequentially in inline mode.
// A sanitizer build runs a quarter of it (a 1 MiB file, 750 overwrites):
// the same density of overwrites, passes and mode switches.
TEST_CASE("the pass leaves the canonical chunking after random overwrites", "[engine][deferred][slow]") {
    const int blocks_at_start = kSanitized ? 256 : 1024;  // 4 KiB each
    const int writes = blocks_at_start * 3000 / 1024;
    const int pass_every = writes / 3, switch_every = writes / 12;
    for (auto params : {ChunkingParams::cdc(2048, 8192, 32768), ChunkingParams::fixed(4096),
                        ChunkingParams::fixed(16384)}) {
        for (bool hybrid : {false, true}) {
            DYNAMIC_SECTION(params.describe() << (hybrid ? " hybrid" : " deferred")) {
                TempDir dir;
                EngineOptions o = options_for(dir.store(), params);
                o.mode = DedupMode::kDeferred;
                o.background_threads = 0;
                auto e = open_engine(o);
                Attr a = make_file(*e, "f");
                BlockSource blocks(77);
                std::vector<std::uint8_t> content;
                for (int i = 0; i < blocks_at_start; ++i) {  // written sequentially and drained
                    auto b = blocks.next();
                    content.insert(content.end(), b.begin(), b.end());
                }
                write_all(*e, a.ino, 0, content, 1 << 20);
                REQUIRE(e->flush(a.ino).is_ok());
                REQUIRE(e->run_background().is_ok());

                std::mt19937_64 rng(5);
                for (int i = 1; i <= writes; ++i) {
                    if (hybrid) e->set_deferred(i / switch_every % 2 == 0);
                    if (rng() % 20 == 0) {  // an append of an odd length
                        auto b = blocks.next(1 + rng() % 4096);
                        const std::uint64_t off = content.size();
                        content.insert(content.end(), b.begin(), b.end());
                        write_all(*e, a.ino, off, b);
                    } else {
                        auto b = blocks.next();
                        const std::uint64_t off = (rng() % (content.size() / 4096)) * 4096;
                        std::copy(b.begin(), b.end(), content.begin() + static_cast<std::ptrdiff_t>(off));
                        write_all(*e, a.ino, off, b);
                    }
                    // The pass sometimes catches up between writes, leaving
                    // re-chunked ranges next to raw ones.
                    if (i % pass_every == 0) REQUIRE(e->run_background().is_ok());
                }
                check_drained(e, dir.store(), a.ino, content, params);
            }
        }
    }
}

// The kernel may send the pages of a sequential write out of order (e.g.
// writeback): a write that lands after a gap is chunked from where it starts,
// and the write that fills the gap must re-cut through it.
TEST_CASE("inline writes out of order are cut as the same bytes written in order", "[engine]") {
    for (auto params : {ChunkingParams::cdc(2048, 8192, 32768), ChunkingParams::fixed(16384)}) {
        DYNAMIC_SECTION(params.describe()) {
            TempDir dir;
            auto e = open_engine(options_for(dir.store(), params));
            Attr a = make_file(*e, "f");
            BlockSource blocks(3);
            std::vector<std::uint8_t> content;
            for (int i = 0; i < 1024; ++i) {
                auto b = blocks.next();
                content.insert(content.end(), b.begin(), b.end());
            }
            // 128 KiB pieces in order, but every third pair swapped.
            constexpr std::size_t kPiece = 128 * 1024;
            std::vector<std::size_t> order;
            for (std::size_t i = 0; i < content.size() / kPiece; ++i) order.push_back(i);
            for (std::size_t i = 0; i + 1 < order.size(); i += 3) std::swap(order[i], order[i + 1]);
            for (std::size_t i : order) {
                std::vector<std::uint8_t> piece(content.begin() + static_cast<std::ptrdiff_t>(i * kPiece),
                                                content.begin() + static_cast<std::ptrdiff_t>((i + 1) * kPiece));
                write_all(*e, a.ino, i * kPiece, piece);
            }
            REQUIRE(e->flush(a.ino).is_ok());
            CHECK(read_all(*e, a.ino) == content);
            REQUIRE(e->close().is_ok());
            e.reset();
            check_canonical(dir.store(), a.ino, content, params);
            CHECK(check_invariants(dir.store()).empty());
        }
    }
}


// A sweep of the pass holds its file's stream lock for as long as the
// re-chunking of the merged range takes (seconds for a large file). Reads do
// not wait for it: every byte is mapped meanwhile, so they read the extents
// beside it, and go back to the lock only if a chunk vanished under them
// (compaction). Contents are checked on every read, with compaction on too.
TEST_CASE("reads beside the pass's sweep do not wait for it and read the file's bytes",
          "[engine][deferred]") {
    for (ReclaimMode reclaim : {ReclaimMode::kOff, ReclaimMode::kBackground}) {
        DYNAMIC_SECTION("reclaim " << static_cast<int>(reclaim)) {
            TempDir dir;
            EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(4096, 16384, 65536));
            o.mode = DedupMode::kDeferred;
            o.background_threads = 0;
            o.reclaim = reclaim;
            auto e = open_engine(o);
            std::mt19937_64 rng(77);
            // Half of it twice, so the pass frees raw chunks and compaction
            // has dead bytes to take back while the reads run.
            const std::size_t half = (kSanitized ? 4u : 12u) << 20;
            auto data = random_bytes(rng, half);
            data.insert(data.end(), data.begin(), data.end());
            Attr a = make_file(*e, "f");
            write_all(*e, a.ino, 0, data, 1u << 20);
            REQUIRE(e->flush(a.ino).is_ok());

            std::atomic<bool> done{false};
            Status pass_status;
            std::thread pass([&] {
                pass_status = e->run_background();
                done.store(true);
            });
            std::size_t reads = 0, wrong = 0;
            std::vector<std::uint8_t> buf(64 * 1024);
            while (!done.load()) {
                const std::size_t off = rng() % data.size();
                const std::size_t len = std::min(buf.size(), data.size() - off);
                std::size_t got = 0;
                Status st = e->read(a.ino, off, len, buf.data(), &got);
                INFO(st.to_string());
                REQUIRE(st.is_ok());
                REQUIRE(got == len);
                if (!std::equal(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(len),
                                data.begin() + static_cast<std::ptrdiff_t>(off)))
                    ++wrong;
                ++reads;
            }
            pass.join();
            INFO(pass_status.to_string());
            REQUIRE(pass_status.is_ok());
            CHECK(wrong == 0);
            // Without the lock-free path every read during the one long sweep
            // would wait for its end, and none would be counted.
            auto status = nlohmann::json::parse(e->status_json());
            INFO(reads << " reads");
            CHECK(status["reads_beside_sweep"].get<std::uint64_t>() > 0);
            CHECK(read_all(*e, a.ino) == data);
            CHECK(counters_of(*e).raw_bytes == 0);
            REQUIRE(e->close().is_ok());
            CHECK(check_invariants(dir.store()).empty());
        }
    }
}

// fsync and close (FUSE's flush) of a file the pass is sweeping need none
// of the sweep's work: every byte acknowledged before the sweep began was
// emitted when it took the lock, and no write gets in while it holds it.
// They do not wait for it (seconds for a large file). A power loss after
// them keeps the file whole.
TEST_CASE("fsync and close beside the pass's sweep do not wait for it", "[engine][deferred]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(4096, 16384, 65536));
    o.env = &fenv;
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    std::mt19937_64 rng(78);
    const std::size_t size = (kSanitized ? 8u : 24u) << 20;
    const auto data = random_bytes(rng, size);
    InodeId ino = 0;
    {
        auto e = open_engine(o);
        ino = make_file(*e, "big").ino;
        write_all(*e, ino, 0, data, 1u << 20);
        REQUIRE(e->flush(ino).is_ok());
        std::atomic<bool> done{false};
        Status pass_status;
        std::thread pass([&] {
            pass_status = e->run_background();
            done.store(true);
        });
        std::size_t syncs = 0;
        while (!done.load()) {
            REQUIRE(e->flush(ino).is_ok());
            REQUIRE(e->fsync(ino, false).is_ok());
            ++syncs;
        }
        pass.join();
        INFO(pass_status.to_string());
        REQUIRE(pass_status.is_ok());
        auto status = nlohmann::json::parse(e->status_json());
        INFO(syncs << " fsyncs");
        // Without the path beside the sweep each of them waits for its end.
        CHECK(status["syncs_beside_sweep"].get<std::uint64_t>() > 0);
        abandon_engine(*e);  // the power loss
    }
    REQUIRE(fenv.drop_all_unsynced().is_ok());
    auto e = open_engine(o);
    CHECK(read_all(*e, ino) == data);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

// A deferred file the pass sweeps with the throttle never pausing it, so
// that every stop of a sweep is for a request: step() runs until the pass
// is done, and may append to `want`. Then the pass drains what the stops
// left, and the file must read back as `want`.
static void step_beside_sweep(std::uint64_t seed,
                       const std::function<void(Engine&, InodeId, std::mt19937_64&, std::vector<std::uint8_t>*)>& step) {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(4096, 16384, 65536));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    EngineHooks hooks;
    hooks.background_speed = [] { return 1.0; };
    auto e = open_engine(o, hooks);
    std::mt19937_64 rng(seed);
    std::vector<std::uint8_t> want = random_bytes(rng, (kSanitized ? 8u : 24u) << 20);
    want.reserve(want.size() + (64u << 20));  // appends never move it (a copy would stall them)
    Attr a = make_file(*e, "f");
    write_all(*e, a.ino, 0, want, 1u << 20);
    REQUIRE(e->fsync(a.ino, false).is_ok());  // held writes applied: the pass has its work
    std::atomic<bool> done{false};
    Status pass_status;
    std::thread pass([&] {
        pass_status = e->run_background();
        done.store(true);
    });
    while (!done.load()) step(*e, a.ino, rng, &want);
    pass.join();
    INFO(pass_status.to_string());
    REQUIRE(pass_status.is_ok());
    auto status = nlohmann::json::parse(e->status_json());
    CHECK(status["sweeps_yielded_to_requests"].get<std::uint64_t>() > 0);
    CHECK(status["sweeps_yielded"].get<std::uint64_t>() >= status["sweeps_yielded_to_requests"].get<std::uint64_t>());
    REQUIRE(e->flush(a.ino).is_ok());
    REQUIRE(e->run_background().is_ok());
    CHECK(read_all(*e, a.ino) == want);
    CHECK(counters_of(*e).raw_bytes == 0);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

// A write to a file the pass is sweeping waits for the stream lock the
// sweep holds. The sweep lets it in at its next piece (1 MiB) instead of
// making it wait out the whole re-cut.
TEST_CASE("a write to a file the pass is sweeping makes the sweep yield", "[engine][deferred]") {
    step_beside_sweep(79, [](Engine& e, InodeId ino, std::mt19937_64& rng, std::vector<std::uint8_t>* want) {
        auto piece = random_bytes(rng, 4096);
        write_all(e, ino, want->size(), piece);
        want->insert(want->end(), piece.begin(), piece.end());
    });
}

// The same for the file's other operations that take its lock: lseek's
// SEEK_DATA (cp and tar look for holes that way) while the pass sweeps.
TEST_CASE("an lseek of a file the pass is sweeping makes the sweep yield", "[engine][deferred]") {
    step_beside_sweep(80, [](Engine& e, InodeId ino, std::mt19937_64&, std::vector<std::uint8_t>*) {
        std::uint64_t at = 1;
        REQUIRE(e.seek(ino, 0, SeekWhence::kData, &at).is_ok());
        REQUIRE(at == 0);
    });
}

// The throttle pausing the pass (reads or writes need the machine) stops a
// sweep at its next piece; the rest of its range is queued again from the
// stream's last cut. However often that happens, the drained file is cut
// exactly as its bytes written in one go in inline mode.
TEST_CASE("a sweep the throttle pauses stops early and leaves the canonical cuts", "[engine][deferred]") {
    for (auto params : {ChunkingParams::cdc(2048, 8192, 32768), ChunkingParams::fixed(4096)}) {
        DYNAMIC_SECTION(params.describe()) {
            TempDir dir;
            EngineOptions o = options_for(dir.store(), params);
            o.mode = DedupMode::kDeferred;
            o.background_threads = 0;
            EngineHooks hooks;
            hooks.background_speed = [] { return 0.0; };  // paused: every sweep stops after a piece
            auto e = open_engine(o, hooks);
            Attr a = make_file(*e, "f");
            BlockSource blocks(91);
            std::vector<std::uint8_t> content;
            const int n = kSanitized ? 1024 : 2048;  // 4 or 8 MiB
            for (int i = 0; i < n; ++i) {
                auto b = blocks.next();
                content.insert(content.end(), b.begin(), b.end());
            }
            write_all(*e, a.ino, 0, content, 1 << 20);
            // Overwrites in the middle, so some sweeps start inside chunked data.
            std::mt19937_64 rng(3);
            for (int i = 0; i < 40; ++i) {
                auto b = blocks.next();
                const std::uint64_t off = (rng() % (content.size() / 4096)) * 4096;
                std::copy(b.begin(), b.end(), content.begin() + static_cast<std::ptrdiff_t>(off));
                write_all(*e, a.ino, off, b);
            }
            check_drained(e, dir.store(), a.ino, content, params, [](Engine& drained) {
                auto status = nlohmann::json::parse(drained.status_json());
                CHECK(status["sweeps_yielded"].get<std::uint64_t>() >= 3);
            });
        }
    }
}

// Raw bytes before a record (a file written whole in deferred mode) are its
// sweep's to read from the cut before it, which may be the file's start, and
// after it until a cut meets a chunk boundary, the file's end here. A sweep
// that read all of that in one go held the file's lock for seconds on a
// large file, and every write to it waited. A record whose cut lies more
// than 4 MiB back goes to the back of the queue, behind the records of
// those bytes; the re-cut after a range goes in steps that yield as the
// range does: with the throttle paused every sweep stops after a piece
// (1 MiB), so the 8 MiB file takes several. Written in one run, the
// later records cover the first one, which then needs no sweep at all
// (pending_dirty.h); records from before an open are not known to cover
// anything, and the first one waits.
namespace {

// The oldest record is 4 KiB at 6 MiB, written first; then records of
// another file fill the pass's first batch; then the file around the first
// record comes, raw, with records of its own in later batches.
struct FarRecord {
    TempDir dir;
    ChunkingParams params = ChunkingParams::cdc(2048, 8192, 32768);
    std::unique_ptr<Engine> e;
    Attr a;
    std::vector<std::uint8_t> content;
    EngineOptions options() {
        EngineOptions o = options_for(dir.store(), params);
        o.mode = DedupMode::kDeferred;
        o.background_threads = 0;
        return o;
    }
    EngineHooks hooks() {
        EngineHooks h;
        h.background_speed = [] { return 0.0; };
        return h;
    }
    FarRecord() {
        e = open_engine(options(), hooks());
        a = make_file(*e, "f");
        BlockSource blocks(17);
        for (int i = 0; i < 2048; ++i) {  // 8 MiB
            auto b = blocks.next();
            content.insert(content.end(), b.begin(), b.end());
        }
        const std::uint64_t at = 6u << 20;
        write_all(*e, a.ino, at, std::vector<std::uint8_t>(content.begin() + at, content.begin() + at + 4096));
        Attr other = make_file(*e, "g");
        std::vector<std::uint8_t> small(4096, 7);
        for (std::uint64_t i = 0; i < 300; ++i) write_all(*e, other.ino, i * 8192, small);
        write_all(*e, a.ino, 0, content, 1 << 20);
    }
    void drain(bool first_waits) {
        check_drained(e, dir.store(), a.ino, content, params, [&](Engine& drained) {
            auto status = nlohmann::json::parse(drained.status_json());
            if (first_waits) {
                CHECK(status["sweeps_deferred"].get<std::uint64_t>() >= 1);  // behind the others
            } else {
                CHECK(status["sweeps_deferred"] == 0);
                CHECK(status["dirty_records_covered"].get<std::uint64_t>() >= 1);
            }
            // One stop per MiB but the last.
            CHECK(status["sweeps_yielded"].get<std::uint64_t>() >= 7);
            REQUIRE(drained.unlink(kRootInode, "g").is_ok());  // the canonical store holds f alone
            REQUIRE(drained.run_reclaim().is_ok());
        });
    }
};

}  // namespace

TEST_CASE("a record far inside raw bytes waits for their records, and the re-cut after a range yields too",
          "[engine][deferred]") {
    FarRecord f;
    REQUIRE(f.e->close().is_ok());
    f.e = open_engine(f.options(), f.hooks());
    f.drain(true);
}

TEST_CASE("a record that a later one of this run covers is finished without a sweep", "[engine][deferred][spare]") {
    FarRecord f;
    f.drain(false);
}

// An overwrite inside a file runs in a window of its own (write_path.cc,
// "Overwrites in windows"), which bounds how far its realignment may read.
// Raw bytes after it (written deferred, not yet swept) hold no chunk
// boundary to stop at: the realignment runs on past the window, and the
// write is made again under the file's stream lock, whole, as before.
TEST_CASE("an overwrite whose realignment leaves its window through raw data is made again under the lock",
          "[engine][deferred]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    auto e = open_engine(o);
    std::mt19937_64 rng(41);
    auto data = random_bytes(rng, 2 << 20);
    Attr a = make_file(*e, "a");
    write_all(*e, a.ino, 0, data, 1 << 20);
    e->set_deferred(false);
    auto patch = random_bytes(rng, 4096);
    write_all(*e, a.ino, 512 * 1024, patch);
    std::copy(patch.begin(), patch.end(), data.begin() + 512 * 1024);
    auto status = nlohmann::json::parse(e->status_json());
    INFO(status.dump());
    CHECK(status["window_retries"].get<std::uint64_t>() >= 1);
    CHECK(read_all(*e, a.ino) == data);
    REQUIRE(e->run_background().is_ok());
    CHECK(read_all(*e, a.ino) == data);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

namespace {

std::size_t threads_of_this_process() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

}  // namespace

// The pass's pools run on oneTBB's worker threads, which outlive the pools.
// A daemon returns from main right after closing its engine: a worker still
// exiting then raced LeakSanitizer's scan (OpenSSL's per-thread state).
// The workers end soon after anyway, so each round only may catch them.
TEST_CASE("a closed engine leaves none of the pass's threads running", "[engine][deferred]") {
    // Workers of an earlier test's pools, if any, end first.
    REQUIRE(WorkerThreads().join());
    std::thread([] {}).join();  // ThreadSanitizer starts a thread of its own with the first
    const std::size_t before = threads_of_this_process();
    std::mt19937_64 rng(5);
    for (int round = 0; round < 6; ++round) {
        INFO("round " << round);
        TempDir dir;
        EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(4096, 16384, 65536));
        o.mode = DedupMode::kDeferred;
        o.background_threads = 2;
        auto e = open_engine(o);
        for (int f = 0; f < 8; ++f) {  // a task per file: enough for the pool to start a worker
            Attr a = make_file(*e, "f" + std::to_string(f));
            write_all(*e, a.ino, 0, random_bytes(rng, 256u << 10));
            REQUIRE(e->flush(a.ino).is_ok());
        }
        REQUIRE(wait_for_empty_backlog(*e).backlog_records == 0);  // the pass ran on its pool
        REQUIRE(e->close().is_ok());
        // Only the digest helpers are left, until the engine is destroyed.
        CHECK(threads_of_this_process() == before + ParallelLoop::default_helpers());
        e.reset();
        CHECK(threads_of_this_process() == before);
    }
}
