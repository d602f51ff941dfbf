// hiodsfs: mounts a deduplicating store with FUSE. See daemon.h.
#include "fuse/daemon.h"

int main(int argc, char** argv) {
    return hiodsfs::fuse::run_daemon(argc, argv, &hiodsfs::Engine::open);
}
