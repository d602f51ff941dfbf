// LogLimiter: bounds the repeats of one log line. The same line again
// within a window is counted, not written; the next line written says how
// many were held back. The daemon logs every EIO it answers, and an
// application that retries a failing fsync in a loop (the cluster away,
// a dying disk) would otherwise fill the log with one line.
// Thread-safety: admit() may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace hiodsfs {

class LogLimiter {
public:
    using Clock = std::chrono::steady_clock;
    explicit LogLimiter(Clock::duration window = std::chrono::seconds(10)) : window_(window) {}

    // Whether to write `line` now. When it is, *held is how many lines were
    // held back since the last one written (repeats of that one).
    bool admit(const std::string& line, Clock::time_point now, std::uint64_t* held);

private:
    const Clock::duration window_;
    std::mutex mu_;
    std::string last_;
    Clock::time_point last_at_{};
    std::uint64_t held_ = 0;
};

}  // namespace hiodsfs
