// expect: refused
// The vfs is below the daemon's adapter.
#include "fuse/daemon.h"
