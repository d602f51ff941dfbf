// The background pass's side of the engine (src/engine/background.cc): it
// takes the dirty queue's records and applies them to the files as they are
// now, so a record made stale by a later overwrite, truncate, rename or
// unlink does no harm; and the queue survives a restart and a crash, for
// the next mount's pass to finish.
#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

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
        abandon_engine(*e);  // a crash right after the fsync
    }
    o.mode = DedupMode::kInline;
    o.background_threads = 2;  // the daemon's own pass picks the queue up
    auto e = open_engine(o);
    SpaceCounters c = wait_for_empty_backlog(*e);
    CHECK(c.backlog_records == 0);
    CHECK(c.stored_bytes == data.size());
    Attr a;
    REQUIRE(e->lookup(kRootInode, "a", &a).is_ok());
    CHECK(read_all(*e, a.ino) == data);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}
