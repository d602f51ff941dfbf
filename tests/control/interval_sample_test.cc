// IntervalSample (src/control/interval_sample.cc): an interval's rates and
// shares, and the stress, idle and goal tests the policies and the throttle
// share.
#include <catch2/catch.hpp>
#include <string>

#include "control/interval_sample.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;
using test::kMs;

TEST_CASE("sample: rates, stress fraction and the stress and idle tests") {
    IntervalSample s;
    CHECK(s.ops_per_s() == 0);  // zero-length interval
    CHECK(s.stress_fraction() == 0);
    s.start_ns = 10 * kMs;
    s.end_ns = 510 * kMs;
    s.ops = 100;
    s.bytes = 100 * 4096;
    s.arrivals = 100;
    s.stressed = 95;
    s.last_arrival_ns = 500 * kMs;
    CHECK(s.seconds() == Approx(0.5));
    CHECK(s.ops_per_s() == Approx(200));
    CHECK(s.bytes_per_s() == Approx(200 * 4096));
    CHECK(s.stress_fraction() == Approx(0.95));

    ControlConfig cfg;
    CHECK(under_stress(s, cfg));
    CHECK_FALSE(foreground_idle(s, cfg));
    s.stressed = 89;
    CHECK_FALSE(under_stress(s, cfg));  // below the 90 % ratio
    s.stressed = 90;
    CHECK(under_stress(s, cfg));  // the ratio is inclusive

    // Recency: the last request must be at most recency_ms before the end.
    s.end_ns = s.last_arrival_ns + 1000 * kMs;
    CHECK(under_stress(s, cfg));
    s.end_ns = s.last_arrival_ns + 1000 * kMs + 1;
    CHECK_FALSE(under_stress(s, cfg));
    CHECK(foreground_idle(s, cfg));
    s.last_arrival_ns = 0;
    CHECK(foreground_idle(s, cfg));

    // Samples built without arrivals (e.g. by hand) use ops as the base.
    IntervalSample h;
    h.ops = 10;
    h.stressed = 20;
    CHECK(h.stress_fraction() == 1.0);

    CHECK_FALSE(has_goal(cfg));
    CHECK_FALSE(goal_missed(s, cfg));
    cfg.target_ops = 1000;
    s.start_ns = 0;
    s.end_ns = 1000 * kMs;
    s.ops = 999;
    s.bytes = 10'000'000;
    CHECK(goal_missed(s, cfg));
    s.ops = 1000;
    CHECK_FALSE(goal_missed(s, cfg));
    cfg.target_bytes_per_s = 20e6;  // either goal missed is a miss
    CHECK(goal_missed(s, cfg));
    CHECK(std::string(to_string(WriteMode::kInline)) == "inline");
    CHECK(std::string(to_string(WriteMode::kDeferred)) == "deferred");
}
