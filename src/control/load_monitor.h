// LoadMonitor: counts requests into IntervalSamples; MeasuredRequest times
// one request.
// Thread-safety: as each class says.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "control/interval_sample.h"
#include "hiodsfs/clock.h"
#include "hiodsfs/control.h"

namespace hiodsfs {

// Counts write requests. request_started/finished are called concurrently
// from FUSE worker threads: they are a handful of relaxed atomics, no lock.
// take_sample() is called by one thread at a time (the controller's); the
// counters are swapped one by one, so a request racing with it may land in
// either interval, never in both or neither.
class LoadMonitor {
public:
    LoadMonitor(Clock* clock, const ControlConfig& cfg);
    LoadMonitor(const LoadMonitor&) = delete;
    LoadMonitor& operator=(const LoadMonitor&) = delete;

    // stream names what the request belongs to (its inode): requests of one
    // stream in service together are a queue, those of several are not.
    std::uint64_t request_started(std::uint64_t stream = 0);  // returns the arrival time
    // arrival_ns is what request_started returned; bytes is the request's
    // payload (0 is fine for a failed write, which still took service time).
    void request_finished(std::uint64_t arrival_ns, std::uint64_t bytes, std::uint64_t stream = 0);
    IntervalSample take_sample();  // closes the interval [last take, now)

    // Addition: requests started and not yet finished.
    std::uint64_t in_flight() const;
    // Requests that arrived since the last take_sample().
    std::uint64_t arrivals_since_sample() const { return arrivals_.load(std::memory_order_relaxed); }

private:
    Clock* clock_;
    const std::uint64_t stress_gap_ns_, held_gap_ns_;
    std::atomic<std::uint64_t> interval_start_ns_;
    std::atomic<std::uint64_t> ops_{0}, bytes_{0}, arrivals_{0}, stressed_{0}, held_{0}, busy_ns_{0};
    std::atomic<std::uint64_t> last_arrival_ns_{0}, last_finish_ns_{0};
    std::atomic<std::uint64_t> in_flight_{0};
    // Requests in service per stream, hashed: two streams sharing a slot
    // read as one, which can only count more requests held.
    static constexpr std::size_t kStreamSlots = 64;
    std::array<std::atomic<std::uint32_t>, kStreamSlots> stream_in_flight_{};
    // And each slot's last completion (the held gap is measured from it).
    std::array<std::atomic<std::uint64_t>, kStreamSlots> stream_last_finish_ns_{};
};

// One request, measured from construction to destruction, whatever path
// returns: its payload is `bytes`, or what *done holds when it ends (a read's
// bytes returned).
class MeasuredRequest {
public:
    MeasuredRequest(LoadMonitor& m, std::uint64_t stream, std::uint64_t bytes)
        : m_(m), stream_(stream), arrival_(m.request_started(stream)), bytes_(bytes) {}
    MeasuredRequest(LoadMonitor& m, std::uint64_t stream, const std::size_t* done)
        : m_(m), stream_(stream), arrival_(m.request_started(stream)), done_(done) {}
    MeasuredRequest(const MeasuredRequest&) = delete;
    MeasuredRequest& operator=(const MeasuredRequest&) = delete;
    ~MeasuredRequest() { m_.request_finished(arrival_, done_ != nullptr ? *done_ : bytes_, stream_); }

private:
    LoadMonitor& m_;
    const std::uint64_t stream_;
    const std::uint64_t arrival_;
    const std::uint64_t bytes_ = 0;
    const std::size_t* const done_ = nullptr;
};

}  // namespace hiodsfs
