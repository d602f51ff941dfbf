// Segment scans, through SegmentStore: the tail scan at open cuts a torn
// tail or garbage after the last record and keeps damage in the middle;
// scan() walks the records, those still in the write buffer too.

#include "store/segment_scan.h"

#include "hiodsfs/segment_store.h"
#include "segment_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

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

}  // namespace
}  // namespace hiodsfs
