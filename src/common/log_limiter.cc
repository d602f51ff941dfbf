#include "common/log_limiter.h"

namespace hiodsfs {

bool LogLimiter::admit(const std::string& line, Clock::time_point now, std::uint64_t* held) {
    std::lock_guard lock(mu_);
    if (line == last_ && now - last_at_ < window_) {
        ++held_;
        return false;
    }
    *held = held_;
    held_ = 0;
    last_ = line;
    last_at_ = now;
    return true;
}

}  // namespace hiodsfs
