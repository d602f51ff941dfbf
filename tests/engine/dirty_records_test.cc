// The dirty queue's records: what a deferred write queues, and what the
// pass skips. A write that a record not yet taken covers queues none of
// its own, nor does a run of writes whose blocks records cover, nor a
// write over the rest of a sweep that yielded; a record a queued one
// covers is finished without a sweep; a record whose range an earlier
// sweep already chunked reads nothing (engine/pending_dirty.h,
// docs/architecture.md "Write-behind").
#include <pthread.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "engine_test_util.h"
#include "segment_read_counter.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

TEST_CASE("records of a range the pass has already swept are skipped without reading its chunks",
          "[engine][deferred][spare]") {
    // The same 4 KiB of a file overwritten again and again before the pass
    // runs, each time in another open (so each write queues its record:
    // within one open a pending record covers the next): the first
    // record's sweep chunks the range as it is then; the others find
    // nothing raw there and read nothing.
    auto read_by_pass = [](int overwrites) {
        TempDir dir;
        SegmentReadCounter counter(Env::posix());
        EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
        o.mode = DedupMode::kDeferred;
        o.background_threads = 0;
        o.env = &counter;
        std::mt19937_64 rng(9);
        InodeId ino = 0;
        {
            auto e = open_engine(o);
            ino = make_file(*e, "f").ino;
            write_all(*e, ino, 0, random_bytes(rng, 1 << 20));
            REQUIRE(e->run_background().is_ok());
        }
        std::vector<std::uint8_t> last;
        for (int i = 0; i < overwrites; ++i) {
            auto e = open_engine(o);
            last = random_bytes(rng, 4096);
            write_all(*e, ino, 512 * 1024, last);
        }
        auto e = open_engine(o);
        const std::uint64_t records = counters_of(*e).backlog_records;
        // Out of the write buffer: what the pass reads, it reads from the files.
        REQUIRE(e->sync_all().is_ok());
        counter.reset();
        REQUIRE(e->run_background().is_ok());
        const std::uint64_t pass_read = counter.total();
        UNSCOPED_INFO(overwrites << " overwrites: " << records << " records, the pass read " << pass_read << " bytes");
        CHECK(counters_of(*e).raw_bytes == 0);
        std::vector<std::uint8_t> back(4096);
        std::size_t got = 0;
        REQUIRE(e->read(ino, 512 * 1024, back.size(), back.data(), &got).is_ok());
        CHECK(back == last);
        return std::pair<std::uint64_t, std::uint64_t>{records, pass_read};
    };
    const auto [one_records, one] = read_by_pass(1);
    const auto [ten_records, ten] = read_by_pass(10);
    CHECK(ten_records > one_records);
    CHECK(one > 0);
    // Read again for each record, ten would read about ten times as much;
    // the bytes differ, so the cuts and what a sweep reads around them do too.
    CHECK(ten < 2 * one);
}

namespace {

// A deferred engine (no pass thread) with one 1 MiB file, drained; data is
// what the file should read back as.
struct DrainedFile {
    TempDir dir;
    std::unique_ptr<Engine> e;
    std::mt19937_64 rng;
    Attr a;
    std::vector<std::uint8_t> data;
    explicit DrainedFile(std::uint64_t seed) : rng(seed) {
        EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
        o.mode = DedupMode::kDeferred;
        o.background_threads = 0;
        e = open_engine(o);
        a = make_file(*e, "f");
        data = random_bytes(rng, 1 << 20);
        write_all(*e, a.ino, 0, data);
        REQUIRE(e->run_background().is_ok());
        REQUIRE(counters_of(*e).backlog_records == 0);
    }
    void overwrite(std::uint64_t at, std::size_t n = 4096) {
        const std::vector<std::uint8_t> b = random_bytes(rng, n);
        write_all(*e, a.ino, at, b);
        std::copy(b.begin(), b.end(), data.begin() + static_cast<std::ptrdiff_t>(at));
    }
};

}  // namespace

TEST_CASE("a deferred write over a range a record not yet taken by the pass covers queues no record of its own",
          "[engine][deferred][spare]") {
    DrainedFile f(10);
    auto& e = f.e;
    auto& data = f.data;
    const Attr& a = f.a;
    // A block rewritten over and over, as a database's or a VM image's is:
    // one record, whose sweep takes the last bytes.
    auto overwrite = [&](std::uint64_t at, std::size_t n) { f.overwrite(at, n); };
    for (int i = 0; i < 10; ++i) overwrite(256 * 1024, 4096);
    overwrite(256 * 1024 + 1000, 2000);  // inside it
    REQUIRE(e->sync_all().is_ok());      // the group the pass reads from
    CHECK(counters_of(*e).backlog_records == 1);
    CHECK(counters_of(*e).backlog_bytes == 4096);
    const auto status = nlohmann::json::parse(e->status_json());
    CHECK(status["dirty_writes_covered"] == 10);
    // Partly outside it: a record of its own.
    overwrite(256 * 1024 + 4000, 200);
    REQUIRE(e->sync_all().is_ok());
    CHECK(counters_of(*e).backlog_records == 2);
    REQUIRE(e->run_background().is_ok());
    SpaceCounters c = counters_of(*e);
    CHECK(c.backlog_records == 0);
    CHECK(c.raw_bytes == 0);
    CHECK(read_all(*e, a.ino) == data);
    // Taken and swept: the next write over the range queues again.
    overwrite(256 * 1024, 4096);
    REQUIRE(e->sync_all().is_ok());
    CHECK(counters_of(*e).backlog_records == 1);
    REQUIRE(e->run_background().is_ok());
    c = counters_of(*e);
    CHECK(c.raw_bytes == 0);
    CHECK(read_all(*e, a.ino) == data);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(f.dir.store()).empty());
}

// Two blocks with records of their own, written again side by side: the
// run of the two writes is covered block by block, and queues no third
// record over both (the backlog would count their bytes twice).
TEST_CASE("a run of writes whose blocks records cover block by block queues no record", "[engine][deferred][spare]") {
    DrainedFile f(12);
    auto& e = f.e;
    auto overwrite = [&](std::uint64_t at) { f.overwrite(at); };
    overwrite(256 * 1024);
    REQUIRE(e->sync_all().is_ok());
    overwrite(260 * 1024);
    REQUIRE(e->sync_all().is_ok());
    CHECK(counters_of(*e).backlog_records == 2);
    overwrite(256 * 1024);  // held together: one run
    overwrite(260 * 1024);
    REQUIRE(e->sync_all().is_ok());
    CHECK(counters_of(*e).backlog_records == 2);
    CHECK(counters_of(*e).backlog_bytes == 8192);
    REQUIRE(e->run_background().is_ok());
    CHECK(counters_of(*e).raw_bytes == 0);
    CHECK(read_all(*e, f.a.ino) == f.data);
}

// A sweep that yields puts the rest of its range back in the queue; that
// record is pending as a write's is, so the writes that go on over those
// bytes (a file rewritten while the pass works through it) queue none of
// their own, and the backlog does not count the same bytes twice.
TEST_CASE("writes over the rest of a sweep that yielded queue no records of their own",
          "[engine][deferred][spare]") {
    TempDir dir;
    const ChunkingParams params = ChunkingParams::cdc(1024, 4096, 16384);
    EngineOptions o = options_for(dir.store(), params);
    o.mode = DedupMode::kDeferred;
    o.background_threads = 1;
    // Paused until go; then one step of the pass (the worker's look at the
    // speed, the batch's size) whose sweep is told to stop after its first
    // piece (the third look), and paused again. Other threads see a pause.
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    int pass_looks = 0;
    EngineHooks hooks;
    hooks.background_speed = [&]() -> double {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        if (std::string(name) != "dedup-pass") return 0.0;
        std::lock_guard<std::mutex> l(mu);
        if (!go) return 0.0;
        ++pass_looks;
        cv.notify_all();
        return pass_looks <= 2 ? 1.0 : 0.0;
    };
    auto e = open_engine(o, hooks);
    std::mt19937_64 rng(23);
    std::vector<std::uint8_t> data = random_bytes(rng, 4 << 20);
    const Attr a = make_file(*e, "f");
    write_all(*e, a.ino, 0, data, 1 << 20);
    REQUIRE(e->sync_all().is_ok());
    {
        std::unique_lock<std::mutex> l(mu);
        go = true;
        // The fourth look is the worker's after the step.
        REQUIRE(cv.wait_for(l, std::chrono::seconds(60), [&] { return pass_looks >= 4; }));
    }
    auto status = nlohmann::json::parse(e->status_json());
    REQUIRE(status["sweeps_yielded"] == 1);
    REQUIRE(counters_of(*e).backlog_records == 1);  // the rest of the range
    const std::uint64_t covered_before = status["dirty_writes_covered"].get<std::uint64_t>();
    for (std::uint64_t at : {3u << 20, (4u << 20) - 4096}) {
        const std::vector<std::uint8_t> b = random_bytes(rng, 4096);
        write_all(*e, a.ino, at, b);
        std::copy(b.begin(), b.end(), data.begin() + static_cast<std::ptrdiff_t>(at));
    }
    REQUIRE(e->sync_all().is_ok());
    CHECK(counters_of(*e).backlog_records == 1);
    status = nlohmann::json::parse(e->status_json());
    CHECK(status["dirty_writes_covered"].get<std::uint64_t>() == covered_before + 2);
    REQUIRE(e->close().is_ok());
    o.background_threads = 0;
    e = open_engine(o);
    REQUIRE(e->run_background().is_ok());
    const SpaceCounters c = counters_of(*e);
    CHECK(c.backlog_records == 0);
    CHECK(c.raw_bytes == 0);
    CHECK(read_all(*e, a.ino) == data);
}
