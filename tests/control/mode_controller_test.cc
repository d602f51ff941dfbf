// ModeController and the mode policies, driven by a discrete-event
// simulation of a FUSE daemon under synthetic load traces (ManualClock).
//
// The simulated daemon serves one request at a time (the kernel queues the
// rest), so a request reaches the daemon at max(application arrival,
// previous completion + 20 us). Service time depends on the mode in force
// when the request starts, with +-10 % noise, and grows by bg_slowdown x
// background speed while the background pass has work. Requests written in
// deferred mode add to the backlog; each interval the background pass drains
// speed x drain_bytes_per_s of it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "control/manual_clock.h"
#include "hiodsfs/clock.h"
#include "control/mode_controller.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;

namespace {

using test::kMs;
using test::kSec;
constexpr double kSaturate = -1;  // Phase::rate: the application writes back to back

struct Phase {
    double seconds;
    double rate;  // offered ops/s; 0 = idle; kSaturate = as fast as served
};

struct Plant {
    double inline_ms = 2.0;  // about 490 ops/s when saturated
    double deferred_ms = 0.5;
    double noise = 0.1;
    double bg_slowdown = 0.5;
    double drain_bytes_per_s = 100e6;
    std::uint64_t request_bytes = 128 << 10;
    double jitter = 0.25;  // of the application's inter-arrival period
};

struct Trace {
    std::string name;
    Plant plant;
    std::vector<Phase> phases;
    double target_ops = 800;
};

struct Tick {
    IntervalSample sample;
    WriteMode mode_used;  // the mode in force during the interval
    WriteMode mode_after;
    double speed;
};

struct Result {
    std::vector<Tick> ticks;
    std::vector<ControlEvent> events;
    unsigned switches = 0;
    unsigned missed = 0;     // under stress with the goal missed (HIODS's own test)
    unsigned held_back = 0;  // below the goal and below 95 % of what the application offered
    unsigned deferred_intervals = 0;
    double max_backlog = 0, end_backlog = 0;

    // Index of the first tick whose decision was `mode`, at or after `from`.
    int first_switch_to(WriteMode mode, std::size_t from = 0) const {
        for (std::size_t i = from; i < ticks.size(); ++i) {
            if (ticks[i].mode_used != mode && ticks[i].mode_after == mode)
                return static_cast<int>(i);
        }
        return -1;
    }
};

ControlConfig config_for(const Trace& t) {
    ControlConfig cfg;
    cfg.target_ops = t.target_ops;
    return cfg;
}

// The mean rate the application offered during the sample's interval
// (infinite while it writes back to back).
double offered(const Trace& trace, const IntervalSample& s) {
    double t0 = 0, sum = 0;
    for (const Phase& ph : trace.phases) {
        const double t1 = t0 + ph.seconds * 1e9;
        const double lo = std::max(t0, static_cast<double>(s.start_ns));
        const double hi = std::min(t1, static_cast<double>(s.end_ns));
        if (hi > lo) {
            if (ph.rate == kSaturate) return std::numeric_limits<double>::infinity();
            sum += ph.rate * (hi - lo);
        }
        t0 = t1;
    }
    return sum / static_cast<double>(s.end_ns - s.start_ns);
}

Result simulate(const Trace& trace, const ControlConfig& given, ModeController::Setting setting,
                const std::string& policy, std::uint64_t seed = 1) {
    // As the engine does: HIODS's policy comes with HIODS's throttle.
    ControlConfig cfg = given;
    cfg.spare_capacity = policy != "hiods";
    ManualClock clock(0);
    std::string error;
    ModeController ctl(
        &clock, cfg, setting,
        setting == ModeController::Setting::kHybrid ? make_policy(policy, cfg, &error) : nullptr);
    const Plant& p = trace.plant;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    const std::uint64_t interval = cfg.interval_ms * kMs;
    std::uint64_t next_tick = interval;
    double backlog = 0;
    Result r;

    auto ticks_until = [&](std::uint64_t t) {
        while (next_tick <= t) {
            clock.set_ns(next_tick);
            const double dt = static_cast<double>(interval) / 1e9;
            const double drained =
                std::min(backlog, ctl.background_speed() * p.drain_bytes_per_s * dt);
            backlog -= drained;
            const WriteMode used = ctl.mode();
            const IntervalSample s =
                ctl.tick(static_cast<std::uint64_t>(backlog / static_cast<double>(p.request_bytes)),
                         static_cast<std::uint64_t>(backlog), static_cast<std::uint64_t>(drained));
            r.ticks.push_back({s, used, ctl.mode(), ctl.background_speed()});
            if (ctl.mode() != used) ++r.switches;
            if (under_stress(s, cfg) && goal_missed(s, cfg)) ++r.missed;
            if (goal_missed(s, cfg) && s.ops_per_s() < 0.95 * offered(trace, s)) ++r.held_back;
            if (used == WriteMode::kDeferred) ++r.deferred_intervals;
            r.max_backlog = std::max(r.max_backlog, backlog);
            next_tick += interval;
        }
    };

    std::uint64_t phase_start = 0;
    std::uint64_t server_free = 0;
    for (const Phase& ph : trace.phases) {
        const std::uint64_t phase_end = phase_start + static_cast<std::uint64_t>(ph.seconds * 1e9);
        double app = static_cast<double>(phase_start);
        while (ph.rate != 0) {
            std::uint64_t start;
            if (ph.rate == kSaturate) {
                start = std::max(phase_start, server_free + 20'000);
            } else {
                const double period = 1e9 / ph.rate;
                app += period * (1 + p.jitter * u(rng));
                start = std::max(static_cast<std::uint64_t>(app), server_free + 20'000);
            }
            if (start >= phase_end) break;
            ticks_until(start);
            clock.set_ns(start);
            const std::uint64_t arrival = ctl.monitor().request_started();
            const WriteMode mode = ctl.mode();
            const double bg = backlog > 0 ? ctl.background_speed() : 0.0;
            const double ms = (mode == WriteMode::kInline ? p.inline_ms : p.deferred_ms) *
                              (1 + p.noise * u(rng)) * (1 + p.bg_slowdown * bg);
            const std::uint64_t finish = start + static_cast<std::uint64_t>(ms * 1e6);
            ticks_until(finish);
            clock.set_ns(finish);
            ctl.monitor().request_finished(arrival, p.request_bytes);
            server_free = finish;
            if (mode == WriteMode::kDeferred) backlog += static_cast<double>(p.request_bytes);
        }
        phase_start = phase_end;
    }
    ticks_until(phase_start);
    r.end_backlog = backlog;
    r.events = ctl.events();
    return r;
}

Result hybrid(const Trace& t, const std::string& policy, std::uint64_t seed = 1) {
    return simulate(t, config_for(t), ModeController::Setting::kHybrid, policy, seed);
}

// Traces shared by the decision tests and the policy comparison.
Trace steady_light() { return {"steady light (100/s)", {}, {{120, 100}}}; }

Trace sustained_burst() {
    // 10 s light, 60 s saturating (inline ~490 ops/s < 800 goal; deferred
    // ~1900), then 30 s idle.
    return {"burst then idle", {}, {{10, 100}, {60, kSaturate}, {30, 0}}};
}

Trace burst_then_light() {
    return {"burst then light", {}, {{10, 100}, {60, kSaturate}, {60, 100}}};
}

Trace short_burst() { return {"lone 2 s burst", {}, {{30, 100}, {2, kSaturate}, {30, 100}}}; }

// Offered 250 ops/s: beyond inline's ~200 (5 ms per request) so inline
// queues up under stress and misses the 240 goal; deferred serves it with
// 3.5 ms gaps, which HIODS calls calm.
Trace between_capacities() {
    Plant p;
    p.inline_ms = 5.0;
    return {"250/s between inline and deferred capacity", p, {{600, 250}}, 240};
}

// The offered rate changes every 10 s, uniformly within [lo, hi] ops/s,
// around inline's capacity of 250 ops/s (4 ms per request); goal 240.
Trace wandering(double lo, double hi, const char* name) {
    Plant p;
    p.inline_ms = 4.0;
    Trace t{name, p, {}, 240};
    std::mt19937_64 rng(99);
    std::uniform_real_distribution<double> rate(lo, hi);
    for (int i = 0; i < 60; ++i) t.phases.push_back({10, rate(rng)});
    return t;
}
Trace hovering() { return wandering(225, 275, "rate hovering 225-275/s (inline cap 250)"); }
Trace wandering_wide() { return wandering(180, 320, "rate wandering 180-320/s (inline cap 250)"); }

// The disk, not deduplication, is the bottleneck: deferred requests are
// barely cheaper, so deferring only builds a backlog.
Trace no_gain() {
    Plant p;
    p.deferred_ms = 1.9;
    return {"saturating, deferred no cheaper", p, {{300, kSaturate}}};
}

// 4 s bursts separated by 4 s of idleness.
Trace bursty() {
    Trace t{"4 s bursts, 4 s idle", {}, {}};
    for (int i = 0; i < 40; ++i) {
        t.phases.push_back({4, kSaturate});
        t.phases.push_back({4, 0});
    }
    return t;
}

// Phases of a working day: light, saturating, light, idle, saturating, light.
Trace mixed() {
    return {"mixed phases",
            {},
            {{60, 100}, {120, kSaturate}, {60, 150}, {60, 0}, {90, kSaturate}, {60, 50}}};
}

// 400 ops/s offered with 0.5 ms gaps in inline: stressed and below the goal
// although the application simply asks for no more (both policies defer).
Trace demand_below_goal() { return {"400/s offered, below the goal", {}, {{300, 400}}}; }

}  // namespace

TEST_CASE("policy: a steady light load stays inline") {
    for (const std::string& policy : policy_names()) {
        INFO(policy);
        const Result r = hybrid(steady_light(), policy);
        CHECK(r.switches == 0);
        CHECK(r.missed == 0);
        for (const Tick& t : r.ticks) CHECK(t.mode_after == WriteMode::kInline);
    }
}

TEST_CASE(
    "policy: a sustained burst above inline capacity switches to deferred within N intervals") {
    for (const std::string& policy : policy_names()) {
        INFO(policy);
        const Result r = hybrid(sustained_burst(), policy);
        const int out = r.first_switch_to(WriteMode::kDeferred);
        REQUIRE(out >= 0);
        // Tick i closes [i, i+1) s; the burst starts at 10 s, so ticks 10, 11
        // and 12 are the first N = 3 stressed, goal-missed intervals.
        CHECK(out == 12);
        for (int i = 10; i <= 12; ++i) {
            CHECK(under_stress(r.ticks[i].sample, config_for(sustained_burst())));
            CHECK(r.ticks[i].sample.ops_per_s() < 800);
        }
        // Deferred meets the goal for the rest of the burst.
        for (int i = 14; i < 70; ++i) CHECK(r.ticks[i].sample.ops_per_s() >= 800);
        auto ev_it = std::find_if(r.events.begin(), r.events.end(), [](const ControlEvent& e) {
            return e.kind == ControlEvent::Kind::kModeSwitch;
        });
        REQUIRE(ev_it != r.events.end());
        const ControlEvent& ev = *ev_it;
        CHECK(ev.mode == WriteMode::kDeferred);
        CHECK(ev.reason.find("goal missed for 3 intervals") != std::string::npos);
        CHECK(ev.time_ns == 13 * kSec);
    }
}

TEST_CASE("policy: calm switches back after N calm intervals") {
    for (const std::string& policy : policy_names()) {
        for (const Trace& trace : {sustained_burst(), burst_then_light()}) {
            INFO(policy << ", " << trace.name);
            const ControlConfig cfg = config_for(trace);
            const Result r = hybrid(trace, policy);
            const int out = r.first_switch_to(WriteMode::kDeferred);
            REQUIRE(out >= 0);
            const int back = r.first_switch_to(WriteMode::kInline, out + 1);
            REQUIRE(back >= 0);
            // The burst ends at 70 s: tick 70 is the first interval without it.
            int first_calm = -1;
            for (int i = out + 1; i < static_cast<int>(r.ticks.size()); ++i) {
                if (!under_stress(r.ticks[i].sample, cfg)) {
                    first_calm = i;
                    break;
                }
            }
            REQUIRE(first_calm == 70);
            CHECK(back == first_calm + 2);  // the N-th calm interval
            CHECK(r.switches == 2);
        }
    }
}

TEST_CASE("policy: a lone burst shorter than N intervals does not switch") {
    for (const std::string& policy : policy_names()) {
        INFO(policy);
        const Result r = hybrid(short_burst(), policy);
        CHECK(r.switches == 0);
        CHECK(r.missed == 2);  // the burst was seen, and ignored
    }
}

TEST_CASE("policy: a load hovering at the threshold does not flap") {
    for (const Trace& trace : {between_capacities(), hovering(), wandering_wide()}) {
        INFO(trace.name);
        const Result cap = hybrid(trace, "capacity");
        const Result hiods = hybrid(trace, "hiods");
        CHECK(cap.switches <= 6);
        CHECK(cap.switches <= hiods.switches);
        CHECK(cap.missed <= hiods.missed);
    }
    // HIODS's calm test cannot tell these loads from a quiet one: it flaps.
    CHECK(hybrid(between_capacities(), "hiods").switches >= 20);
}

TEST_CASE("policy: capacity returns to inline when deferring does not make requests cheaper") {
    const Result cap = hybrid(no_gain(), "capacity");
    CHECK(cap.switches == 2);
    const int back = cap.first_switch_to(WriteMode::kInline);
    REQUIRE(back >= 0);
    bool explained = false;
    for (const ControlEvent& ev : cap.events) {
        if (ev.kind == ControlEvent::Kind::kModeSwitch && ev.mode == WriteMode::kInline) {
            explained = ev.reason.find("does not make requests cheaper") != std::string::npos;
        }
    }
    CHECK(explained);
    const Result hiods = hybrid(no_gain(), "hiods");
    CHECK(hiods.switches == 1);  // stays deferred for good, piling up a backlog
    CHECK(cap.end_backlog < hiods.end_backlog / 10);
}

TEST_CASE("policy: capacity damps a flapping return (bursts separated by short idleness)") {
    const Result cap = hybrid(bursty(), "capacity");
    const Result hiods = hybrid(bursty(), "hiods");
    CHECK(hiods.switches >= 60);
    CHECK(cap.switches <= 6);
    CHECK(cap.missed < hiods.missed / 5);
}

TEST_CASE("controller: after a switch back to inline the background speed ramps") {
    const Trace trace = burst_then_light();
    const ControlConfig cfg = config_for(trace);
    for (const std::string& policy : policy_names()) {
        INFO(policy);
        const Result r = hybrid(trace, policy);
        const int out = r.first_switch_to(WriteMode::kDeferred);
        const int back = r.first_switch_to(WriteMode::kInline, out + 1);
        REQUIRE(back > 0);
        REQUIRE(r.ticks[back].sample.backlog_bytes > 0);  // there is work to burst into
        double prev = r.ticks[back].speed;
        CHECK(prev <= cfg.ramp_per_s + 1e-12);
        for (std::size_t i = back + 1; i < r.ticks.size(); ++i) {
            CHECK(r.ticks[i].speed - prev <= cfg.ramp_per_s + 1e-12);
            prev = r.ticks[i].speed;
        }
        // The ramp does reach full speed while the light load goes on.
        CHECK(r.ticks[back + 25].speed == 1.0);
    }
}

TEST_CASE("controller: the throttle holds the goal exactly while the background takes the rest") {
    // Deferred-only, saturating writer: 0.5 ms per request with the
    // background paused (~1960 ops/s), three times that at full speed
    // (~650 ops/s). The goal of 1000 ops/s is met at speed ~0.5.
    Plant p;
    p.bg_slowdown = 2.0;
    p.drain_bytes_per_s = 1e12;  // the backlog never runs out during the test
    Trace trace{"deferred, background competing", p, {{120, kSaturate}}, 1000};
    const ControlConfig cfg = config_for(trace);
    Result r = simulate(trace, cfg, ModeController::Setting::kDeferred, "");
    double ops = 0, speed = 0;
    const std::size_t from = 60, to = r.ticks.size() - 1;
    for (std::size_t i = from; i < to; ++i) {
        ops += r.ticks[i].sample.ops_per_s();
        speed += r.ticks[i].speed;
        CHECK(r.ticks[i].sample.ops_per_s() == Approx(1000).epsilon(0.05));
    }
    ops /= static_cast<double>(to - from);
    speed /= static_cast<double>(to - from);
    CHECK(ops == Approx(1000).epsilon(0.01));  // no steady-state error
    CHECK(speed == Approx(0.5).margin(0.05));
}

TEST_CASE("controller: inline-only and deferred-only settings never switch") {
    for (auto setting : {ModeController::Setting::kInline, ModeController::Setting::kDeferred}) {
        INFO(to_string(setting));
        const Trace trace = sustained_burst();
        const Result r = simulate(trace, config_for(trace), setting, "");
        const WriteMode fixed =
            setting == ModeController::Setting::kInline ? WriteMode::kInline : WriteMode::kDeferred;
        CHECK(r.switches == 0);
        for (const Tick& t : r.ticks) CHECK(t.mode_after == fixed);
        for (const ControlEvent& ev : r.events) CHECK(ev.kind == ControlEvent::Kind::kThrottle);
    }
    ManualClock clock;
    ModeController fixed(&clock, ControlConfig{}, ModeController::Setting::kDeferred, nullptr);
    CHECK(std::string(fixed.policy_name()).empty());
    CHECK(fixed.mode() == WriteMode::kDeferred);
}

TEST_CASE("controller: hybrid without a goal stays inline") {
    Trace trace = sustained_burst();
    trace.target_ops = 0;
    const Result r = simulate(trace, config_for(trace), ModeController::Setting::kHybrid, "hiods");
    CHECK(r.switches == 0);
    const Result c = simulate(trace, config_for(trace), ModeController::Setting::kHybrid, "");
    CHECK(c.switches == 0);
}

TEST_CASE("controller: events, samples, mode_since and the bounded history") {
    // A policy that flips every tick, to fill the event ring.
    struct Flip final : ModePolicy {
        const char* name() const override { return "flip"; }
        WriteMode decide(const IntervalSample&, WriteMode current, std::string* reason) override {
            *reason = "test flip";
            return current == WriteMode::kInline ? WriteMode::kDeferred : WriteMode::kInline;
        }
    };
    ManualClock clock(0);
    ControlConfig cfg;
    cfg.target_ops = 100;
    ModeController ctl(&clock, cfg, ModeController::Setting::kHybrid, std::make_unique<Flip>());
    CHECK(std::string(ctl.policy_name()) == "flip");
    CHECK(ctl.mode() == WriteMode::kInline);
    CHECK(ctl.mode_since_ns() == 0);
    CHECK(ctl.background_speed() == 1.0);

    clock.set_ns(kSec);
    const IntervalSample s = ctl.tick(7, 8, 9);
    CHECK(s.start_ns == 0);
    CHECK(s.end_ns == kSec);
    CHECK(s.backlog_records == 7);
    CHECK(s.backlog_bytes == 8);
    CHECK(s.background_bytes == 9);
    CHECK(ctl.mode() == WriteMode::kDeferred);
    CHECK(ctl.mode_since_ns() == kSec);
    auto events = ctl.events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == ControlEvent::Kind::kModeSwitch);
    CHECK(events[0].reason == "flip: test flip");
    CHECK(events[0].backlog_records == 7);
    CHECK(events[0].time_ns == kSec);

    for (int i = 2; i <= 4000; ++i) {
        clock.set_ns(static_cast<std::uint64_t>(i) * kSec);
        ctl.tick(0, 0, 0);
    }
    events = ctl.events();
    CHECK(events.size() == ModeController::kMaxEvents);
    CHECK(events.back().time_ns == 4000 * kSec);  // the newest are kept
    const auto samples = ctl.samples();
    CHECK(samples.size() == ModeController::kMaxSamples);
    CHECK(samples.front().end_ns == (4000 - ModeController::kMaxSamples + 1) * kSec);
    CHECK(samples.back().end_ns == 4000 * kSec);
}

TEST_CASE("controller: throttle events only when the speed moves by more than 0.1") {
    ManualClock clock(0);
    ControlConfig cfg;
    cfg.target_ops = 2000;
    ModeController ctl(&clock, cfg, ModeController::Setting::kInline, nullptr);
    std::uint64_t t = 0;
    // About 990 requests per second, 1 ms each back to back: goal missed.
    for (int sec = 0; sec < 20; ++sec) {
        for (int i = 0; i < 500; ++i) {
            clock.set_ns(t);
            const std::uint64_t a = ctl.monitor().request_started();
            t += kMs;
            clock.set_ns(t);
            ctl.monitor().request_finished(a, 4096);
            t += 10'000;  // the next sent at once (10 us): every request held
        }
        clock.set_ns(t);
        ctl.tick(0, 0, 0);
    }
    CHECK(ctl.background_speed() == 0.0);
    const auto events = ctl.events();
    REQUIRE(!events.empty());
    double last = 1.0;
    for (const ControlEvent& ev : events) {
        CHECK(ev.kind == ControlEvent::Kind::kThrottle);
        CHECK(std::abs(ev.speed - last) > ModeController::kThrottleEventStep);
        CHECK(ev.reason.rfind("goal missed: background speed", 0) == 0);
        last = ev.speed;
    }
    CHECK(events.size() < 20);
}

TEST_CASE("comparison: hiods vs capacity on the same traces") {
    const std::vector<Trace> traces = {steady_light(),
                                       sustained_burst(),
                                       burst_then_light(),
                                       short_burst(),
                                       between_capacities(),
                                       hovering(),
                                       wandering_wide(),
                                       no_gain(),
                                       bursty(),
                                       mixed(),
                                       demand_below_goal()};
    std::printf("\n%-44s %-8s %8s %9s %6s %8s %11s %11s\n", "trace", "policy", "switches",
                "held back", "missed", "deferred", "max backlog", "end backlog");
    unsigned totals[2][4] = {};
    for (const Trace& trace : traces) {
        int row = 0;
        Result res[2];
        for (const char* policy : {"hiods", "capacity"}) {
            const Result r = hybrid(trace, policy);
            std::printf("%-44s %-8s %8u %9u %6u %8u %8.1f GB %8.1f GB\n", trace.name.c_str(),
                        policy, r.switches, r.held_back, r.missed, r.deferred_intervals,
                        r.max_backlog / 1e9, r.end_backlog / 1e9);
            totals[row][0] += r.switches;
            totals[row][1] += r.held_back;
            totals[row][2] += r.missed;
            totals[row][3] += r.deferred_intervals;
            res[row++] = r;
        }
        INFO(trace.name);
        // At most one more switch (the return when deferring does not pay) and
        // at most one more detection run of misses.
        CHECK(res[1].switches <= res[0].switches + 1);
        CHECK(res[1].held_back <= res[0].held_back + 3);
    }
    for (int row = 0; row < 2; ++row) {
        std::printf("%-44s %-8s %8u %9u %6u %8u\n", "total", row == 0 ? "hiods" : "capacity",
                    totals[row][0], totals[row][1], totals[row][2], totals[row][3]);
    }
    CHECK(totals[1][0] < totals[0][0]);
    CHECK(totals[1][1] < totals[0][1]);
}

// Several writers that together ask for less than the goal keep the daemon
// "saturated" (more than one request in service) while inline serves all
// they ask. Found with scripts/bench-hybrid's mountain/valley load: after
// returning to inline in a valley the capacity policy deferred again.
TEST_CASE("policy: capacity stays inline for writers asking less than its measured capacity") {
    ControlConfig cfg;
    cfg.target_ops = 5000;
    auto policy = make_policy("capacity", cfg, nullptr);
    REQUIRE(policy != nullptr);
    std::uint64_t t = 0;
    auto interval = [&](double ops_per_s, double requests_in_service) {
        IntervalSample s;
        s.start_ns = t;
        t += kSec;
        s.end_ns = t;
        s.ops = s.arrivals = s.stressed = static_cast<std::uint64_t>(ops_per_s);
        s.bytes = s.ops * 4096;
        s.busy_ns = static_cast<std::uint64_t>(requests_in_service * kSec);
        s.last_arrival_ns = t - kMs;
        return s;
    };
    WriteMode mode = WriteMode::kInline;
    std::string reason;
    // Inline at its ceiling (3000 ops/s, four writers): defers after N.
    for (unsigned i = 0; i < cfg.switch_after; ++i) mode = policy->decide(interval(3000, 4), mode, &reason);
    REQUIRE(mode == WriteMode::kDeferred);
    // A valley of 1000 ops/s fits inline's 3000: back to inline after N.
    for (unsigned i = 0; i < cfg.switch_after; ++i) mode = policy->decide(interval(1000, 1.2), mode, &reason);
    REQUIRE(mode == WriteMode::kInline);
    // Still 1000 ops/s, inline, four writers in service: no reason to defer.
    for (int i = 0; i < 20; ++i) {
        mode = policy->decide(interval(1000, 3.5), mode, &reason);
        INFO("interval " << i);
        REQUIRE(mode == WriteMode::kInline);
    }
    // The load rises to inline's ceiling again: defers within N intervals.
    for (unsigned i = 0; i < cfg.switch_after; ++i) mode = policy->decide(interval(2900, 4), mode, &reason);
    CHECK(mode == WriteMode::kDeferred);
}
