// The calling thread's CPU priority (its nice value). Background work (the
// deduplication pass, compaction, dictionary training, and the helpers
// while they work for them) runs niced, so the scheduler serves the
// foreground's requests first and gives the background what they leave:
// spare CPU, without a signal that CPU contention itself could distort.
// Linux keeps a nice value per thread (setpriority on a thread id).
// Thread-safety: each call reads or changes the calling thread only.
#pragma once

namespace hiodsfs {

// Sets the calling thread's nice value (0 .. 19); a no-op when it has it
// already. Returns false when the kernel refuses: an unprivileged daemon
// may raise its nice value but not lower it again, so its background
// threads stay niced (a refusal is remembered and not tried again).
bool set_thread_nice(int nice);

// The nice value this thread last set here (0 if it never did).
int thread_nice();

}  // namespace hiodsfs
