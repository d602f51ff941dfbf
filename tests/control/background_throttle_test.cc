// BackgroundThrottle against a simulated plant: the foreground achieves
// capacity - loss * speed ops/s, where speed is the background speed set at
// the previous tick (the one in force during the interval measured).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "control/background_throttle.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;

namespace {

using test::kSec;
constexpr double kGoal = 1000;

enum class Load { kStressed, kCalm, kIdle };

// Interval k of length dt seconds with the given foreground rate.
IntervalSample sample(std::uint64_t k, double ops_per_s, Load load = Load::kStressed,
                      double dt = 1.0) {
    IntervalSample s;
    const auto len = static_cast<std::uint64_t>(dt * kSec);
    s.start_ns = 100 * kSec + k * len;
    s.end_ns = s.start_ns + len;
    s.ops = static_cast<std::uint64_t>(std::llround(std::max(0.0, ops_per_s) * dt));
    s.bytes = s.ops * 65536;
    s.arrivals = s.ops;
    s.stressed = load == Load::kStressed ? s.ops : 0;
    s.held = s.stressed;  // a stressed load here is a saturating one
    s.last_arrival_ns = load == Load::kIdle ? s.end_ns - 5 * kSec : s.end_ns - 1'000'000;
    if (load == Load::kIdle) s.ops = s.arrivals = s.stressed = s.held = s.bytes = 0;
    return s;
}

ControlConfig goal_config(double ramp_per_s = 0.05) {
    ControlConfig cfg;
    cfg.target_ops = kGoal;
    cfg.ramp_per_s = ramp_per_s;
    return cfg;
}

// A plant whose equilibrium speed is s_star for plant gain g (the share of
// the goal the foreground loses at full background speed).
struct LossPlant {
    double g = 1.0;
    double s_star = 0.5;
    double capacity() const { return kGoal * (1 + g * s_star); }
    // A foreground never stops entirely: at least 1 % of the goal.
    double ops(double speed) const {
        return std::max(0.01 * kGoal, capacity() - g * kGoal * speed);
    }
};

// Runs n intervals of the plant; returns the speeds set at each tick.
std::vector<double> run(BackgroundThrottle& t, const LossPlant& p, int n, std::uint64_t* k,
                        double noise = 0, std::mt19937_64* rng = nullptr) {
    std::vector<double> out;
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < n; ++i) {
        double ops = p.ops(t.speed());
        if (noise > 0) ops *= 1 + noise * u(*rng);
        out.push_back(t.update(sample((*k)++, ops), WriteMode::kInline, 1.0));
    }
    return out;
}

// Peaks of |x - target| between sign changes of x - target.
std::vector<double> half_cycle_peaks(const std::vector<double>& xs, double target) {
    std::vector<double> peaks;
    double peak = 0;
    int sign = 0;
    for (double x : xs) {
        const double d = x - target;
        const int sg = d > 1e-9 ? 1 : (d < -1e-9 ? -1 : 0);
        if (sg == 0) continue;
        if (sg != sign && sign != 0) {
            peaks.push_back(peak);
            peak = 0;
        }
        sign = sg;
        peak = std::max(peak, std::fabs(d));
    }
    if (peak > 0) peaks.push_back(peak);
    return peaks;
}

// A textbook PI with output clamping but no anti-windup, to show what the
// anti-windup test would catch.
struct NaivePi {
    double kp, ki, integral = 0, speed = 1;
    double update(double e) {
        integral += ki * e;
        speed = std::clamp(kp * e + integral, 0.0, 1.0);
        return speed;
    }
};

}  // namespace

TEST_CASE("throttle: goal missed slows the background, idle runs it at full speed") {
    BackgroundThrottle t(goal_config());
    CHECK(t.speed() == 1.0);
    std::uint64_t k = 0;
    double prev = t.speed();
    for (int i = 0; i < 10; ++i) {  // 60 % of the goal, whatever the speed
        const double s = t.update(sample(k++, 600), WriteMode::kInline, 1.0);
        CHECK(s <= prev);
        prev = s;
    }
    CHECK(t.speed() == 0.0);
    CHECK(std::string(t.regime()) == "goal missed");

    CHECK(t.update(sample(k++, 0, Load::kIdle), WriteMode::kInline, 1.0) == 1.0);
    CHECK(std::string(t.regime()) == "foreground idle");
    // The foreground comes back still missing the goal: the throttle resumes
    // from its last operating point, not from the idle full speed.
    CHECK(t.update(sample(k++, 600), WriteMode::kInline, 1.0) == 0.0);
}

TEST_CASE("throttle: the PID settles on a step without sustained oscillation") {
    for (double g : {0.3, 1.0, 2.0}) {
        for (double from_to : {0.0, 1.0}) {  // step up, then the same step down
            const double s1 = from_to == 0.0 ? 0.3 : 0.7;
            const double s2 = from_to == 0.0 ? 0.7 : 0.3;
            INFO("plant gain " << g << ", step " << s1 << " -> " << s2);
            // A ramp of 10/s never binds: this is the PID alone.
            BackgroundThrottle t(goal_config(10.0));
            std::uint64_t k = 0;
            run(t, LossPlant{g, s1}, 80, &k);
            REQUIRE(t.speed() == Approx(s1).margin(0.01));
            const std::vector<double> xs = run(t, LossPlant{g, s2}, 80, &k);
            // Settled: within 0.02 of the new equilibrium after 40 intervals.
            for (std::size_t i = 40; i < xs.size(); ++i) CHECK(xs[i] == Approx(s2).margin(0.02));
            // Any ringing decays: every half-cycle peak is below the one before,
            // and the first overshoot is smaller than the step.
            const std::vector<double> peaks = half_cycle_peaks(xs, s2);
            REQUIRE(!peaks.empty());
            for (std::size_t i = 1; i < peaks.size(); ++i) CHECK(peaks[i] < peaks[i - 1] + 1e-12);
            if (peaks.size() > 1) CHECK(peaks[1] < 0.5 * std::fabs(s2 - s1));
        }
    }
}

TEST_CASE("throttle: with the default ramp an upward step is slew-limited and still settles") {
    BackgroundThrottle t(goal_config());
    std::uint64_t k = 0;
    run(t, LossPlant{1.0, 0.2}, 80, &k);
    REQUIRE(t.speed() == Approx(0.2).margin(0.01));
    const double start = t.speed();
    double prev = start;
    const std::vector<double> xs = run(t, LossPlant{1.0, 0.8}, 60, &k);
    for (double x : xs) {
        CHECK(x - prev <= 0.05 + 1e-12);
        prev = x;
    }
    CHECK(xs[5] <= start + 6 * 0.05 + 1e-9);
    CHECK(xs.back() == Approx(0.8).margin(0.02));
}

TEST_CASE("throttle: noisy measurements keep the speed near the equilibrium") {
    std::mt19937_64 rng(42);
    BackgroundThrottle t(goal_config());
    std::uint64_t k = 0;
    run(t, LossPlant{1.0, 0.5}, 60, &k, 0.03, &rng);
    const std::vector<double> xs = run(t, LossPlant{1.0, 0.5}, 300, &k, 0.03, &rng);
    double mean = 0, var = 0;
    for (double x : xs) mean += x;
    mean /= static_cast<double>(xs.size());
    for (double x : xs) var += (x - mean) * (x - mean);
    const double sd = std::sqrt(var / static_cast<double>(xs.size()));
    CHECK(mean == Approx(0.5).margin(0.05));
    CHECK(sd < 0.05);
}

TEST_CASE("throttle: anti-windup; after a long saturation the output recovers promptly") {
    const ControlConfig cfg = goal_config(10.0);
    SECTION("held at 0 by a goal it cannot meet") {
        BackgroundThrottle t(cfg);
        NaivePi naive{cfg.kp, cfg.ki};
        std::uint64_t k = 0;
        // Half the goal even with the background paused.
        auto starved = [](double speed) { return 0.5 * kGoal - 0.3 * kGoal * speed; };
        for (int i = 0; i < 100; ++i) {
            t.update(sample(k++, starved(t.speed())), WriteMode::kInline, 1.0);
            naive.update((starved(naive.speed) - kGoal) / kGoal);
        }
        CHECK(t.speed() == 0.0);
        CHECK(t.integral() == 0.0);
        const LossPlant p{1.0, 0.5};
        int ours = 0, theirs = 0;
        while (t.speed() < 0.4 && ours < 1000) {
            t.update(sample(k++, p.ops(t.speed())), WriteMode::kInline, 1.0);
            ++ours;
        }
        while (naive.speed < 0.4 && theirs < 1000) {
            naive.update((p.ops(naive.speed) - kGoal) / kGoal);
            ++theirs;
        }
        CHECK(ours <= 6);
        CHECK(theirs > 20);  // what windup would have cost
    }
    SECTION("held at 1 by a goal met with room to spare") {
        BackgroundThrottle t(cfg);
        NaivePi naive{cfg.kp, cfg.ki};
        std::uint64_t k = 0;
        for (int i = 0; i < 100; ++i) {
            t.update(sample(k++, 4 * kGoal), WriteMode::kInline, 1.0);
            naive.update(1.0);
        }
        CHECK(t.speed() == 1.0);
        CHECK(t.integral() <= 1.0);
        const LossPlant p{1.0, 0.3};
        int ours = 0, theirs = 0;
        while (t.speed() > 0.4 && ours < 1000) {
            t.update(sample(k++, p.ops(t.speed())), WriteMode::kInline, 1.0);
            ++ours;
        }
        while (naive.speed > 0.4 && theirs < 1000) {
            naive.update((p.ops(naive.speed) - kGoal) / kGoal);
            ++theirs;
        }
        CHECK(ours <= 6);
        CHECK(theirs > 20);
    }
}

TEST_CASE("throttle: after a switch back to inline the speed restarts at 0 and ramps") {
    for (double dt : {1.0, 0.25}) {
        INFO("interval " << dt << " s");
        ControlConfig cfg = goal_config();
        cfg.interval_ms = static_cast<std::uint64_t>(dt * 1000);
        BackgroundThrottle t(cfg);
        std::uint64_t k = 0;
        for (int i = 0; i < 20; ++i)
            t.update(sample(k++, 300, Load::kCalm, dt), WriteMode::kDeferred, dt);
        REQUIRE(t.speed() == 1.0);
        double prev = t.update(sample(k++, 300, Load::kCalm, dt), WriteMode::kInline, dt);
        CHECK(prev <= cfg.ramp_per_s * dt + 1e-12);
        int ticks = 1;
        while (prev < 1.0 && ticks < 1000) {
            const double s = t.update(sample(k++, 300, Load::kCalm, dt), WriteMode::kInline, dt);
            CHECK(s - prev <= cfg.ramp_per_s * dt + 1e-12);
            CHECK(s >= prev);
            prev = s;
            ++ticks;
        }
        // Full speed after 1 / ramp_per_s seconds, not before.
        CHECK(ticks * dt == Approx(1.0 / cfg.ramp_per_s).margin(dt));
    }
}

TEST_CASE("throttle: the derivative does not kick when stress begins") {
    ControlConfig with_d = goal_config(10.0);
    with_d.kd = 0.5;
    BackgroundThrottle pd(with_d), pi(goal_config(10.0));
    std::uint64_t k = 0;
    for (int i = 0; i < 5; ++i) {
        pd.update(sample(k, 500, Load::kCalm), WriteMode::kInline, 1.0);
        pi.update(sample(k++, 500, Load::kCalm), WriteMode::kInline, 1.0);
    }
    // First stressed interval: the jump from the forced +1 to a measured
    // error is not a rate of change of the foreground.
    CHECK(pd.update(sample(k, 500), WriteMode::kInline, 1.0) ==
          Approx(pi.update(sample(k, 500), WriteMode::kInline, 1.0)));
    ++k;
    // From then on it acts on measured changes: a falling rate brakes harder.
    CHECK(pd.update(sample(k, 300), WriteMode::kInline, 1.0) <
          pi.update(sample(k, 300), WriteMode::kInline, 1.0));
}

TEST_CASE("throttle: without a goal the background yields to a foreground under stress") {
    const bool spare = GENERATE(true, false);
    INFO((spare ? "spare capacity" : "HIODS's stress test"));
    ControlConfig cfg;  // no goal
    cfg.spare_capacity = spare;
    BackgroundThrottle t(cfg);
    std::uint64_t k = 0;
    // Idle: full speed.
    CHECK(t.update(sample(k++, 0, Load::kIdle), WriteMode::kDeferred, 1.0) == 1.0);
    // A foreground under stress, every request held (a deferred-mode
    // burst): paused at once by HIODS's test, within two intervals by the
    // held share.
    double s = t.update(sample(k++, 100), WriteMode::kDeferred, 1.0);
    if (!spare) CHECK(s == 0.0);
    s = t.update(sample(k++, 100), WriteMode::kDeferred, 1.0);
    CHECK(s == 0.0);
    for (int i = 0; i < 10; ++i) s = t.update(sample(k++, 100), WriteMode::kDeferred, 1.0);
    CHECK(s == 0.0);
    CHECK(std::string(t.regime()) == (spare ? "foreground held" : "no goal, foreground under stress"));
    // Calm: ramp-limited back to full speed.
    double prev = t.update(sample(k++, 100, Load::kCalm), WriteMode::kDeferred, 1.0);
    // Nothing held is all capacity spare: the spare-capacity throttle climbs at four times the ramp.
    CHECK(prev <= (spare ? 4 : 1) * cfg.ramp_per_s + 1e-12);
    for (int i = 0; i < 30; ++i) prev = t.update(sample(k++, 100, Load::kCalm), WriteMode::kDeferred, 1.0);
    CHECK(prev == 1.0);
    CHECK(std::string(t.regime()) == (spare ? "spare capacity" : "no goal"));
}

TEST_CASE("throttle: random inputs keep speed and integral in [0, 1] and the ramp holds") {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    ControlConfig cfg = goal_config();
    cfg.target_bytes_per_s = 50e6;
    cfg.kd = 0.2;
    BackgroundThrottle t(cfg);
    for (std::uint64_t k = 0; k < 20000; ++k) {
        const double dt = 0.1 + u(rng);
        const double r = u(rng);
        const Load load = r < 0.1 ? Load::kIdle : (r < 0.3 ? Load::kCalm : Load::kStressed);
        const WriteMode mode = u(rng) < 0.05 ? WriteMode::kDeferred : WriteMode::kInline;
        const double before = t.speed();
        const double s = t.update(sample(k, 3000 * u(rng), load, dt), mode, dt);
        REQUIRE(s >= 0.0);
        REQUIRE(s <= 1.0);
        REQUIRE(t.integral() >= 0.0);
        REQUIRE(t.integral() <= 1.0);
        // The spare-capacity throttle climbs at up to four times the ramp
        // with little held, never faster.
        if (load != Load::kIdle) REQUIRE(s - before <= 4 * cfg.ramp_per_s * dt + 1e-12);
    }
}

TEST_CASE("streaming reads pause the background, with or without a write goal", "[control]") {
    const bool spare = GENERATE(true, false);
    for (bool goal : {false, true}) {
        DYNAMIC_SECTION((goal ? "write goal" : "no goal") << (spare ? "" : ", HIODS's stress test")) {
            ControlConfig cfg = goal ? goal_config() : ControlConfig{};
            cfg.spare_capacity = spare;
            BackgroundThrottle t(cfg);
            std::uint64_t k = 0;
            // Writes idle, reads streaming: the pass would take their disk
            // and CPU, so it stops, and the reason says why.
            IntervalSample idle_writes = sample(k, 0, Load::kIdle);
            IntervalSample reads = sample(k++, 3000, Load::kStressed);
            CHECK(t.update(idle_writes, WriteMode::kDeferred, 1.0, &reads) == 0.0);
            CHECK(std::string(t.regime()) == (spare ? "reads saturating" : "reads under stress"));
            // Reads that trickle (not under stress) and no writes: the
            // background ramps up again instead of jumping to full speed.
            IntervalSample calm = sample(k, 50, Load::kCalm);
            idle_writes = sample(k++, 0, Load::kIdle);
            const double after = t.update(idle_writes, WriteMode::kDeferred, 1.0, &calm);
            CHECK(after > 0.0);
            CHECK(after <= (spare ? 4 : 1) * cfg.ramp_per_s + 1e-9);
            // Both idle: full speed.
            IntervalSample none = sample(k++, 0, Load::kIdle);
            CHECK(t.update(none, WriteMode::kDeferred, 1.0, &none) == 1.0);
            // Without a read sample (a caller that does not count reads) the
            // writes alone decide, as before.
            CHECK(t.update(none, WriteMode::kDeferred, 1.0) == 1.0);
        }
    }
}

namespace {

// An interval of 4 KiB writes at ops_per_s of which the share `held` was held.
IntervalSample held_sample(std::uint64_t k, double ops_per_s, double held) {
    IntervalSample s = sample(k, ops_per_s, Load::kCalm);
    s.held = static_cast<std::uint64_t>(std::llround(held * static_cast<double>(s.arrivals)));
    return s;
}

}  // namespace

TEST_CASE("throttle: with most of the capacity spare the pass climbs four times as fast, but not after a switch "
          "back to inline",
          "[control][spare]") {
    ControlConfig cfg;  // no goal, the spare-capacity throttle
    BackgroundThrottle t(cfg);
    std::uint64_t k = 0;
    // A saturating stretch pauses the pass.
    for (int i = 0; i < 3; ++i) t.update(held_sample(k++, 9000, 0.9), WriteMode::kDeferred, 1.0);
    REQUIRE(t.speed() == 0.0);
    // A lull with few requests held (a valley): 4 x ramp_per_s a second.
    double s = t.update(held_sample(k++, 9000, 0.05), WriteMode::kDeferred, 1.0);
    CHECK(s == Approx(4 * cfg.ramp_per_s));
    s = t.update(held_sample(k++, 9000, 0.05), WriteMode::kDeferred, 1.0);
    CHECK(s == Approx(8 * cfg.ramp_per_s));
    // Nearer the set point (a quarter held: under half of it spare), the ramp.
    const double before = s;
    s = t.update(held_sample(k++, 9000, 0.25), WriteMode::kDeferred, 1.0);
    CHECK(s <= before + cfg.ramp_per_s + 1e-12);
    // After a switch back to inline the climb is the slow one all the way.
    t.update(held_sample(k++, 9000, 0.05), WriteMode::kDeferred, 1.0);
    s = t.update(held_sample(k++, 9000, 0.05), WriteMode::kInline, 1.0);
    CHECK(s == Approx(cfg.ramp_per_s));  // restarted from 0
    for (int i = 2; i <= 10; ++i) {
        s = t.update(held_sample(k++, 9000, 0.05), WriteMode::kInline, 1.0);
        CHECK(s == Approx(i * cfg.ramp_per_s));
    }
}
