// SegmentStore: round trips, torn tails, corruption, injected faults and
// simulated power loss.

#include "hiodsfs/segment_store.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "chunk/fingerprint.h"
#include "segment_test_util.h"
#include "store/fault_env.h"

namespace hiodsfs {
namespace {

using namespace test;

// ------------------------------------------------------------ basics

TEST_CASE("crc32c check value", "[segment]") {
    // The record format depends on it; the vector from the CRC-32C spec.
    REQUIRE(crc32c("123456789", 9) == 0xE3069283u);
}

TEST_CASE("segment store: round trip across segments, buffer and reopen", "[segment]") {
    TempDir tmp;
    const std::string dir = tmp / "segments";
    const auto opts = small_options(64 << 10, 16 << 10);
    std::mt19937_64 rng(42);
    std::vector<Rec> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir, opts, &s));
        REQUIRE(s->active_segment() == 1);
        for (ChunkId id = 1; id <= 400; ++id) {
            const std::size_t len = rng() % 3 == 0 ? rng() % 20000 : rng() % 2000;
            Rec r;
            REQUIRE_OK(append(*s, id, test::random_bytes(rng, len), &r));
            // Readable at once, while it is still in the write buffer.
            REQUIRE_OK(read_back(*s, r));
            if (!recs.empty()) {
                // Records go in order; a new segment starts at offset 0.
                const Rec& prev = recs.back();
                if (r.loc.segment == prev.loc.segment) {
                    REQUIRE(header_offset(r) == prev.loc.offset + prev.loc.length);
                } else {
                    REQUIRE(r.loc.segment == prev.loc.segment + 1);
                    REQUIRE(header_offset(r) == 0);
                }
            }
            REQUIRE(r.loc.offset + r.loc.length <= opts.max_segment_bytes);
            recs.push_back(std::move(r));
            if (id % 97 == 0) REQUIRE_OK(s->sync());
        }
        require_all(*s, recs);
        REQUIRE_OK(s->sync());
        require_all(*s, recs);
        REQUIRE(recs.back().loc.segment >= 5);
    }
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir, opts, &s));
    REQUIRE(s->active_segment() == recs.back().loc.segment);
    require_all(*s, recs);
    // Appends continue right after the last record.
    Rec r;
    REQUIRE_OK(append(*s, 1000, test::random_bytes(rng, 10), &r));
    const Rec& last = recs.back();
    if (r.loc.segment == last.loc.segment) {
        REQUIRE(header_offset(r) == last.loc.offset + last.loc.length);
    }
    REQUIRE_OK(read_back(*s, r));
}

TEST_CASE("segment store: an append with the payload's checksum given stores that checksum", "[segment]") {
    TempDir tmp;
    const std::string dir = tmp / "segments";
    std::mt19937_64 rng(7);
    const std::vector<char> good = test::random_bytes(rng, 5000);
    const std::vector<char> bad = test::random_bytes(rng, 5000);
    Rec given, wrong;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir, small_options(1 << 20, 4096), &s));
        given.id = 1;
        given.data = good;
        REQUIRE_OK(s->append(1, good.data(), 5000, crc32c(good.data(), good.size()), &given.loc));
        // A checksum that is not the payload's: the record must not read.
        wrong.id = 2;
        wrong.data = bad;
        REQUIRE_OK(s->append(2, bad.data(), 5000, crc32c(good.data(), good.size()), &wrong.loc));
        REQUIRE_OK(read_back(*s, given));
        CHECK(read_back(*s, wrong).err() == EIO);  // from the write buffer
        REQUIRE_OK(s->sync());
    }
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir, small_options(1 << 20, 4096), &s));
    REQUIRE_OK(read_back(*s, given));
    CHECK(read_back(*s, wrong).err() == EIO);  // from the file
}

TEST_CASE("segment store: oversized and empty records, invalid chunk id", "[segment]") {
    TempDir tmp;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(4096, 1024), &s));
    std::mt19937_64 rng(1);
    std::vector<Rec> recs(4);
    REQUIRE_OK(append(*s, 1, test::random_bytes(rng, 100), &recs[0]));
    REQUIRE_OK(append(*s, 2, test::random_bytes(rng, 10000), &recs[1]));  // > max segment
    REQUIRE_OK(append(*s, 3, {}, &recs[2]));
    REQUIRE_OK(append(*s, 4, test::random_bytes(rng, 100), &recs[3]));
    // The big record has a segment to itself; the next one starts another.
    REQUIRE(recs[0].loc.segment == 1);
    REQUIRE(recs[1].loc.segment == 2);
    REQUIRE(header_offset(recs[1]) == 0);
    REQUIRE(recs[2].loc.segment == 3);
    REQUIRE(recs[3].loc.segment == 3);
    require_all(*s, recs);
    REQUIRE_OK(s->sync());
    s.reset();
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(4096, 1024), &s));
    require_all(*s, recs);

    ChunkLocation loc;
    REQUIRE(s->append(0, "x", 1, &loc).err() == EINVAL);
}

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

// ------------------------------------------------------------ torn tails

TEST_CASE("segment store: a torn tail is cut and appending resumes there", "[segment]") {
    TempDir tmp;
    const auto opts = small_options(1 << 20, 4096);
    std::mt19937_64 rng(3);
    std::vector<Rec> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
        for (ChunkId id = 1; id <= 30; ++id) {
            Rec r;
            REQUIRE_OK(append(*s, id, test::random_bytes(rng, 500 + rng() % 3000), &r));
            recs.push_back(std::move(r));
        }
        REQUIRE_OK(s->sync());
    }
    const Rec torn = recs.back();
    const std::string seg = segment_path(tmp.path(), torn.loc.segment);

    std::uint64_t cut = 0;
    SECTION("cut in the middle of the payload") { cut = torn.loc.offset + torn.loc.length / 2; }
    SECTION("cut in the middle of the header") { cut = header_offset(torn) + 10; }
    SECTION("cut one byte short") { cut = torn.loc.offset + torn.loc.length - 1; }
    std::filesystem::resize_file(seg, cut);

    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    recs.pop_back();
    require_all(*s, recs);
    REQUIRE(read_back(*s, torn).err() == EIO);
    REQUIRE(std::filesystem::file_size(seg) == header_offset(torn));

    Rec r;
    REQUIRE_OK(append(*s, 100, test::random_bytes(rng, 777), &r));
    REQUIRE(r.loc.segment == torn.loc.segment);
    REQUIRE(header_offset(r) == header_offset(torn));
    REQUIRE_OK(s->sync());
    recs.push_back(r);
    s.reset();
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    require_all(*s, recs);
}

TEST_CASE("segment store: garbage after the last record is dropped", "[segment]") {
    TempDir tmp;
    const auto opts = small_options(1 << 20, 4096);
    std::mt19937_64 rng(4);
    std::vector<Rec> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
        for (ChunkId id = 1; id <= 20; ++id) {
            Rec r;
            REQUIRE_OK(append(*s, id, test::random_bytes(rng, 1 + rng() % 4000), &r));
            recs.push_back(std::move(r));
        }
        REQUIRE_OK(s->sync());
    }
    const std::string seg = segment_path(tmp.path(), 1);
    const std::uint64_t end = std::filesystem::file_size(seg);
    auto bytes = test::slurp(seg);
    SECTION("random bytes") {
        auto junk = test::random_bytes(rng, 5000);
        bytes.insert(bytes.end(), junk.begin(), junk.end());
    }
    SECTION("zeros") { bytes.resize(bytes.size() + 8192, 0); }
    SECTION("a header whose payload never arrived") {
        std::vector<char> hdr(recs[0].data.size() + SegmentStore::kHeaderBytes);
        std::copy_n(test::slurp(seg).begin(), hdr.size(), hdr.begin());
        bytes.insert(bytes.end(), hdr.begin(), hdr.begin() + SegmentStore::kHeaderBytes + 3);
    }
    test::spit(seg, bytes);

    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    require_all(*s, recs);
    Rec r;
    REQUIRE_OK(append(*s, 99, test::random_bytes(rng, 50), &r));
    REQUIRE(r.loc.segment == 1);
    REQUIRE(r.loc.offset == end + SegmentStore::kHeaderBytes);
    REQUIRE_OK(s->sync());
    REQUIRE(std::filesystem::file_size(seg) == end + SegmentStore::kHeaderBytes + 50);
    require_all(*s, recs);
    REQUIRE_OK(read_back(*s, r));
}

TEST_CASE("segment store: read-only open changes nothing", "[segment]") {
    TempDir tmp;
    SegmentStoreOptions ro = small_options(4096, 1024);
    ro.read_only = true;
    std::unique_ptr<SegmentStore> s;
    REQUIRE(SegmentStore::open(Env::posix(), tmp / "missing", ro, &s).err() == ENOENT);
    REQUIRE(!std::filesystem::exists(tmp / "missing"));

    std::mt19937_64 rng(2);
    std::vector<Rec> recs;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(4096, 1024), &s));
    for (ChunkId id = 1; id <= 10; ++id) {
        Rec r;
        REQUIRE_OK(append(*s, id, test::random_bytes(rng, 1000), &r));
        recs.push_back(std::move(r));
    }
    REQUIRE_OK(s->sync());
    s.reset();
    // A torn tail stays where it is.
    const std::string last = segment_path(tmp.path(), recs.back().loc.segment);
    const auto torn_size = std::filesystem::file_size(last) - 7;
    std::filesystem::resize_file(last, torn_size);

    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), ro, &s));
    REQUIRE(std::filesystem::file_size(last) == torn_size);
    recs.pop_back();
    require_all(*s, recs);
    std::vector<std::pair<SegmentId, std::uint64_t>> list;
    REQUIRE_OK(s->list_segments(&list));
    REQUIRE(list.size() == 3);  // four 1 KiB records fill a 4 KiB segment
    ChunkLocation loc;
    REQUIRE(s->append(99, "x", 1, &loc).err() == EROFS);
    REQUIRE(s->flush().err() == EROFS);
    REQUIRE(s->remove(1).err() == EROFS);
    REQUIRE_OK(s->sync());
    // The last segment holds one intact record, then the torn one.
    REQUIRE(recs.back().loc.segment == 3);
    int n = 0;
    REQUIRE_OK(s->scan(3, true, [&](const SegmentRecord& rec) {
        REQUIRE(rec.payload_ok);
        REQUIRE(rec.chunk == recs.back().id);
        ++n;
        return true;
    }));
    REQUIRE(n == 1);
}

// ------------------------------------------------------------ corruption

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

TEST_CASE("segment store: a location that does not match the record is EIO", "[segment]") {
    TempDir tmp;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(1 << 20, 1 << 16), &s));
    std::mt19937_64 rng(6);
    Rec a, b;
    REQUIRE_OK(append(*s, 7, test::random_bytes(rng, 1000), &a));
    REQUIRE_OK(append(*s, 8, test::random_bytes(rng, 1000), &b));
    std::vector<char> out(4000);
    auto check = [&](const char* what) {
        INFO(what);
        // Wrong chunk id, wrong length, offset inside a record, another segment.
        Status st = s->read(a.loc, 8, out.data());
        REQUIRE(st.err() == EIO);
        REQUIRE(st.message().find("expected chunk 8") != std::string::npos);
        ChunkLocation l = a.loc;
        l.length = 999;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = a.loc;
        l.offset += 100;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = a.loc;
        l.offset = 3;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = b.loc;
        l.offset += 5000;  // past the end
        REQUIRE(s->read(l, 8, out.data()).err() == EIO);
        l = a.loc;
        l.segment = 9;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        REQUIRE_OK(read_back(*s, a));
        REQUIRE_OK(read_back(*s, b));
    };
    check("in the write buffer");
    REQUIRE_OK(s->flush());
    check("in the file");
}

TEST_CASE("segment store: damage in the middle of the newest segment is kept", "[segment]") {
    TempDir tmp;
    const auto opts = small_options(1 << 20, 4096);
    std::mt19937_64 rng(8);
    std::vector<Rec> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
        for (ChunkId id = 1; id <= 20; ++id) {
            Rec r;
            REQUIRE_OK(append(*s, id, test::random_bytes(rng, 100 + rng() % 1000), &r));
            recs.push_back(std::move(r));
        }
        REQUIRE_OK(s->sync());
    }
    const std::string seg = segment_path(tmp.path(), 1);
    const auto size_before = std::filesystem::file_size(seg);
    const Rec victim = recs[10];
    SegmentId expect_active = 1;
    SECTION("a bad header breaks the chain: start a new segment") {
        flip_byte(seg, header_offset(victim) + 5);
        expect_active = 2;
    }
    SECTION("a bad payload keeps the chain: append after the last record") {
        flip_byte(seg, victim.loc.offset);
        expect_active = 1;
    }
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    REQUIRE(std::filesystem::file_size(seg) == size_before);  // nothing was cut
    REQUIRE(s->active_segment() == expect_active);
    REQUIRE(read_back(*s, victim).err() == EIO);
    for (const Rec& r : recs) {
        if (r.id != victim.id) REQUIRE_OK(read_back(*s, r));
    }
    Rec r;
    REQUIRE_OK(append(*s, 50, test::random_bytes(rng, 100), &r));
    REQUIRE(r.loc.segment == expect_active);
    REQUIRE_OK(s->sync());
    s.reset();
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    REQUIRE_OK(read_back(*s, r));
    REQUIRE_OK(read_back(*s, recs.back()));
}

// ------------------------------------------------------------ scan, list, remove

TEST_CASE("segment store: scan walks records, including buffered ones", "[segment]") {
    TempDir tmp;
    const auto opts = small_options(8 << 10, 2048);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), opts, &s));
    std::mt19937_64 rng(9);
    std::vector<Rec> recs;
    for (ChunkId id = 1; id <= 30; ++id) {
        Rec r;
        REQUIRE_OK(append(*s, id, test::random_bytes(rng, 100 + rng() % 900), &r));
        recs.push_back(std::move(r));
    }
    auto scan_all = [&](SegmentId seg, bool verify) {
        std::vector<SegmentRecord> out;
        REQUIRE_OK(s->scan(seg, verify, [&](const SegmentRecord& rec) {
            out.push_back(rec);
            return true;
        }));
        return out;
    };
    std::size_t seen = 0;
    for (SegmentId seg = 1; seg <= s->active_segment(); ++seg) {
        for (const SegmentRecord& rec : scan_all(seg, true)) {
            REQUIRE(seen < recs.size());
            REQUIRE(rec.chunk == recs[seen].id);
            REQUIRE(rec.location == recs[seen].loc);
            REQUIRE(rec.header_offset == header_offset(recs[seen]));
            REQUIRE(rec.payload_ok);
            ++seen;
        }
    }
    REQUIRE(seen == recs.size());  // the last ones were still in the buffer

    // A stop request is honoured.
    int calls = 0;
    REQUIRE_OK(s->scan(1, false, [&](const SegmentRecord&) { return ++calls < 2; }));
    REQUIRE(calls == 2);

    // A bad payload is reported and the scan goes on; a bad header ends it.
    REQUIRE_OK(s->sync());
    const std::string seg1 = segment_path(tmp.path(), 1);
    std::vector<Rec> in1;
    for (const Rec& r : recs) {
        if (r.loc.segment == 1) in1.push_back(r);
    }
    REQUIRE(in1.size() >= 4);
    flip_byte(seg1, in1[1].loc.offset + 3);
    auto got = scan_all(1, true);
    REQUIRE(got.size() == in1.size());
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i].payload_ok == (i != 1));
    flip_byte(seg1, header_offset(in1[2]) + 1);
    REQUIRE(scan_all(1, false).size() == 2);
}

TEST_CASE("segment store: list_segments, disk_bytes and remove", "[segment]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    const auto opts = small_options(16 << 10, 4096);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
    std::mt19937_64 rng(10);
    std::vector<Rec> recs;
    for (ChunkId id = 1; s->active_segment() < 5; ++id) {
        Rec r;
        REQUIRE_OK(append(*s, id, test::random_bytes(rng, 500 + rng() % 3000), &r));
        recs.push_back(std::move(r));
    }
    auto on_disk = [&] {
        std::uint64_t total = 0;
        for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
            total += e.file_size();
        }
        return total;
    };
    std::vector<std::pair<SegmentId, std::uint64_t>> list;
    REQUIRE_OK(s->list_segments(&list));
    REQUIRE(list.size() == 5);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
        REQUIRE(list[i].first == i + 1);
        if (list[i].first != s->active_segment()) {
            REQUIRE(list[i].second ==
                    std::filesystem::file_size(segment_path(tmp.path(), list[i].first)));
        }
        sum += list[i].second;
    }
    REQUIRE(s->disk_bytes() == sum);
    REQUIRE_OK(s->flush());
    REQUIRE(s->disk_bytes() == on_disk());
    REQUIRE_OK(s->sync());

    Status st = s->remove(s->active_segment());
    REQUIRE(st.err() == EBUSY);
    REQUIRE(std::filesystem::exists(segment_path(tmp.path(), 5)));

    const std::uint64_t seg2 = std::filesystem::file_size(segment_path(tmp.path(), 2));
    REQUIRE_OK(s->remove(2));
    REQUIRE(!std::filesystem::exists(segment_path(tmp.path(), 2)));
    REQUIRE(s->disk_bytes() == sum - seg2);
    REQUIRE(s->remove(2).err() == ENOENT);
    REQUIRE_OK(s->list_segments(&list));
    REQUIRE(list.size() == 4);
    for (const auto& [id, size] : list) REQUIRE(id != 2);
    for (const Rec& r : recs) {
        if (r.loc.segment == 2) {
            REQUIRE(read_back(*s, r).err() == EIO);
        } else {
            REQUIRE_OK(read_back(*s, r));
        }
    }

    // sync() makes the removal durable: it does not come back after a crash.
    REQUIRE_OK(s->sync());
    s.reset();
    REQUIRE_OK(env.drop_all_unsynced());
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
    REQUIRE_OK(s->list_segments(&list));
    REQUIRE(list.size() == 4);
    REQUIRE(s->disk_bytes() == sum - seg2);
    for (const Rec& r : recs) {
        if (r.loc.segment != 2) REQUIRE_OK(read_back(*s, r));
    }
}

// ------------------------------------------------------------ concurrency

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
