// Mode controller and background throttle (see docs/controller.md).
//
// hiodsfs deduplicates either inline (on the write path) or deferred (data
// written raw, a background pass deduplicates later). In the hybrid setting
// a ModeController picks the mode every interval so that a write-rate goal
// is met, following HIODS (Univ. of Minho, 2021):
//   - LoadMonitor counts write requests (called by FUSE worker threads);
//   - ModePolicy turns one interval's IntervalSample into a mode decision;
//   - BackgroundThrottle is a PID controller that paces the background pass
//     so that it does not take the foreground's throughput.
// Time comes from a Clock, so tests replay traces with a ManualClock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hiodsfs/clock.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

enum class WriteMode : std::uint8_t { kInline = 0, kDeferred = 1 };
// "inline" or "deferred".
const char* to_string(WriteMode mode);

// Controller settings. A plain value; validate() before use.
struct ControlConfig {
    double target_ops = 0;  // write ops/s goal; 0 = no goal (hybrid stays inline)
    // Optional byte-rate goal (0 = none); the goal is missed if either is missed.
    double target_bytes_per_s = 0;
    std::uint64_t interval_ms = 1000;  // sampling interval
    std::uint64_t stress_gap_us = 3000;
    double stress_ratio = 0.9;
    std::uint64_t recency_ms = 1000;
    unsigned switch_after = 3;  // N consecutive intervals
    // Throttle (PID on the normalised error (rate - goal) / goal, output =
    // background speed in [0, 1]). The plant gain g (share of the goal the
    // foreground loses when the background goes from paused to full speed)
    // is typically 0.2..1; with a one-interval measurement delay the loop is
    // stable for g < 2 / (2 kp + ki dt), i.e. g < 3.3 at the defaults (see
    // docs/controller.md for the derivation).
    double kp = 0.1;  // small: P acts on last interval's figure, so a large kp rings
    double ki = 0.4;  // per second: within 2 % of a step in ~10 intervals at g = 1
    double kd = 0.0;  // off: ops/s is noisy interval to interval and the plant has no inertia
    // Max increase of background speed per second while the foreground is
    // active (in particular after a switch back to inline, when the
    // throttle restarts from a pause): 0.05/s reaches full speed in 20 s, and
    // one interval's step (5 % of full speed) costs at most ~5 % of the goal
    // at g = 1, which the PID sees and stops before it adds up.
    double ramp_per_s = 0.05;
    // Addition, for the capacity policy: it counts an interval as saturated
    // when the daemon was busy at least (1 - capacity_margin) of it, returns
    // to inline only when the load is at most (1 - capacity_margin) of the
    // inline capacity it measured, and counts deferred as a gain only if it
    // makes a request at least capacity_margin cheaper than inline.
    double capacity_margin = 0.1;

    // EINVAL with a message naming the setting, its allowed range and the
    // value given.
    Status validate() const;
};

// One interval's measurements (also what hiodsfs-stat shows as history).
struct IntervalSample {
    std::uint64_t start_ns = 0, end_ns = 0;
    std::uint64_t ops = 0;  // write requests completed in the interval
    std::uint64_t bytes = 0;
    // Of the requests that arrived in the interval, those in stress: they
    // arrived within stress_gap of the previous completion, or while another
    // request was still in flight.
    std::uint64_t stressed = 0;
    std::uint64_t last_arrival_ns = 0;  // arrival time of the most recent request (0 = none ever)
    std::uint64_t busy_ns = 0;          // sum of request service times (for a capacity estimate)
    std::uint64_t backlog_records = 0, backlog_bytes = 0;  // filled in by the engine
    // Filled in by the engine: bytes the background pass processed.
    std::uint64_t background_bytes = 0;
    // Addition: requests that arrived in the interval (the base of
    // stress_fraction; stress is known at arrival, completion may fall in
    // the next interval).
    std::uint64_t arrivals = 0;

    double seconds() const;
    double ops_per_s() const;
    double bytes_per_s() const;
    // stressed / arrivals (ops if arrivals is 0), at most 1.
    double stress_fraction() const;
};

// HIODS's stress test: at least stress_ratio of the interval's requests were
// in stress and the last request arrived at most recency_ms before the end.
bool under_stress(const IntervalSample& s, const ControlConfig& cfg);
// No request arrived within recency_ms of the end of the interval.
bool foreground_idle(const IntervalSample& s, const ControlConfig& cfg);
// A goal is set and the interval's ops/s or bytes/s fell short of it.
bool goal_missed(const IntervalSample& s, const ControlConfig& cfg);
bool has_goal(const ControlConfig& cfg);

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

    std::uint64_t request_started();  // returns the arrival time
    // arrival_ns is what request_started returned; bytes is the request's
    // payload (0 is fine for a failed write, which still took service time).
    void request_finished(std::uint64_t arrival_ns, std::uint64_t bytes);
    IntervalSample take_sample();  // closes the interval [last take, now)

    // Addition: requests started and not yet finished.
    std::uint64_t in_flight() const;

private:
    Clock* clock_;
    const std::uint64_t stress_gap_ns_;
    std::atomic<std::uint64_t> interval_start_ns_;
    std::atomic<std::uint64_t> ops_{0}, bytes_{0}, arrivals_{0}, stressed_{0}, busy_ns_{0};
    std::atomic<std::uint64_t> last_arrival_ns_{0}, last_finish_ns_{0};
    std::atomic<std::uint64_t> in_flight_{0};
};

// One request, measured from construction to destruction, whatever path
// returns: its payload is `bytes`, or what *done holds when it ends (a read's
// bytes returned).
class MeasuredRequest {
public:
    MeasuredRequest(LoadMonitor& m, std::uint64_t bytes) : m_(m), arrival_(m.request_started()), bytes_(bytes) {}
    MeasuredRequest(LoadMonitor& m, const std::size_t* done) : m_(m), arrival_(m.request_started()), done_(done) {}
    MeasuredRequest(const MeasuredRequest&) = delete;
    MeasuredRequest& operator=(const MeasuredRequest&) = delete;
    ~MeasuredRequest() { m_.request_finished(arrival_, done_ != nullptr ? *done_ : bytes_); }

private:
    LoadMonitor& m_;
    const std::uint64_t arrival_;
    const std::uint64_t bytes_ = 0;
    const std::size_t* const done_ = nullptr;
};

// Decides the write mode from samples. Implementations: HiodsPolicy (the
// baseline, "hiods") and CapacityPolicy ("capacity", the default), which
// remembers the inline capacity and per-request costs it measured and so
// neither flaps on a load between inline's and deferred's capacity nor stays
// deferred when deferring does not make requests cheaper.
// Thread-safety: a policy is used by the controller thread only.
class ModePolicy {
public:
    virtual ~ModePolicy() = default;
    virtual const char* name() const = 0;
    // Returns the mode for the next interval; *reason is a short human
    // sentence when it changes (reason may be null).
    virtual WriteMode decide(const IntervalSample& s, WriteMode current, std::string* reason) = 0;
};
// name: "hiods" or "capacity" (kDefaultPolicy). On an unknown name returns
// null and sets *error to a message listing the known names.
std::unique_ptr<ModePolicy> make_policy(const std::string& name, const ControlConfig& cfg,
                                        std::string* error);
inline constexpr const char* kDefaultPolicy = "capacity";
// Addition: the names make_policy accepts, for option help texts.
std::vector<std::string> policy_names();

// PID controller pacing the background pass. Output: background speed in
// [0, 1] (1 = full speed, 0 = paused). While the goal is missed under stress
// it slows the background down; when the foreground is idle it runs at full
// speed; while the foreground is active the speed rises at most ramp_per_s
// per second, and a switch back to inline restarts it from 0 (the foreground
// takes on inline deduplication, so the old operating point is stale).
// Reads are foreground too: while they stream (under stress by the same
// test as writes, on their own sample) the background pauses whatever the
// goal, since a write-rate goal says nothing of reads and the pass's disk
// and CPU use would come out of theirs; the integral is kept for the writes.
// Output clamping plus integrator clamping keep it free of windup: a
// positive error integrates only as far as the upper limit (1, or the ramp)
// lets the output through, and the integral stays in [0, 1]. Without a goal
// there is nothing to protect: the error is +1.
// Thread-safety: not thread-safe; the controller serialises update() and
// publishes speed() through an atomic.
class BackgroundThrottle {
public:
    explicit BackgroundThrottle(const ControlConfig& cfg);
    // dt_s: the interval's length in seconds; reads: the same interval's
    // read requests, if counted. Returns the new speed.
    double update(const IntervalSample& s, WriteMode mode, double dt_s,
                  const IntervalSample* reads = nullptr);
    double speed() const;
    // Addition: why the last update set the speed, e.g. "goal missed".
    const char* regime() const;
    // Addition: the integral term (tests check it stays within [0, 1]).
    double integral() const;

private:
    ControlConfig cfg_;
    double speed_ = 1.0;
    double integral_ = 1.0;  // consistent with the initial full speed
    double prev_error_ = 0.0;
    bool prev_stressed_ = false;
    WriteMode prev_mode_ = WriteMode::kInline;
    bool have_mode_ = false;
    const char* regime_ = "start";
};

struct ControlEvent {
    std::uint64_t time_ns = 0;
    enum class Kind : std::uint8_t { kModeSwitch, kThrottle } kind = Kind::kModeSwitch;
    WriteMode mode = WriteMode::kInline;
    double ops_per_s = 0, bytes_per_s = 0, speed = 0;
    std::uint64_t backlog_records = 0, backlog_bytes = 0;
    std::string reason;
};

// Ties it together. Fixed settings (inline-only or deferred-only) never
// switch; hybrid asks the policy every tick.
// Thread-safety: mode(), background_speed(), mode_since_ns() are lock-free
// atomic reads for any thread; monitor() is safe for concurrent writers (see
// LoadMonitor); tick() is called by one controller thread (concurrent calls
// are serialised); events()/samples() copy under a mutex and may be called
// from any thread.
class ModeController {
public:
    enum class Setting { kInline, kDeferred, kHybrid };
    // policy may be null for fixed settings; a hybrid controller given null
    // uses kDefaultPolicy. cfg should have passed validate().
    ModeController(Clock* clock, const ControlConfig& cfg, Setting setting,
                   std::unique_ptr<ModePolicy> policy);
    ModeController(const ModeController&) = delete;
    ModeController& operator=(const ModeController&) = delete;

    LoadMonitor& monitor();
    // Read requests, counted apart so that they never enter the write-rate
    // figures the policy and the goal use; the throttle looks at both.
    LoadMonitor& read_monitor();
    WriteMode mode() const;           // atomic read, called on every write
    double background_speed() const;  // atomic read
    // Called every interval by the engine's controller thread with the
    // backlog figures; takes a sample, runs policy and throttle, records
    // events. Returns the sample.
    IntervalSample tick(std::uint64_t backlog_records, std::uint64_t backlog_bytes,
                        std::uint64_t background_bytes);
    // The last events (at most kMaxEvents) and samples (at most kMaxSamples),
    // oldest first, for hiodsfs-stat.
    std::vector<ControlEvent> events() const;
    std::vector<IntervalSample> samples() const;
    std::uint64_t mode_since_ns() const;

    // Additions.
    Setting setting() const;
    const char* policy_name() const;  // "" for fixed settings
    static constexpr std::size_t kMaxEvents = 256;
    static constexpr std::size_t kMaxSamples = 3600;  // an hour at 1 s
    // A throttle event is recorded when the speed moved more than this since
    // the last one, so the event ring shows trends rather than every tick.
    static constexpr double kThrottleEventStep = 0.1;

private:
    void record_event(ControlEvent ev);

    const ControlConfig cfg_;
    const Setting setting_;
    std::unique_ptr<ModePolicy> policy_;
    LoadMonitor monitor_;
    LoadMonitor read_monitor_;
    BackgroundThrottle throttle_;
    std::atomic<WriteMode> mode_;
    std::atomic<double> speed_;
    std::atomic<std::uint64_t> mode_since_ns_;
    std::mutex tick_mu_;  // serialises tick(); guards policy_, throttle_, last_event_speed_
    double last_event_speed_ = 1.0;
    mutable std::mutex history_mu_;  // guards events_, samples_
    std::deque<ControlEvent> events_;
    std::deque<IntervalSample> samples_;
};
const char* to_string(ModeController::Setting setting);

}  // namespace hiodsfs
