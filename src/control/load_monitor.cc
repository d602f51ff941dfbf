#include "control/load_monitor.h"

namespace hiodsfs {

namespace {

// Raises a to at least v (an atomic max).
void raise_to(std::atomic<std::uint64_t>& a, std::uint64_t v) {
    std::uint64_t cur = a.load(std::memory_order_relaxed);
    while (cur < v && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
}

// Takes one from a, unless it is zero.
template <typename T>
void lower_to_zero(std::atomic<T>& a) {
    T cur = a.load(std::memory_order_relaxed);
    while (cur > 0 && !a.compare_exchange_weak(cur, cur - 1, std::memory_order_relaxed)) {
    }
}

}  // namespace

LoadMonitor::LoadMonitor(Clock* clock, const ControlConfig& cfg)
    : clock_(clock),
      stress_gap_ns_(cfg.stress_gap_us * 1000),
      held_gap_ns_(cfg.held_gap_us * 1000),
      interval_start_ns_(clock->now_ns()) {}

std::uint64_t LoadMonitor::request_started(std::uint64_t stream) {
    const std::uint64_t now = clock_->now_ns();
    const std::uint64_t busy = in_flight_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t slot = stream % kStreamSlots;
    const std::uint32_t same_stream = stream_in_flight_[slot].fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t last_finish = last_finish_ns_.load(std::memory_order_relaxed);
    const std::uint64_t own_finish = stream_last_finish_ns_[slot].load(std::memory_order_relaxed);
    // Arriving while another request is in flight means the daemon was never
    // idle in between: a gap of zero. A completion that raced past our clock
    // read (last_finish > now) is a negative gap, stressed as well.
    const bool stressed = busy > 0 || (last_finish != 0 && now <= last_finish + stress_gap_ns_);
    // Held: arriving within held_gap of its own stream's last completion
    // (its application sent it the moment the last came back), or with two
    // or more others of its stream in service (a queue is forming, as when
    // the kernel's writeback keeps a stream of large writes outstanding).
    // Not by other streams: independent writers overlap, and complete just
    // before another's arrival, by chance at any load (four rate-limited
    // writers at 10 000 requests/s in all: one arrival in five falls within
    // 20 us of someone's completion), more so while the pass runs, and the
    // daemon serves them at once (stress counts both).
    const bool held = same_stream >= 2 || (own_finish != 0 && now <= own_finish + held_gap_ns_);
    arrivals_.fetch_add(1, std::memory_order_relaxed);
    if (stressed) stressed_.fetch_add(1, std::memory_order_relaxed);
    if (held) held_.fetch_add(1, std::memory_order_relaxed);
    raise_to(last_arrival_ns_, now);
    return now;
}

void LoadMonitor::request_finished(std::uint64_t arrival_ns, std::uint64_t bytes, std::uint64_t stream) {
    const std::uint64_t now = clock_->now_ns();
    ops_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    busy_ns_.fetch_add(now > arrival_ns ? now - arrival_ns : 0, std::memory_order_relaxed);
    raise_to(last_finish_ns_, now);
    const std::size_t slot = stream % kStreamSlots;
    raise_to(stream_last_finish_ns_[slot], now);
    // Never below zero even if a caller finishes a request it did not start.
    lower_to_zero(in_flight_);
    lower_to_zero(stream_in_flight_[slot]);
}

IntervalSample LoadMonitor::take_sample() {
    IntervalSample s;
    s.end_ns = clock_->now_ns();
    s.start_ns = interval_start_ns_.exchange(s.end_ns, std::memory_order_relaxed);
    if (s.start_ns > s.end_ns) s.start_ns = s.end_ns;  // a clock set backwards in a test
    s.ops = ops_.exchange(0, std::memory_order_relaxed);
    s.bytes = bytes_.exchange(0, std::memory_order_relaxed);
    s.arrivals = arrivals_.exchange(0, std::memory_order_relaxed);
    s.stressed = stressed_.exchange(0, std::memory_order_relaxed);
    s.held = held_.exchange(0, std::memory_order_relaxed);
    s.busy_ns = busy_ns_.exchange(0, std::memory_order_relaxed);
    s.last_arrival_ns = last_arrival_ns_.load(std::memory_order_relaxed);
    return s;
}

std::uint64_t LoadMonitor::in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

}  // namespace hiodsfs
