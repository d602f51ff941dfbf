// Names the calling thread, as top -H, perf, gdb and /proc/PID/task/*/comm
// show it, so that a profile says which of the daemon's threads does what.
// Linux keeps 15 bytes of a name; longer ones are cut there.
#pragma once

namespace hiodsfs {

void name_this_thread(const char* name);

}  // namespace hiodsfs
