#include "common/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace hiodsfs {

namespace {
thread_local int current_nice = 0;
thread_local int lowest_refused = -1;  // a nice value the kernel would not let us go down to
}  // namespace

bool set_thread_nice(int nice) {
    nice = std::clamp(nice, 0, 19);
    if (nice == current_nice) return true;
    if (nice <= lowest_refused) return false;
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    if (::setpriority(PRIO_PROCESS, tid, nice) != 0) {
        if (nice < current_nice) lowest_refused = std::max(lowest_refused, nice);
        return false;
    }
    current_nice = nice;
    return true;
}

int thread_nice() { return current_nice; }

}  // namespace hiodsfs
