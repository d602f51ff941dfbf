// The activity history (meta/history.h): samples stored in LMDB, read back
// oldest first and per UTC day, pruned past the retention. (The recorder's
// pace is tested in tests/engine/history_recorder_test.cc.)
#include "meta/history.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "hiodsfs/engine.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

TEST_CASE("history: samples are stored, read back oldest first, summarised per day and pruned",
          "[meta][history]") {
    test::MetaTempDir d;
    std::unique_ptr<MetaStore> meta = test::open_meta(d.meta());
    const std::uint64_t day = kNsPerDay, t0 = 20000 * day;  // some UTC midnight
    {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t));
        // Three days: samples every 6 h; logical grows by 100 per sample.
        for (int i = 0; i < 12; ++i) {
            HistoryEntry e;
            e.time_ns = t0 + static_cast<std::uint64_t>(i) * (day / 4) + 1;
            e.r.logical_bytes = 100 * static_cast<std::uint64_t>(i + 1);
            e.r.stored_bytes = 10 * static_cast<std::uint64_t>(i + 1);
            REQUIRE(append_history(*t, e));
        }
        REQUIRE(t->commit());
    }
    REQUIRE(meta->commit_group(nullptr));
    std::unique_ptr<Txn> t;
    REQUIRE(meta->begin(&t));
    std::vector<HistoryEntry> tail, daily;
    REQUIRE(read_history_tail(*t, 5, &tail));
    REQUIRE(tail.size() == 5);
    CHECK(tail.front().r.logical_bytes == 800);
    CHECK(tail.back().r.logical_bytes == 1200);
    REQUIRE(read_history_daily(*t, 31, &daily));
    REQUIRE(daily.size() == 3);  // the last sample of each day
    CHECK(daily[0].r.logical_bytes == 400);
    CHECK(daily[1].r.logical_bytes == 800);
    CHECK(daily[2].r.logical_bytes == 1200);
    REQUIRE(read_history_daily(*t, 2, &daily));
    CHECK(daily.size() == 2);
    CHECK(daily[0].r.logical_bytes == 800);
    // A sample 30 days after the second day prunes what is older than that.
    HistoryEntry late;
    late.time_ns = t0 + day + 31 * day;
    REQUIRE(append_history(*t, late, 30 * day));
    REQUIRE(read_history_tail(*t, 100, &tail));
    for (const auto& e : tail) CHECK(e.time_ns >= late.time_ns - 30 * day);
    CHECK(tail.size() == 4 + 1);  // the third day's samples (after the cut) and the new one
}
