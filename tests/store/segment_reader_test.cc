// SegmentReader, through SegmentStore: corrupt records read as EIO, never
// as wrong bytes; runs of records read in one call, each checked; records
// larger than the per-thread buffer; reads alongside appends and syncs.

#include "store/segment_reader.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "hiodsfs/segment_store.h"
#include "segment_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

TEST_CASE("segment store: records of several MiB", "[segment]") {
    TempDir tmp;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(8 << 20, 1 << 20), &s));
    std::mt19937_64 rng(12);
    Rec small, big;
    REQUIRE_OK(append(*s, 1, test::random_bytes(rng, 100), &small));
    REQUIRE_OK(append(*s, 2, test::random_bytes(rng, 5 << 20), &big));
    REQUIRE_OK(read_back(*s, big));  // from the buffer
    REQUIRE_OK(s->sync());
    REQUIRE_OK(read_back(*s, big));  // from the file, past the per-thread buffer size
    REQUIRE_OK(read_back(*s, small));
    std::vector<char> out(big.loc.length);
    REQUIRE(s->read(big.loc, 3, out.data()).err() == EIO);
    flip_byte(segment_path(tmp.path(), 1), big.loc.offset + (3 << 20));
    Status st = read_back(*s, big);
    REQUIRE(st.err() == EIO);
    REQUIRE(st.message().find("payload checksum") != std::string::npos);
}

TEST_CASE("segment store: corrupt records read as EIO, never as wrong bytes", "[segment]") {
    TempDir tmp;
    const auto opts = small_options(16 << 10, 4096);
    std::mt19937_64 rng(5);
    std::vector<Rec> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
        for (ChunkId id = 1; id <= 40; ++id) {
            Rec r;
            REQUIRE_OK(append(*s, id, test::random_bytes(rng, 200 + rng() % 2000), &r));
            recs.push_back(std::move(r));
        }
        REQUIRE_OK(s->sync());
    }
    REQUIRE(recs[5].loc.segment < recs.back().loc.segment);  // a sealed segment
    const Rec victim = recs[5];
    const std::string seg = segment_path(tmp.path(), victim.loc.segment);
    std::unique_ptr<SegmentStore> s;
    std::string want;

    SECTION("payload byte") {
        flip_byte(seg, victim.loc.offset + victim.loc.length / 2);
        want = "payload checksum";
    }
    SECTION("chunk id byte in the header") {
        flip_byte(seg, header_offset(victim) + 9);
        want = "header checksum";
    }
    SECTION("magic") {
        flip_byte(seg, header_offset(victim));
        want = "magic";
    }
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    Status st = read_back(*s, victim);
    REQUIRE(st.err() == EIO);
    INFO(st.message());
    REQUIRE(st.message().find(want) != std::string::npos);
    REQUIRE(st.message().find(seg) != std::string::npos);  // names the segment
    REQUIRE(st.message().find(std::to_string(victim.loc.offset)) != std::string::npos);
    // A failure of the record itself, not an I/O error that may pass.
    std::vector<char> out(victim.loc.length);
    bool damaged = false;
    REQUIRE(s->read(victim.loc, victim.id, out.data(), &damaged).err() == EIO);
    CHECK(damaged);
    for (const Rec& r : recs) {
        if (r.id != victim.id) REQUIRE_OK(read_back(*s, r));
    }
}

// Reads recs[from, to) as one run; ok only if every payload came back exact.
Status read_run_back(SegmentStore& s, const std::vector<Rec>& recs, std::size_t from, std::size_t to) {
    std::vector<ChunkLocation> locs;
    std::vector<ChunkId> ids;
    for (std::size_t i = from; i < to; ++i) {
        locs.push_back(recs[i].loc);
        ids.push_back(recs[i].id);
    }
    std::vector<std::vector<char>> got(to - from);
    std::vector<char*> dests;
    for (std::size_t i = 0; i < got.size(); ++i) {
        got[i].assign(locs[i].length, '\x5a');
        dests.push_back(got[i].data());
    }
    Status st = s.read_run(locs.data(), ids.data(), locs.size(), dests.data());
    if (st) {
        for (std::size_t i = from; i < to; ++i) {
            INFO("chunk " << recs[i].id);
            REQUIRE(got[i - from] == recs[i].data);
        }
    }
    return st;
}

TEST_CASE("segment store: a run of back-to-back records is read with one call, each checked", "[segment]") {
    TempDir tmp;
    // 64 KiB segments, 4 KiB buffer: records in sealed segments, in the
    // active one's file and in its write buffer.
    const auto opts = small_options(64 << 10, 4096);
    std::mt19937_64 rng(11);
    std::vector<Rec> recs;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    for (ChunkId id = 1; id <= 60; ++id) {
        Rec r;
        REQUIRE_OK(append(*s, id, test::random_bytes(rng, 1 + rng() % 3000), &r));
        recs.push_back(std::move(r));
    }
    // Every maximal run of adjacent records in the first segment reads back.
    std::size_t end = 1;
    while (end < recs.size() && SegmentStore::adjacent(recs[end - 1].loc, recs[end].loc)) ++end;
    REQUIRE(end >= 10);
    REQUIRE(end < recs.size());  // the next record starts a new segment
    REQUIRE_OK(read_run_back(*s, recs, 0, end));
    REQUIRE_OK(read_run_back(*s, recs, 3, 7));

    SECTION("records in different segments are not a run") {
        REQUIRE(read_run_back(*s, recs, end - 2, end + 1).err() == EINVAL);
    }
    SECTION("records with a gap are not a run") {
        std::vector<Rec> gap{recs[1], recs[3]};
        REQUIRE(read_run_back(*s, gap, 0, 2).err() == EINVAL);
    }
    SECTION("records still in the write buffer are left to read()") {
        Rec a, b;
        REQUIRE_OK(append(*s, 100, test::random_bytes(rng, 100), &a));
        REQUIRE_OK(append(*s, 101, test::random_bytes(rng, 100), &b));
        std::vector<Rec> tail{a, b};
        REQUIRE(SegmentStore::adjacent(a.loc, b.loc));
        REQUIRE(read_run_back(*s, tail, 0, 2).err() == EAGAIN);
        REQUIRE_OK(read_back(*s, a));
        REQUIRE_OK(s->flush());
        REQUIRE_OK(read_run_back(*s, tail, 0, 2));
    }
    SECTION("a damaged record fails the whole run; read() names it") {
        REQUIRE_OK(s->sync());
        const Rec& victim = recs[5];
        flip_byte(segment_path(tmp.path(), victim.loc.segment), victim.loc.offset + victim.loc.length / 2);
        Status st = read_run_back(*s, recs, 0, end);
        REQUIRE(st.err() == EIO);
        REQUIRE(st.message().find("payload checksum") != std::string::npos);
        REQUIRE(read_back(*s, victim).err() == EIO);
        REQUIRE_OK(read_run_back(*s, recs, 0, 5));
        REQUIRE_OK(read_run_back(*s, recs, 6, end));
    }
}

TEST_CASE("segment store: reads run alongside appends and syncs", "[segment][threads]") {
    TempDir tmp;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(64 << 10, 8192), &s));
    // A record's bytes follow from its id, so readers can check them.
    auto content = [](ChunkId id) {
        std::mt19937_64 rng(id);
        return test::random_bytes(rng, 1 + rng() % 4000);
    };
    std::mutex mu;
    std::vector<Rec> published;
    std::atomic<bool> done{false};
    std::atomic<int> bad{0};
    std::atomic<long> reads{0};

    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t) {
        readers.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<std::uint64_t>(t));
            std::vector<char> out;
            while (!done.load()) {
                Rec r;
                {
                    std::lock_guard lock(mu);
                    if (published.empty()) continue;
                    // Mostly the newest records: those are still in the buffer.
                    const std::size_t n = published.size();
                    const std::size_t i =
                        rng() % 2 ? n - 1 - rng() % std::min<std::size_t>(n, 8) : rng() % n;
                    r = published[i];
                }
                out.assign(r.loc.length, 0);
                Status st = s->read(r.loc, r.id, out.data());
                if (!st || out != r.data) bad.fetch_add(1);
                reads.fetch_add(1);
            }
        });
    }
    Status writer_status;
    for (ChunkId id = 1; id <= 3000 && writer_status; ++id) {
        Rec r;
        writer_status = append(*s, id, content(id), &r);
        if (!writer_status) break;
        {
            std::lock_guard lock(mu);
            published.push_back(std::move(r));
        }
        if (id % 200 == 0) writer_status = s->sync();
    }
    done.store(true);
    for (auto& th : readers) th.join();
    REQUIRE_OK(writer_status);
    REQUIRE(bad.load() == 0);
    REQUIRE(reads.load() > 0);
    require_all(*s, published);
}

}  // namespace
}  // namespace hiodsfs
