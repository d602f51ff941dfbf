// A full disk: the space budget (the reserve holds one compaction job on
// top of the metadata floor at every file system size, small file systems
// get small segments).
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
