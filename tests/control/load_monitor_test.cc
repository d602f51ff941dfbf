// LoadMonitor: what an interval's requests add up to (arrivals, held and
// stressed requests, busy time), per file and overall.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "control/manual_clock.h"
#include "hiodsfs/clock.h"
#include "control/load_monitor.h"
#include "hiodsfs/control.h"
#include "ns_units.h"

using namespace hiodsfs;

namespace {

using test::kMs;

// One request arriving at `at` and taking `service` ns.
void request(ManualClock& clock, LoadMonitor& m, std::uint64_t at, std::uint64_t service,
             std::uint64_t bytes = 4096) {
    clock.set_ns(at);
    const std::uint64_t arrival = m.request_started();
    clock.set_ns(at + service);
    m.request_finished(arrival, bytes);
}

}  // namespace

TEST_CASE("monitor: a request is in stress when it arrives within the gap of the last completion") {
    ManualClock clock(1000 * kMs);
    ControlConfig cfg;  // 3 ms gap
    LoadMonitor m(&clock, cfg);

    request(clock, m, 1000 * kMs, 1 * kMs);  // first request ever: nothing before it
    request(clock, m, 1003 * kMs, 1 * kMs);  // 2 ms after the completion at 1001: stress
    request(clock, m, 1007 * kMs, 1 * kMs);  // exactly 3 ms after 1004: stress (inclusive)
    request(clock, m, 1012 * kMs, 1 * kMs);  // 4 ms after 1008: calm
    clock.set_ns(1100 * kMs);
    IntervalSample s = m.take_sample();
    CHECK(s.start_ns == 1000 * kMs);
    CHECK(s.end_ns == 1100 * kMs);
    CHECK(s.ops == 4);
    CHECK(s.arrivals == 4);
    CHECK(s.stressed == 2);
    CHECK(s.bytes == 4 * 4096);
    CHECK(s.busy_ns == 4 * kMs);
    CHECK(s.last_arrival_ns == 1012 * kMs);

    // Arriving while another request is in flight is stress whatever the gap.
    clock.set_ns(1200 * kMs);
    const std::uint64_t a1 = m.request_started();
    clock.set_ns(1250 * kMs);
    const std::uint64_t a2 = m.request_started();
    CHECK(m.in_flight() == 2);
    clock.set_ns(1300 * kMs);
    m.request_finished(a1, 100);
    clock.set_ns(1400 * kMs);
    s = m.take_sample();  // a2 still in flight: counted as an arrival, not yet as an op
    CHECK(s.start_ns == 1100 * kMs);
    CHECK(s.arrivals == 2);
    CHECK(s.stressed == 1);
    CHECK(s.ops == 1);
    CHECK(s.busy_ns == 100 * kMs);
    clock.set_ns(1450 * kMs);
    m.request_finished(a2, 100);
    clock.set_ns(1500 * kMs);
    s = m.take_sample();
    CHECK(s.arrivals == 0);
    CHECK(s.ops == 1);
    CHECK(s.busy_ns == 200 * kMs);
    CHECK(s.last_arrival_ns == 1250 * kMs);  // kept across intervals
    CHECK(m.in_flight() == 0);

    // An interval with nothing in it.
    clock.set_ns(2500 * kMs);
    s = m.take_sample();
    CHECK(s.ops == 0);
    CHECK(s.stress_fraction() == 0);
    CHECK(foreground_idle(s, cfg));
}

TEST_CASE("monitor: a request is held when it arrives within the held gap of its stream's last completion, or "
          "beside two others of its stream (a queue), not right after or beside those of other streams",
          "[control][spare]") {
    constexpr std::uint64_t kUs = 1000;
    ManualClock clock(1000 * kMs);
    ControlConfig cfg;  // 20 us
    LoadMonitor m(&clock, cfg);
    request(clock, m, 1000 * kMs, 12 * kUs);             // the first ever: not held
    request(clock, m, 1000 * kMs + 27 * kUs, 12 * kUs);  // 15 us after the completion: held
    request(clock, m, 1000 * kMs + 59 * kUs, 12 * kUs);  // exactly 20 us after it: held (inclusive)
    request(clock, m, 1000 * kMs + 92 * kUs, 12 * kUs);  // 21 us after: not held, though in HIODS's stress
    // One stream: a queue forms when a third request joins two in service.
    clock.set_ns(1000 * kMs + 200 * kUs);
    const std::uint64_t a1 = m.request_started(5);  // 96 us after: not held
    clock.set_ns(1000 * kMs + 500 * kUs);
    const std::uint64_t a2 = m.request_started(5);  // beside a1, 396 us after the last completion: not held
    clock.set_ns(1000 * kMs + 700 * kUs);
    const std::uint64_t a3 = m.request_started(5);  // beside a1 and a2: a queue forming, held
    m.request_finished(a1, 4096, 5);
    m.request_finished(a2, 4096, 5);
    m.request_finished(a3, 4096, 5);
    // Three writers of their own files, in service together: no queue.
    clock.set_ns(1000 * kMs + 900 * kUs);
    const std::uint64_t b1 = m.request_started(11);
    clock.set_ns(1000 * kMs + 950 * kUs);
    const std::uint64_t b2 = m.request_started(12);
    clock.set_ns(1000 * kMs + 990 * kUs);
    const std::uint64_t b3 = m.request_started(13);
    m.request_finished(b1, 4096, 11);
    m.request_finished(b2, 4096, 12);
    m.request_finished(b3, 4096, 13);
    // The gap is measured from the request's own stream's last completion:
    // a writer that comes 5 us after another's is not held, one that comes
    // 5 us after its own is.
    clock.set_ns(1000 * kMs + 995 * kUs);
    const std::uint64_t c1 = m.request_started(14);
    clock.set_ns(1000 * kMs + 1007 * kUs);
    m.request_finished(c1, 4096, 14);
    clock.set_ns(1000 * kMs + 1012 * kUs);
    m.request_finished(m.request_started(14), 4096, 14);
    clock.set_ns(1100 * kMs);
    const IntervalSample s = m.take_sample();
    CHECK(s.arrivals == 12);
    CHECK(s.held == 4);
    CHECK(s.stressed == 11);  // HIODS's stress counts any arrival beside or right after another
    CHECK(s.held_fraction() == Approx(4.0 / 12));
    CHECK(m.in_flight() == 0);
}

TEST_CASE("monitor: concurrent writers lose no request") {
    ControlConfig cfg;
    LoadMonitor m(Clock::system(), cfg);
    constexpr int kThreads = 4, kPerThread = 20000;
    std::vector<std::thread> threads;
    std::uint64_t total_ops = 0, total_bytes = 0, total_arrivals = 0;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&m] {
            for (int i = 0; i < kPerThread; ++i) m.request_finished(m.request_started(), 10);
        });
    }
    // Take samples while the writers run: every request lands in exactly one.
    for (int i = 0; i < 50; ++i) {
        const IntervalSample s = m.take_sample();
        total_ops += s.ops;
        total_bytes += s.bytes;
        total_arrivals += s.arrivals;
        std::this_thread::yield();
    }
    for (auto& t : threads) t.join();
    const IntervalSample s = m.take_sample();
    total_ops += s.ops;
    total_bytes += s.bytes;
    total_arrivals += s.arrivals;
    CHECK(total_ops == kThreads * kPerThread);
    CHECK(total_arrivals == kThreads * kPerThread);
    CHECK(total_bytes == 10ull * kThreads * kPerThread);
    CHECK(m.in_flight() == 0);
}

TEST_CASE("a measured request counts when it ends, on whatever path it returns", "[control]") {
    ManualClock clock(1000);
    ControlConfig cfg;
    LoadMonitor m(&clock, cfg);
    {
        const MeasuredRequest w(m, 7, std::uint64_t{4096});
        CHECK(m.in_flight() == 1);
        clock.advance_ns(2 * kMs);
    }
    std::size_t got = 0;
    {
        const MeasuredRequest r(m, 7, &got);
        clock.advance_ns(kMs);
        got = 100;  // what a read returned, known only at its end
    }
    CHECK(m.in_flight() == 0);
    const IntervalSample s = m.take_sample();
    CHECK(s.ops == 2);
    CHECK(s.bytes == 4196);
    CHECK(s.busy_ns == 3 * kMs);
}
