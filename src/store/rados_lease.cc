#include "store/rados_lease.h"

#include <algorithm>

namespace hiodsfs {

RadosLease::Clock::time_point RadosLease::next_renewal(Clock::time_point now, bool failed) const {
    const Clock::time_point due = failed ? now + kRetry : held_until() - lease_ + lease_ / 4;
    return std::min(due, last_start());
}

}  // namespace hiodsfs
