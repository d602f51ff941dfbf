// TierCache, through SegmentStore with a SegmentTier: sealed segments uploaded in the
// background, the directory as an LRU cache in front of the tier, fetches
// on a miss, removal from both, what open does with both, uploads that
// fail, and a read-only store (fsck's) that reads the tier into memory.
// The tier is in memory here (memory_tier.h; tests/mount uses RADOS).

#include "store/tier_cache.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "hiodsfs/segment_store.h"
#include "hiodsfs/segment_tier.h"
#include "memory_tier.h"
#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::MemoryTier;
using test::segment_path;
using test::TempDir;

constexpr std::uint64_t kSegment = 64 << 10;
constexpr std::size_t kRecord = 10 << 10;  // six records to a segment

SegmentStoreOptions tiered(MemoryTier* tier, std::uint64_t cache_bytes) {
    SegmentStoreOptions o;
    o.max_segment_bytes = kSegment;
    o.write_buffer_bytes = 16 << 10;
    o.tier = tier;
    o.cache_bytes = cache_bytes;
    o.fetch_piece_bytes = 4096;  // a fetch in sixteen pieces
    return o;
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

struct Written {
    ChunkId id;
    ChunkLocation loc;
    std::vector<char> data;
};

std::vector<Written> write_records(SegmentStore& s, int n, std::uint64_t seed, ChunkId first = 1) {
    std::mt19937_64 rng(seed);
    std::vector<Written> out;
    for (int i = 0; i < n; ++i) {
        Written w{first + static_cast<ChunkId>(i), {}, test::random_bytes(rng, kRecord)};
        REQUIRE_OK(s.append(w.id, w.data.data(), static_cast<std::uint32_t>(w.data.size()), &w.loc));
        out.push_back(std::move(w));
    }
    REQUIRE_OK(s.sync());
    return out;
}

void require_reads(SegmentStore& s, const std::vector<Written>& recs) {
    for (const Written& w : recs) {
        std::vector<char> got(w.loc.length);
        INFO("chunk " << w.id << " in segment " << w.loc.segment);
        REQUIRE_OK(s.read(w.loc, w.id, got.data()));
        REQUIRE(got == w.data);
    }
}

SegmentTierStats stats_of(SegmentStore& s) {
    SegmentTierStats st;
    REQUIRE(s.tier_stats(&st));
    return st;
}

// Polls until the uploader has nothing queued and the directory fits (or
// the deadline passes); the stats as they are then.
SegmentTierStats settle(SegmentStore& s, std::uint64_t active_bytes_hint = 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    SegmentTierStats st = stats_of(s);
    while (std::chrono::steady_clock::now() < deadline) {
        st = stats_of(s);
        if (st.pending_uploads == 0 && st.cached_bytes + active_bytes_hint <= st.cache_limit + kSegment) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return st;
}

TEST_CASE("tier: sealed segments are uploaded, evicted past the cache size, and fetched back on a read",
          "[tier]") {
    TempDir dir;
    MemoryTier tier;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 2 * kSegment), &s));
    const std::vector<Written> recs = write_records(*s, 40, 1);  // about seven segments
    REQUIRE(s->active_segment() >= 7);
    SegmentTierStats st = settle(*s);
    REQUIRE(st.pending_uploads == 0);
    REQUIRE(st.upload_failures == 0);
    REQUIRE(st.tier_segments == s->active_segment() - 1);
    for (SegmentId id = 1; id < s->active_segment(); ++id) REQUIRE(tier.holds(id));
    REQUIRE_FALSE(tier.holds(s->active_segment()));  // never the active segment
    // Down to the limit, the active segment included (the one read or
    // sealed last may stay beyond it).
    REQUIRE(s->disk_bytes() <= 3 * kSegment);
    REQUIRE(st.evictions >= 4);
    REQUIRE_FALSE(file_exists(segment_path(dir.path(), 1)));

    // Reads of evicted segments fetch them, in pieces; every byte comes back.
    const int range_gets = tier.range_gets;
    require_reads(*s, recs);
    st = stats_of(*s);
    CHECK(tier.range_gets - range_gets >= 4 * static_cast<int>(kSegment / 4096));
    REQUIRE(st.cache_misses >= 4);
    REQUIRE(st.fetched_bytes >= 4 * (kSegment - kRecord));
    REQUIRE(st.cache_hits > 0);
    // Segment 1 again: fetched once, then a hit, since the segment read
    // last stays however small the cache.
    require_reads(*s, {recs.front()});
    const std::uint64_t misses = stats_of(*s).cache_misses;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the uploader's eviction pass
    require_reads(*s, {recs.front(), recs[1]});
    REQUIRE(stats_of(*s).cache_misses == misses);
}

TEST_CASE("tier: a failed upload keeps the local copy, is retried, and the store reopens with it",
          "[tier]") {
    TempDir dir;
    MemoryTier tier;
    tier.set_failing(ETIMEDOUT);
    std::vector<Written> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1), &s));
        recs = write_records(*s, 20, 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        SegmentTierStats st = stats_of(*s);
        REQUIRE(st.upload_failures >= 1);
        REQUIRE(st.upload_error.find("put refused") != std::string::npos);
        REQUIRE(st.pending_uploads == s->active_segment() - 1);
        REQUIRE(st.evictions == 0);  // nothing not uploaded is ever evicted
        for (SegmentId id = 1; id < s->active_segment(); ++id)
            REQUIRE(file_exists(segment_path(dir.path(), id)));
        require_reads(*s, recs);
        // Closing cannot upload them either: it says so, and they stay.
        Status closing = s->finish_uploads();
        REQUIRE(closing.err() == ETIMEDOUT);
        REQUIRE(closing.message().find("to be uploaded at the next mount") != std::string::npos);
    }
    REQUIRE(tier.objects.empty());
    // The tier is back: the next open uploads what was left.
    tier.set_failing(0);
    std::unique_ptr<SegmentStore> s;
    SegmentStoreOptions o = tiered(&tier, 1);
    o.committed = SegmentPosition{1, 1};  // committed metadata exists
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
    SegmentTierStats st = settle(*s);
    REQUIRE(st.pending_uploads == 0);
    REQUIRE(tier.objects.size() >= 3);
    REQUIRE(st.evictions >= 2);
    require_reads(*s, recs);

    SECTION("and the uploader retries while mounted once the tier takes puts again") {
        tier.set_failing(EIO);
        const std::vector<Written> more = write_records(*s, 12, 3, 1000);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        REQUIRE(stats_of(*s).pending_uploads >= 1);
        tier.set_failing(0);
        st = settle(*s);  // the retry comes within its back-off (1 s, then 2 s)
        REQUIRE(st.pending_uploads == 0);
        REQUIRE(st.upload_error.empty());
        require_reads(*s, more);
    }
}

TEST_CASE("tier: removing a segment removes it from the tier and the directory", "[tier]") {
    TempDir dir;
    MemoryTier tier;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
    write_records(*s, 20, 4);
    settle(*s);
    REQUIRE(tier.holds(1));
    REQUIRE(tier.holds(2));
    REQUIRE_OK(s->remove(1));
    REQUIRE_FALSE(tier.holds(1));
    REQUIRE_FALSE(file_exists(segment_path(dir.path(), 1)));
    REQUIRE(s->remove(s->active_segment()).err() == EBUSY);
    REQUIRE(s->remove(1).err() == ENOENT);
    // An evicted segment: only the tier has it, and it goes from there.
    REQUIRE(::unlink(segment_path(dir.path(), 2).c_str()) == 0);
    REQUIRE_OK(s->remove(2));
    REQUIRE_FALSE(tier.holds(2));
    std::vector<std::pair<SegmentId, std::uint64_t>> listed;
    REQUIRE_OK(s->list_segments(&listed));
    for (const auto& [id, size] : listed) REQUIRE(id > 2);
}

TEST_CASE("tier: open appends after the tier's newest segment, takes the tier's copy over a stale "
          "one, and refuses a directory without metadata for the tier's segments",
          "[tier]") {
    TempDir dir;
    MemoryTier tier;
    std::vector<Written> recs;
    SegmentId active = 0;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
        recs = write_records(*s, 20, 5);
        REQUIRE_OK(s->seal());
        active = s->active_segment();
        REQUIRE_OK(s->finish_uploads());
    }
    REQUIRE(tier.holds(active - 1));
    // A cached copy cut short (a crash while it was being replaced, say).
    REQUIRE(::truncate(segment_path(dir.path(), 1).c_str(), 100) == 0);
    // And the empty active segment gone with the rest of the cache.
    REQUIRE(::unlink(segment_path(dir.path(), active).c_str()) == 0);

    SegmentStoreOptions o = tiered(&tier, 1 << 30);
    o.committed = SegmentPosition{active - 1, 1};
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
    REQUIRE(s->active_segment() == active);  // after the tier's newest
    require_reads(*s, recs);                 // segment 1 fetched again, whole
    REQUIRE(stats_of(*s).cache_misses >= 1);
    s.reset();

    // Metadata that knows no segment, over a tier that holds some: refused.
    TempDir other;
    std::unique_ptr<SegmentStore> fresh;
    Status st = SegmentStore::open(Env::posix(), other.path(), tiered(&tier, 1 << 30), &fresh);
    REQUIRE(st.err() == EEXIST);
    REQUIRE(st.message().find("memory tier already holds") != std::string::npos);
}

TEST_CASE("tier: an upload cut short by a crash is completed at the next open, over the longer local copy",
          "[tier]") {
    TempDir dir, other;
    MemoryTier tier;
    SegmentStoreOptions o = tiered(&tier, 1 << 30);
    o.upload_piece_bytes = 4096;  // a segment goes in sixteen pieces
    std::vector<Written> recs;
    SegmentPosition pos;
    std::atomic<int> pieces{0};
    // The cluster goes away after three pieces of the first upload.
    tier.before_range = [&](SegmentId) {
        if (++pieces == 4) tier.set_failing(EIO);
    };
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
        recs = write_records(*s, 20, 5);
        REQUIRE_OK(s->sync(&pos));
        REQUIRE(pos.segment >= 3);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (stats_of(*s).upload_failures == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        REQUIRE(stats_of(*s).upload_failures > 0);
    }  // a crash: nothing more is uploaded
    tier.before_range = nullptr;
    tier.set_failing(0);
    std::uint64_t partial = 0;
    {
        std::lock_guard lock(tier.mu);
        REQUIRE(tier.objects.count(1) == 1);
        partial = tier.objects[1].size();
    }
    REQUIRE(partial == 3 * 4096);
    REQUIRE(file_exists(segment_path(dir.path(), 1)));

    // The local copy is longer: it stays the segment, and goes up again.
    o.committed = pos;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
        REQUIRE(file_exists(segment_path(dir.path(), 1)));
        require_reads(*s, recs);
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
        for (SegmentId id = 1; id < pos.segment; ++id) {
            INFO("segment " << id);
            std::ifstream in(segment_path(dir.path(), id), std::ios::binary);
            const std::vector<char> local((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            std::lock_guard lock(tier.mu);
            CHECK(tier.objects[id] == local);
        }
    }
    // From the tier alone, every record.
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), other.path(), o, &s));
    require_reads(*s, recs);
}

TEST_CASE("tier: a read-only store that reads the tier into memory leaves its directory as it was",
          "[tier]") {
    TempDir dir;
    MemoryTier tier;
    std::vector<Written> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
        recs = write_records(*s, 20, 7);  // four segments
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
    }
    REQUIRE(tier.holds(3));
    // Segment 1 cached, segment 2 a stale short copy, the rest in the tier only.
    REQUIRE(::truncate(segment_path(dir.path(), 2).c_str(), 100) == 0);
    REQUIRE(::unlink(segment_path(dir.path(), 3).c_str()) == 0);
    std::vector<std::string> before;
    REQUIRE_OK(Env::posix()->list_dir(dir.path(), &before));

    SegmentStoreOptions o = tiered(&tier, 1);
    o.read_only = true;
    o.tier_reads_in_memory = true;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
    CHECK(s->in_directory(1));
    CHECK_FALSE(s->in_directory(2));  // the tier's copy is the segment
    CHECK_FALSE(s->in_directory(3));
    require_reads(*s, recs);
    std::size_t scanned = 0;
    REQUIRE_OK(s->scan(3, true, [&](const SegmentRecord& r) {
        scanned += r.payload_ok ? 1 : 0;
        return true;
    }));
    CHECK(scanned == 6);
    // Segments 2 and 3 read from the tier once each (the reads went in
    // order; the scan found 3 still held, 4 having been read from its file).
    CHECK(stats_of(*s).cache_misses == 2);
    std::vector<std::string> after;
    REQUIRE_OK(Env::posix()->list_dir(dir.path(), &after));
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    CHECK(after == before);
    std::uint64_t stale = 0;
    std::unique_ptr<File> f;
    REQUIRE_OK(Env::posix()->open(segment_path(dir.path(), 2), OpenMode::kRead, &f));
    REQUIRE_OK(f->size(&stale));
    CHECK(stale == 100);
}

TEST_CASE("tier: a fetch that fails is an error of the read, not damage; a segment gone from the "
          "tier is",
          "[tier]") {
    TempDir dir;
    MemoryTier tier;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1), &s));
    const std::vector<Written> recs = write_records(*s, 20, 6);
    settle(*s);
    REQUIRE_FALSE(file_exists(segment_path(dir.path(), 1)));
    std::vector<char> got(kRecord);
    bool damaged = true;
    tier.set_failing(ETIMEDOUT);
    Status st = s->read(recs.front().loc, recs.front().id, got.data(), &damaged);
    REQUIRE(st.err() == EIO);
    REQUIRE(st.message().find("get refused") != std::string::npos);
    REQUIRE_FALSE(damaged);
    tier.set_failing(0);
    {
        std::lock_guard lock(tier.mu);
        tier.objects.erase(1);
    }
    st = s->read(recs.front().loc, recs.front().id, got.data(), &damaged);
    REQUIRE(st.err() == EIO);
    REQUIRE(damaged);
}

TEST_CASE("tier: push_to_tier writes a commit's synced bytes by range, and a directory without them "
          "reads them from the tier",
          "[tier][journal]") {
    TempDir dir, other;
    MemoryTier tier;
    std::vector<Written> recs;
    SegmentPosition pos;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
        recs = write_records(*s, 3, 6);
        REQUIRE_OK(s->sync(&pos));
        REQUIRE(pos.segment == 1);
        REQUIRE_OK(s->push_to_tier(pos));
        REQUIRE(tier.holds(1));
        CHECK(tier.objects[1].size() == pos.offset);
        CHECK(tier.ranges == 1);
        // Again: nothing new to write.
        REQUIRE_OK(s->push_to_tier(pos));
        CHECK(tier.ranges == 1);
        // More records: only the new bytes go, after the others.
        const std::vector<Written> more = write_records(*s, 2, 7, 10);
        recs.insert(recs.end(), more.begin(), more.end());
        REQUIRE_OK(s->sync(&pos));
        REQUIRE_OK(s->push_to_tier(pos));
        CHECK(tier.ranges == 2);
        std::vector<char> local(pos.offset);
        FILE* f = std::fopen(segment_path(dir.path(), 1).c_str(), "rb");
        REQUIRE(f != nullptr);
        REQUIRE(std::fread(local.data(), 1, local.size(), f) == local.size());
        std::fclose(f);
        CHECK(tier.objects[1] == local);
        // Not yet a sealed segment of the tier: the stats count none.
        CHECK(stats_of(*s).tier_segments == 0);
        // Sealed and uploaded: only the bytes not pushed yet go, by range.
        const std::vector<Written> last = write_records(*s, 1, 8, 20);
        recs.insert(recs.end(), last.begin(), last.end());
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
        CHECK(tier.puts == 0);
        CHECK(tier.ranges == 3);
        std::uint64_t size = 0;
        {
            std::lock_guard lock(tier.mu);
            size = tier.objects[1].size();
        }
        CHECK(size == pos.offset + SegmentStore::kHeaderBytes + kRecord);
        CHECK(stats_of(*s).tier_segments == 1);
    }
    // Another directory (the first one lost), with the frontier of that push.
    SegmentStoreOptions o = tiered(&tier, 1 << 30);
    o.committed = pos;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), other.path(), o, &s));
    require_reads(*s, recs);
    CHECK(s->active_segment() == 2);  // the tier's segment never changes again
}

// A commit's push lists the segments not yet in the tier, then reads each
// from the directory. The uploader may meanwhile put one whole and, with a
// small cache, evict it: the push must take that segment as done, not fail
// the commit with ENOENT (found by scripts/bench with cache_size=1M: an
// fsync failed "No such file or directory").
TEST_CASE("tier: a segment uploaded and evicted while a commit pushes is done, not an error",
          "[tier][journal]") {
    TempDir dir;
    MemoryTier tier;
    std::mutex mu;
    std::condition_variable cv;
    bool release_uploads = false;
    tier.before_put = [&](SegmentId) {
        std::unique_lock lock(mu);
        cv.wait_for(lock, std::chrono::seconds(10), [&] { return release_uploads; });
    };
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1), &s));
    // Segments 1-3 sealed (the uploader held in its put of 1), 4 active.
    // With a cache of one byte every uploaded one but the newest goes.
    write_records(*s, 20, 9);
    SegmentPosition pos;
    REQUIRE_OK(s->sync(&pos));
    REQUIRE(pos.segment == 4);
    bool waited = false;
    tier.before_range = [&](SegmentId id) {
        if (id != 1 || waited) return;
        waited = true;
        {
            std::lock_guard lock(mu);
            release_uploads = true;
        }
        cv.notify_all();
        // Until the uploader has put segments 2 and 3 whole and evicted 2.
        for (int i = 0; i < 1000 && file_exists(segment_path(dir.path(), 2)); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    };
    const Status pushed = s->push_to_tier(pos);
    INFO(pushed.to_string());
    REQUIRE(waited);
    CHECK_FALSE(file_exists(segment_path(dir.path(), 2)));
    CHECK(pushed.is_ok());
    REQUIRE_OK(s->finish_uploads());
    for (SegmentId id : {1u, 2u, 3u}) CHECK(tier.holds(id));
}

}  // namespace
}  // namespace hiodsfs

namespace hiodsfs {
namespace {

TEST_CASE("tier: a holder makes segment ids from its first one on, each reserved first; a "
          "fenced one cannot",
          "[tier][takeover]") {
    TempDir dir, other;
    MemoryTier tier;
    std::unique_ptr<MemoryTier> second = tier.take_over();
    std::unique_ptr<MemoryTier> third =
        second->take_over();  // nothing reserved yet: third's start at 1 too
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(third.get(), 1 << 30), &s));
        write_records(*s, 20, 7);  // past three segments
        CHECK(s->active_segment() >= 4);
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
    }
    // The next holder starts past every id the last one reserved (the ones
    // it made here), whatever the pool holds.
    std::unique_ptr<MemoryTier> fourth = third->take_over();
    const SegmentId first = fourth->first_new_segment();
    CHECK(first > 4);
    {
        SegmentStoreOptions o = tiered(fourth.get(), 1 << 30);
        o.committed = SegmentPosition{1, 1};
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), other.path(), o, &s));
        CHECK(s->active_segment() == first);
    }
    // The holder before it, fenced now, cannot make a segment: its appends
    // fail once the active one is full.
    std::unique_ptr<SegmentStore> stale;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(third.get(), 1 << 30), &stale));
    std::mt19937_64 rng(8);
    const std::vector<char> data = test::random_bytes(rng, kRecord);
    Status st;
    for (int i = 0; i < 20 && st; ++i) {
        ChunkLocation loc;
        st = stale->append(100 + static_cast<ChunkId>(i), data.data(),
                           static_cast<std::uint32_t>(data.size()), &loc);
    }
    INFO(st.to_string());
    CHECK(st.err() == ESHUTDOWN);
}

TEST_CASE("tier: at open, a local segment the tier lacks is dropped when no live chunk is in "
          "it, uploaded again (and said) when one is",
    "[tier][takeover]") {
    TempDir dir;
    MemoryTier tier;
    std::vector<Written> recs;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
        recs = write_records(*s, 20, 9);
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
    }
    REQUIRE(tier.holds(1));
    REQUIRE(tier.holds(2));
    tier.objects.erase(1);  // removed by hand; the cache directory has it
    tier.objects.erase(2);  // and one whose chunks are all dead
    std::vector<std::string> log;
    SegmentStoreOptions o = tiered(&tier, 1 << 30);
    o.committed = SegmentPosition{4, 0};
    o.has_live_chunks = [](SegmentId id) { return id == 1 || id == 3 || id == 4; };
    o.log = [&log](const std::string& line) { log.push_back(line); };
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
    CHECK_FALSE(file_exists(segment_path(dir.path(), 2)));
    REQUIRE(log.size() == 1);
    CHECK(log.front() ==
          "hiodsfs: segment 1 holds bytes the metadata refers to, but memory tier has no object of "
          "it: "
          "uploading it again from " +
              dir.path());
    settle(*s);
    CHECK(tier.holds(1));
    CHECK_FALSE(tier.holds(2));
}

TEST_CASE("tier: after another holder's records, the tier's copy of a segment at or past the "
          "directory's frontier wins over a longer local one; before it the longer local copy "
          "stays",
    "[tier][takeover]") {
    TempDir dir;
    MemoryTier tier;
    {
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), tiered(&tier, 1 << 30), &s));
        write_records(*s, 20, 11);
        REQUIRE_OK(s->seal());
        REQUIRE_OK(s->finish_uploads());
    }
    // The pool's copies of segments 1 and 3 are shorter than the files (an
    // upload cut short, or another writer's segment of that id).
    const std::vector<char> pool3(tier.objects.at(3).begin(), tier.objects.at(3).begin() + 100);
    tier.objects.at(1).resize(100);
    tier.objects.at(3) = pool3;
    SegmentStoreOptions o = tiered(&tier, 1 << 30);
    o.committed = SegmentPosition{4, 0};
    o.tier_wins_from = SegmentPosition{3, 50};
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), o, &s));
    CHECK(file_exists(
        segment_path(dir.path(), 1)));  // before it: the local copy is the segment, sent again
    CHECK_FALSE(file_exists(segment_path(dir.path(), 3)));
    settle(*s);
    CHECK(tier.objects.at(1).size() > 100);
    CHECK(tier.objects.at(3) == pool3);  // never written over
}

}  // namespace
}  // namespace hiodsfs
