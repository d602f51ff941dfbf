// The mode policies (src/control/mode_policy.cc) on their own, interval by
// interval; tests/control/mode_controller_test.cc runs them inside the
// controller against load traces.
#include <catch2/catch.hpp>
#include <string>

#include "control/mode_policy.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;
using test::kMs;

namespace {

// A one-second interval ending at end_ms: ops requests, `stressed` of them
// in stress, the last arriving 1 ms before its end.
IntervalSample interval(std::uint64_t end_ms, std::uint64_t ops, std::uint64_t stressed) {
    IntervalSample s;
    s.start_ns = (end_ms - 1000) * kMs;
    s.end_ns = end_ms * kMs;
    s.ops = s.arrivals = ops;
    s.bytes = ops * 4096;
    s.stressed = stressed;
    s.last_arrival_ns = ops != 0 ? s.end_ns - kMs : 0;
    return s;
}

}  // namespace

TEST_CASE("policy: make_policy knows both policies and names the unknown one") {
    ControlConfig cfg;
    std::string error;
    for (const std::string& name : policy_names()) {
        auto p = make_policy(name, cfg, &error);
        REQUIRE(p != nullptr);
        CHECK(name == p->name());
    }
    CHECK(make_policy(kDefaultPolicy, cfg, &error) != nullptr);
    CHECK(make_policy("pid", cfg, &error) == nullptr);
    CHECK(error == "unknown mode policy 'pid' (known: capacity, hiods)");
}

TEST_CASE("policy: hiods defers after switch_after stressed intervals with the goal missed, and returns after as many calm ones") {
    ControlConfig cfg;
    cfg.target_ops = 1000;
    cfg.switch_after = 3;
    std::string error, reason;
    auto p = make_policy("hiods", cfg, &error);
    REQUIRE(p != nullptr);

    WriteMode mode = WriteMode::kInline;
    std::uint64_t t = 1000;
    // Stressed and below the goal: deferred on the third interval, not before.
    for (int i = 1; i <= 3; ++i) {
        reason.clear();
        mode = p->decide(interval(t += 1000, 500, 500), mode, &reason);
        INFO("interval " << i);
        CHECK(mode == (i < 3 ? WriteMode::kInline : WriteMode::kDeferred));
        CHECK(reason.empty() == (i < 3));
    }
    CHECK(reason.find("goal missed") != std::string::npos);
    CHECK(reason.find("500 ops/s against 1000") != std::string::npos);

    // Two calm intervals, then a stressed one: the run of calm ones restarts.
    mode = p->decide(interval(t += 1000, 500, 0), mode, &reason);
    mode = p->decide(interval(t += 1000, 500, 0), mode, &reason);
    mode = p->decide(interval(t += 1000, 500, 500), mode, &reason);
    CHECK(mode == WriteMode::kDeferred);
    for (int i = 1; i <= 3; ++i) mode = p->decide(interval(t += 1000, 500, 0), mode, &reason);
    CHECK(mode == WriteMode::kInline);
    CHECK(reason.find("not under stress for 3 intervals") != std::string::npos);

    // Stress with the goal met is no reason to defer.
    for (int i = 1; i <= 5; ++i) mode = p->decide(interval(t += 1000, 2000, 2000), mode, &reason);
    CHECK(mode == WriteMode::kInline);
}

TEST_CASE("policy: a mode changed from outside restarts the policy's counts") {
    ControlConfig cfg;
    cfg.target_ops = 1000;
    cfg.switch_after = 2;
    std::string error;
    auto p = make_policy("hiods", cfg, &error);
    REQUIRE(p != nullptr);
    std::uint64_t t = 1000;
    CHECK(p->decide(interval(t += 1000, 500, 500), WriteMode::kInline, nullptr) == WriteMode::kInline);
    // Someone set deferred and back: the one stressed interval counted before is forgotten.
    CHECK(p->decide(interval(t += 1000, 500, 0), WriteMode::kDeferred, nullptr) == WriteMode::kDeferred);
    CHECK(p->decide(interval(t += 1000, 500, 500), WriteMode::kInline, nullptr) == WriteMode::kInline);
    CHECK(p->decide(interval(t += 1000, 500, 500), WriteMode::kInline, nullptr) == WriteMode::kDeferred);
}
