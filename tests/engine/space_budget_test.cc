// A full disk: the space budget (the reserve holds one compaction job on
// top of the metadata floor at every file system size, small file systems
// get small segments), and the background pass, which waits for space
// instead of taking the reserve, with its backlog kept and readable.
#include <cstdint>

#include "engine/space_budget.h"
#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1024 * kMiB;

// "" when equal, else the first offset where they differ.
std::string differs(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
    if (got == want) return "";
    std::size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    return "differs at " + std::to_string(i) + " (sizes " + std::to_string(got.size()) + ", " +
           std::to_string(want.size()) + ")";
}
}  // namespace

TEST_CASE("a 300 MiB file system: 4 MiB segments, a 16 MiB reserve, 8 MiB of it for metadata",
          "[engine][space]") {
    const SpaceBudget b = plan_space(300 * kMiB, 64 * kMiB, UINT64_MAX);
    CHECK(b.segment_bytes == 4 * kMiB);
    CHECK(b.reserve == 16 * kMiB);
    CHECK(b.metadata_floor == 8 * kMiB);
}

TEST_CASE("at every size the reserve above the metadata floor holds a segment's copy",
          "[engine][space]") {
    for (std::uint64_t fs = 16 * kMiB; fs <= 64 * 1024 * kGiB; fs = fs * 3 / 2) {
        INFO("file system of " << fs / kMiB << " MiB");
        const SpaceBudget b = plan_space(fs, 64 * kMiB, UINT64_MAX);
        CHECK(b.segment_bytes >= 4 * kMiB);
        CHECK(b.segment_bytes <= 64 * kMiB);
        CHECK(b.metadata_floor >= 8 * kMiB);
        CHECK(b.reserve >= b.metadata_floor + b.segment_bytes);
        CHECK(b.reserve <= std::max<std::uint64_t>(512 * kMiB, b.metadata_floor + b.segment_bytes));
        if (fs >= 4 * kGiB) CHECK(b.segment_bytes == 64 * kMiB);
    }
}

TEST_CASE("a configured segment size is never grown, a configured reserve is kept",
          "[engine][space]") {
    CHECK(plan_space(300 * kMiB, 1 * kMiB, UINT64_MAX).segment_bytes == 1 * kMiB);
    CHECK(plan_space(0, 64 * kMiB, UINT64_MAX).segment_bytes == 64 * kMiB);  // size unknown
    const SpaceBudget off = plan_space(300 * kMiB, 64 * kMiB, 0);
    CHECK(off.reserve == 0);
    CHECK(off.metadata_floor == 0);
    const SpaceBudget small = plan_space(300 * kMiB, 64 * kMiB, 10 * kMiB);
    CHECK(small.reserve == 10 * kMiB);
    CHECK(small.metadata_floor == 5 * kMiB);
}

TEST_CASE("on a full disk the pass leaves its backlog raw and readable, and goes on later",
          "[engine][space][deferred]") {
    const ChunkingParams params = ChunkingParams::cdc(2048, 8192, 32768);
    TempDir dir;
    std::mt19937_64 rng(41);
    const auto data = random_bytes(rng, 3u << 20);
    EngineOptions o = options_for(dir.store(), params);
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    o.space_reserve = 0;  // room for the raw writes
    InodeId ino = 0;
    {
        auto e = open_engine(o);
        Attr a = make_file(*e, "f");
        ino = a.ino;
        write_all(*e, ino, 0, data);
        REQUIRE(e->flush(ino).is_ok());
        REQUIRE(e->close().is_ok());
    }
    // A reserve larger than any free space: the disk is "full" for file
    // data and for the pass alike.
    o.space_reserve = UINT64_MAX - 1;
    {
        auto e = open_engine(o);
        Status st = e->run_background();
        INFO(st.to_string());
        CHECK(st.err() == ENOSPC);
        SpaceCounters c;
        REQUIRE(e->counters(&c).is_ok());
        CHECK(c.raw_bytes == data.size());
        CHECK(c.backlog_bytes == data.size());
        CHECK(differs(read_all(*e, ino), data) == "");
        std::uint8_t byte = 1;
        CHECK(e->write(ino, 0, &byte, 1).err() == ENOSPC);
        REQUIRE(e->close().is_ok());
    }
    auto problems = check_invariants(dir.store());
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
    // With space again the backlog is deduplicated as usual.
    o.space_reserve = 0;
    {
        auto e = open_engine(o);
        REQUIRE(e->run_background().is_ok());
        SpaceCounters c;
        REQUIRE(e->counters(&c).is_ok());
        CHECK(c.raw_bytes == 0);
        CHECK(c.backlog_records == 0);
        CHECK(differs(read_all(*e, ino), data) == "");
        REQUIRE(e->close().is_ok());
    }
    problems = check_invariants(dir.store());
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
}
