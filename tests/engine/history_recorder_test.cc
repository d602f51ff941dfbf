// HistoryRecorder: when the control loop's samples become a history record.
#include "engine/history_recorder.h"

#include <catch2/catch.hpp>
#include <cstdint>

using namespace hiodsfs;

TEST_CASE("history: a sample every 10 s while active, one a minute when idle", "[history]") {
    HistoryRecorder rec;
    SpaceCounters c;
    c.logical_bytes = 7;
    HistoryEntry e;
    const std::uint64_t s = 1'000'000'000;
    std::uint64_t wall = 1000 * s, mono = 0;
    auto tick = [&](std::uint64_t ops, std::uint64_t bytes) {
        IntervalSample is;
        is.start_ns = mono;
        mono += s;
        wall += s;
        is.end_ns = mono;
        is.ops = ops;
        is.bytes = bytes;
        return rec.tick(is, wall, WriteMode::kDeferred, c, &e);
    };
    int due = 0;
    for (int i = 0; i < 30; ++i) due += tick(100, 1 << 20) ? 1 : 0;
    CHECK(due == 3);
    CHECK(e.r.ops_per_s == Approx(100));
    CHECK(e.r.bytes_per_s == Approx(1 << 20));
    CHECK(e.r.mode == 1);
    CHECK(e.r.logical_bytes == 7);
    due = 0;
    for (int i = 0; i < 180; ++i) due += tick(0, 0) ? 1 : 0;
    CHECK(due == 3);
    CHECK(e.r.ops_per_s == 0);
}
