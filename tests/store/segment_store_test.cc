// SegmentStore: round trips across segments, the write buffer and a
// reopen, record sizes, a read-only open, and listing and removing
// segments. The parts have their own tests: appender_test (syncs, faults,
// power loss), segment_reader_test, segment_scan_test, segment_format_test
// and tier_cache_test.

#include "hiodsfs/segment_store.h"

#include "chunk/fingerprint.h"
#include "segment_test_util.h"
#include "store/fault_env.h"

namespace hiodsfs {
namespace {

using namespace test;

// ------------------------------------------------------------ basics

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
        REQUIRE_OK(s->append(1, good.data(), 5000, crc32c(good.data(), good.size()), false, &given.loc));
        // A checksum that is not the payload's: the record must not read.
        wrong.id = 2;
        wrong.data = bad;
        REQUIRE_OK(s->append(2, bad.data(), 5000, crc32c(good.data(), good.size()), false, &wrong.loc));
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

// ------------------------------------------------------------ list, remove

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

}  // namespace
}  // namespace hiodsfs
