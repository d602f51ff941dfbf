// The spare-capacity throttle (docs/controller.md) against a simulated FUSE
// daemon in deferred mode, request by request (ManualClock):
//
// - the application sends a request when it is due and the previous one
//   has come back (fio's rate limiter: a rate-limited load that fell
//   behind sends at once), or, unlimited, as soon as the previous one
//   has come back; between a completion and the next request the kernel
//   and the application take a turnaround of 10 us plus an exponential
//   10 us on average (on this machine, 56 % of a saturating fio's gaps
//   were under 20 us);
// - the daemon serves one request at a time in 12 us, plus 90 us times
//   the background speed (what the pass's lock and CPU take from it: at
//   full speed a 50 % load's requests took 104 us instead of 12);
// - every request adds 4 KiB to the backlog; the pass drains speed x
//   60 MB/s of it each interval (a 4 KiB random overwrite costs the pass
//   a sweep of its own: at 25 % load the real pass kept the backlog level
//   at about half speed).
// The capacity is 1 / (12 us + 20 us), about 31 000 requests/s; at half of
// it the pass cannot keep up even at full speed, and only the backlog's
// limit bounds the backlog.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "control/mode_controller.h"
#include "control/manual_clock.h"
#include "hiodsfs/clock.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;

namespace {

using test::kMs;
using test::kSec;

constexpr double kServiceNs = 12'000, kInterferenceNs = 90'000;
constexpr double kRequestBytes = 4096, kDrainBytesPerS = 60e6;
constexpr double kCapacity = 1e9 / (kServiceNs + 20'000);

struct Run {
    double offered = 0;  // requests/s (0: unlimited)
    double served = 0;   // requests/s over the run
    double written = 0;  // bytes
    double backlog_at_half = 0, backlog_at_end = 0, max_backlog = 0;
    double mean_speed = 0;  // over the second half
    std::vector<std::string> regimes;
};

// rate 0: the application sends as fast as it is served.
Run simulate(double rate, double seconds, std::uint64_t backlog_limit = 0, std::uint64_t seed = 1) {
    ManualClock clock(0);
    ControlConfig cfg;  // no goal, the defaults
    ModeController ctl(&clock, cfg, ModeController::Setting::kDeferred, nullptr);
    std::mt19937_64 rng(seed);
    std::exponential_distribution<double> turnaround(1.0 / 10'000);
    std::uniform_real_distribution<double> noise(0.9, 1.1);
    const auto end = static_cast<std::uint64_t>(seconds * kSec);
    std::uint64_t next_tick = kSec, done = 0, served = 0;
    double due = 0, backlog = 0, speed_sum = 0;
    int speed_n = 0;
    Run r;
    r.offered = rate;
    auto ticks_until = [&](std::uint64_t t) {
        while (next_tick <= t && next_tick <= end) {
            clock.set_ns(next_tick);
            const double drained = std::min(backlog, ctl.background_speed() * kDrainBytesPerS);
            backlog -= drained;
            ctl.tick(static_cast<std::uint64_t>(backlog / kRequestBytes), static_cast<std::uint64_t>(backlog),
                     static_cast<std::uint64_t>(drained), backlog_limit);
            r.regimes.emplace_back(ctl.throttle_regime());
            if (next_tick == end / 2 / kSec * kSec) r.backlog_at_half = backlog;
            if (next_tick > end / 2) {
                speed_sum += ctl.background_speed();
                ++speed_n;
            }
            r.max_backlog = std::max(r.max_backlog, backlog);
            next_tick += kSec;
        }
    };
    for (;;) {
        const double ready = static_cast<double>(done) + 10'000 + turnaround(rng);
        const auto send = static_cast<std::uint64_t>(rate > 0 ? std::max(due, ready) : ready);
        if (send >= end) break;
        ticks_until(send);
        clock.set_ns(send);
        const std::uint64_t arrival = ctl.monitor().request_started();
        const double service = (kServiceNs + kInterferenceNs * ctl.background_speed()) * noise(rng);
        done = send + static_cast<std::uint64_t>(service);
        ticks_until(done);
        clock.set_ns(done);
        ctl.monitor().request_finished(arrival, static_cast<std::uint64_t>(kRequestBytes));
        backlog += kRequestBytes;
        r.written += kRequestBytes;
        ++served;
        if (rate > 0) due += 1e9 / rate;
    }
    ticks_until(end);
    r.served = static_cast<double>(served) / seconds;
    r.backlog_at_end = backlog;
    r.mean_speed = speed_n > 0 ? speed_sum / speed_n : 0;
    return r;
}

}  // namespace

TEST_CASE("spare capacity: a light steady load leaves the pass running, and the backlog drains as it writes",
          "[control][spare]") {
    const Run r = simulate(1500, 120);
    INFO("served " << r.served << "/s, backlog at the end " << r.backlog_at_end << " of " << r.written
                   << " written, mean speed " << r.mean_speed);
    CHECK(r.served >= 0.97 * r.offered);
    CHECK(r.backlog_at_end <= 0.10 * r.written);
    CHECK(r.mean_speed > 0.5);
    CHECK(std::count(r.regimes.begin(), r.regimes.end(), "foreground saturating") == 0);
}

TEST_CASE("spare capacity: at a quarter of capacity the pass takes what is spare and the backlog stays bounded",
          "[control][spare]") {
    const Run r = simulate(0.25 * kCapacity, 120);
    INFO("served " << r.served << " of " << r.offered << "/s; backlog " << r.backlog_at_half << " at 60 s, "
                   << r.backlog_at_end << " at the end; mean speed " << r.mean_speed);
    CHECK(r.served >= 0.95 * r.offered);
    // Bounded: not growing over the last minute.
    CHECK(r.backlog_at_end <= r.backlog_at_half + 0.01 * r.written);
    CHECK(r.mean_speed > 0.3);
}

TEST_CASE("spare capacity: at half of capacity the pass runs in what is spare, and the backlog's limit bounds "
          "what it cannot drain",
          "[control][spare]") {
    const Run free = simulate(0.5 * kCapacity, 120);
    INFO("no limit: served " << free.served << " of " << free.offered << "/s; backlog " << free.backlog_at_end
                             << " at the end; mean speed " << free.mean_speed);
    CHECK(free.served >= 0.95 * free.offered);
    CHECK(free.mean_speed > 0.05);
    CHECK(free.backlog_at_end > free.backlog_at_half);  // the plant: more comes than the pass can take
    const std::uint64_t limit = 256ull << 20;
    const Run bounded = simulate(0.5 * kCapacity, 120, limit);
    INFO("limit 256 MiB: served " << bounded.served << "/s; max backlog " << bounded.max_backlog);
    CHECK(bounded.max_backlog <= static_cast<double>(limit) + 2 * bounded.offered * kRequestBytes);
    CHECK(bounded.served > 0.5 * bounded.offered);
}

TEST_CASE("spare capacity: a saturating load pauses the pass, and is served as fast as with the pass off",
          "[control][spare]") {
    const Run r = simulate(0, 60);
    // With the pass off the daemon serves one request per 12 us plus the
    // turnaround; the pass may cost at most 5 % of that.
    INFO("served " << r.served << "/s, capacity " << kCapacity << "/s, mean speed " << r.mean_speed);
    CHECK(r.served >= 0.95 * kCapacity);
    CHECK(r.mean_speed < 0.02);
}

TEST_CASE("spare capacity: past the backlog's limit a saturating load no longer keeps the pass paused",
          "[control][spare]") {
    const std::uint64_t limit = 512ull << 20;
    const Run r = simulate(0, 120, limit);
    INFO("max backlog " << r.max_backlog << ", at the end " << r.backlog_at_end << ", written " << r.written);
    CHECK(std::count(r.regimes.begin(), r.regimes.end(), "backlog over its limit") > 0);
    // It stays near the limit: one interval's writes over it at most.
    CHECK(r.max_backlog <= static_cast<double>(limit) + 2 * kCapacity * kRequestBytes);
    CHECK(r.backlog_at_end <= static_cast<double>(limit) + 2 * kCapacity * kRequestBytes);
    CHECK(r.mean_speed > 0.1);
}

namespace {

// One second of requests back to back, of 1 ms each inline and 0.6 ms
// deferred (a saturating load that misses a goal of 2000/s either way, and
// that deferring serves faster), then a tick with the given backlog and limit.
void saturated_second(ModeController& ctl, ManualClock& clock, std::uint64_t* t, std::uint64_t backlog,
                      std::uint64_t limit) {
    const std::uint64_t service = ctl.mode() == WriteMode::kDeferred ? 600'000 : kMs;
    for (const std::uint64_t end = *t + kSec; *t + service < end;) {
        clock.set_ns(*t);
        const std::uint64_t a = ctl.monitor().request_started();
        *t += service;
        clock.set_ns(*t);
        ctl.monitor().request_finished(a, 4096);
        *t += 10'000;
    }
    clock.set_ns(*t);
    ctl.tick(backlog / 4096, backlog, 0, limit);
}

}  // namespace

TEST_CASE("spare capacity: past the backlog's limit hybrid writes inline", "[control][spare]") {
    ManualClock clock(0);
    ControlConfig cfg;
    cfg.target_ops = 2000;
    ModeController ctl(&clock, cfg, ModeController::Setting::kHybrid, nullptr);
    std::uint64_t t = 0;
    const std::uint64_t limit = 1ull << 30;
    for (int i = 0; i < 5; ++i) saturated_second(ctl, clock, &t, 0, limit);
    REQUIRE(ctl.mode() == WriteMode::kDeferred);
    saturated_second(ctl, clock, &t, limit + 1, limit);
    CHECK(ctl.mode() == WriteMode::kInline);
    bool said = false;
    for (const ControlEvent& ev : ctl.events())
        said = said || (ev.kind == ControlEvent::Kind::kModeSwitch && ev.reason.find("over its limit") != std::string::npos);
    CHECK(said);
}

TEST_CASE("spare capacity: a deferred pass forced by the backlog's limit runs until the backlog is under 90 % of "
          "it",
          "[control][spare]") {
    ManualClock clock(0);
    ModeController ctl(&clock, ControlConfig{}, ModeController::Setting::kDeferred, nullptr);
    std::uint64_t t = 0;
    const std::uint64_t limit = 1ull << 30;
    for (int i = 0; i < 3; ++i) saturated_second(ctl, clock, &t, limit / 2, limit);
    CHECK(ctl.background_speed() == 0.0);  // saturating: paused
    CHECK_FALSE(ctl.over_limit());
    saturated_second(ctl, clock, &t, limit + 1, limit);
    CHECK(ctl.background_speed() == 1.0);
    CHECK(std::string(ctl.throttle_regime()) == "backlog over its limit");
    CHECK(ctl.over_limit());  // the engine runs the pass at the requests' priority then
    saturated_second(ctl, clock, &t, limit / 100 * 95, limit);
    CHECK(ctl.background_speed() == 1.0);
    CHECK(ctl.over_limit());
    saturated_second(ctl, clock, &t, limit / 100 * 85, limit);
    CHECK(ctl.background_speed() < 1.0);
    CHECK(std::string(ctl.throttle_regime()) != "backlog over its limit");
    CHECK_FALSE(ctl.over_limit());
}

namespace {

// Writers of files of their own, each rate-limited (Poisson arrivals, sent
// at once when behind), served concurrently by
// the daemon's request threads (inline mode's writes: 400 us each, and
// 400 us more times the background speed for what the pass takes from
// them). At 2 000 requests/s in all, one writer's request often meets
// others in service; two others, more often while the pass runs. Each
// writer's requests are one stream, or (same_stream) all of them share one.
// Returns the background speed averaged over the second half.
double independent_writers(bool same_stream, double* backlog_at_end, double* served_share) {
    ManualClock clock(0);
    ModeController ctl(&clock, ControlConfig{}, ModeController::Setting::kDeferred, nullptr);
    constexpr int kWriters = 4;
    constexpr double kRate = 500;  // requests/s per writer
    constexpr std::uint64_t kEnd = 60 * kSec;
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> turnaround(1.0 / 10'000);
    std::exponential_distribution<double> interval(kRate / 1e9);  // Poisson arrivals
    struct Writer {
        double due = 0, ready = 0;  // the rate's schedule; the earliest after the last completion
        std::uint64_t done = 0, arrival = 0;
        bool in_service = false;
    };
    std::vector<Writer> w(kWriters);
    for (auto& x : w) x.due = interval(rng);
    double backlog = 0, speed_sum = 0, served = 0;
    int speed_n = 0;
    std::uint64_t next_tick = kSec;
    for (;;) {
        // The next event: a completion, a send, or the controller's tick.
        int who = -1;
        bool completion = false;
        std::uint64_t at = next_tick;
        for (int i = 0; i < kWriters; ++i) {
            const auto t = w[i].in_service ? w[i].done : static_cast<std::uint64_t>(std::max(w[i].due, w[i].ready));
            if (t < at) at = t, who = i, completion = w[i].in_service;
        }
        if (at >= kEnd) break;
        clock.set_ns(at);
        const std::uint64_t stream = same_stream ? 1 : 100 + static_cast<std::uint64_t>(who);
        if (who < 0) {
            const double drained = std::min(backlog, ctl.background_speed() * kDrainBytesPerS);
            backlog -= drained;
            ctl.tick(static_cast<std::uint64_t>(backlog / kRequestBytes), static_cast<std::uint64_t>(backlog),
                     static_cast<std::uint64_t>(drained), 0);
            if (at > kEnd / 2) speed_sum += ctl.background_speed(), ++speed_n;
            next_tick += kSec;
        } else if (completion) {
            Writer& x = w[who];
            ctl.monitor().request_finished(x.arrival, static_cast<std::uint64_t>(kRequestBytes), stream);
            x.in_service = false;
            x.due += interval(rng);
            x.ready = static_cast<double>(at) + 10'000 + turnaround(rng);
            backlog += kRequestBytes;
            served += 1;
        } else {
            Writer& x = w[who];
            x.arrival = ctl.monitor().request_started(stream);
            x.done = at + static_cast<std::uint64_t>(400'000 * (1 + ctl.background_speed()));
            x.in_service = true;
        }
    }
    *backlog_at_end = backlog;
    *served_share = served / (kWriters * kRate * 60);
    return speed_n > 0 ? speed_sum / speed_n : 0;
}

}  // namespace

TEST_CASE("spare capacity: writers of their own files in service together are no queue, and leave the pass "
          "running",
          "[control][spare]") {
    double backlog = 0, served = 0;
    const double speed = independent_writers(false, &backlog, &served);
    INFO("mean speed " << speed << ", backlog at the end " << backlog << ", served " << served << " of offered");
    CHECK(speed > 0.5);
    CHECK(served >= 0.97);
    CHECK(backlog < 2 * 2000 * kRequestBytes);  // drained at each tick: the last second's writes
    // The same requests as one stream's are a queue whenever three meet:
    // the pass yields more to them.
    double one_backlog = 0, one_served = 0;
    const double one_speed = independent_writers(true, &one_backlog, &one_served);
    INFO("as one stream: mean speed " << one_speed);
    CHECK(one_speed < speed);
}

TEST_CASE("spare capacity: a foreground that returns after idleness pauses the pass at once, until the next tick "
          "measures it; a stray write does not",
          "[control][spare]") {
    ManualClock clock(0);
    ModeController ctl(&clock, ControlConfig{}, ModeController::Setting::kDeferred, nullptr);
    auto write_at = [&](std::uint64_t t, std::uint64_t service) {
        clock.set_ns(t);
        const std::uint64_t a = ctl.monitor().request_started(3);
        clock.set_ns(t + service);
        ctl.monitor().request_finished(a, 4096, 3);
    };
    clock.set_ns(2 * kSec);
    ctl.tick(0, 0, 0);
    REQUIRE(ctl.background_speed() == 1.0);
    REQUIRE(std::string(ctl.throttle_regime()) == "foreground idle");
    write_at(2 * kSec + 100 * kMs, 20'000);  // one stray write
    CHECK(ctl.background_speed() == 1.0);
    // A saturating writer starts: within its first requests the pass pauses.
    std::uint64_t t = 2 * kSec + 200 * kMs;
    for (std::uint64_t i = 0; i < ModeController::kReturningRequests; ++i, t += 25'000) write_at(t, 15'000);
    CHECK(ctl.background_speed() == 0.0);
    CHECK(std::string(ctl.throttle_regime()) == "foreground returning");
    for (; t < 3 * kSec; t += 25'000) write_at(t, 15'000);
    clock.set_ns(3 * kSec);
    ctl.tick(0, 0, 0);
    CHECK(ctl.background_speed() < 0.5);  // measured: held, backed off
    CHECK(std::string(ctl.throttle_regime()) == "foreground held");
    // A light load that returns gets the pass back at the next tick.
    clock.set_ns(5 * kSec);
    ctl.tick(0, 0, 0);  // idle again
    REQUIRE(ctl.background_speed() == 1.0);
    t = 5 * kSec;
    for (int i = 0; i < 1000; ++i, t += kMs) write_at(t, 20'000);  // 1 000/s
    CHECK(ctl.background_speed() == 0.0);
    clock.set_ns(t);
    ctl.tick(0, 0, 0);
    CHECK(ctl.background_speed() > 0.3);  // from the integral a saturating load left near 0
    CHECK(std::string(ctl.throttle_regime()) == "spare capacity");
}

TEST_CASE("spare capacity: policy=hiods's throttle keeps full speed until its tick", "[control][spare]") {
    ManualClock clock(0);
    ControlConfig cfg;
    cfg.spare_capacity = false;
    ModeController ctl(&clock, cfg, ModeController::Setting::kDeferred, nullptr);
    clock.set_ns(2 * kSec);
    ctl.tick(0, 0, 0);
    for (std::uint64_t i = 0; i < 2 * ModeController::kReturningRequests; ++i) {
        clock.set_ns(2 * kSec + i * 25'000);
        ctl.monitor().request_finished(ctl.monitor().request_started(), 4096);
    }
    CHECK(ctl.background_speed() == 1.0);
}
