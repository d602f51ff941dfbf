// expect: refused
// A tool never reaches into the daemon: what they share is in cli/.
#include "fuse/daemon.h"
