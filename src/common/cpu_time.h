// The calling thread's CPU time, for figures that should not count the
// time a busy machine gives to other threads (benchmarks, CPU per GiB).
// Thread-safety: of the calling thread only.
#pragma once

#include <time.h>

namespace hiodsfs {

inline double thread_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace hiodsfs
