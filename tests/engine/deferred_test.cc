// Deferred mode: data is written raw with a dirty record; the background
// pass later chunks, fingerprints and shares it. After the pass the store
// holds what inline mode would hold for the same content.
#include <sys/stat.h>

#include "engine_test_util.h"

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

SpaceCounters counters_of(Engine& e) {
    SpaceCounters c;
    REQUIRE(e.counters(&c).is_ok());
    return c;
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

TEST_CASE("stale dirty records are harmless: overwrite, truncate, rename, unlink", "[engine][deferred]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    auto e = open_engine(o);
    std::mt19937_64 rng(4);
    auto d1 = random_bytes(rng, 400000);
    Attr a = make_file(*e, "a"), b = make_file(*e, "b"), c = make_file(*e, "c");
    write_all(*e, a.ino, 0, d1, 10000);
    write_all(*e, b.ino, 0, d1, 10000);
    write_all(*e, c.ino, 0, d1, 10000);
    // Later changes, some inline: the queued records now describe old data.
    e->set_deferred(false);
    auto patch = random_bytes(rng, 30000);
    write_all(*e, a.ino, 100000, patch);
    std::copy(patch.begin(), patch.end(), d1.begin() + 100000);
    SetAttr s;
    s.valid = SetAttr::kSize;
    s.size = 123456;
    Attr tmp;
    REQUIRE(e->setattr(b.ino, s, &tmp).is_ok());
    REQUIRE(e->rename(kRootInode, "b", kRootInode, "b2", 0).is_ok());
    REQUIRE(e->unlink(kRootInode, "c").is_ok());
    REQUIRE(e->run_background().is_ok());
    CHECK(read_all(*e, a.ino) == d1);
    auto bd = read_all(*e, b.ino);
    REQUIRE(bd.size() == 123456);
    // b's prefix equals the original data (before a's patch).
    std::mt19937_64 rng2(4);
    auto orig = random_bytes(rng2, 400000);
    CHECK(std::equal(bd.begin(), bd.end(), orig.begin()));
    SpaceCounters cnt;
    REQUIRE(e->counters(&cnt).is_ok());
    CHECK(cnt.backlog_records == 0);
    CHECK(cnt.raw_bytes == 0);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("the dirty queue survives a restart and a crash", "[engine][deferred]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(4096, 16384, 65536));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    std::mt19937_64 rng(8);
    auto data = random_bytes(rng, 2u << 20);
    {
        auto e = open_engine(o);
        Attr a = make_file(*e, "a"), b = make_file(*e, "b");
        write_all(*e, a.ino, 0, data);
        write_all(*e, b.ino, 0, data);
        REQUIRE(e->fsync(b.ino, false).is_ok());
        e->abandon();  // a crash right after the fsync
    }
    o.mode = DedupMode::kInline;
    o.background_threads = 2;  // the daemon's own pass picks the queue up
    auto e = open_engine(o);
    SpaceCounters c;
    for (int i = 0; i < 200; ++i) {
        REQUIRE(e->counters(&c).is_ok());
        if (c.backlog_records == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(c.backlog_records == 0);
    CHECK(c.stored_bytes == data.size());
    Attr a;
    REQUIRE(e->lookup(kRootInode, "a", &a).is_ok());
    CHECK(read_all(*e, a.ino) == data);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}
