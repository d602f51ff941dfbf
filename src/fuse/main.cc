// hiodsfs: mounts a deduplicating store with FUSE. See daemon.h.
#include <malloc.h>

#include <cstdlib>

#include "fuse/daemon.h"

int main(int argc, char** argv) {
    // glibc gives each thread that allocates an arena of its own (up to 8
    // per core), and each keeps megabytes it freed (request buffers, and
    // before 0.3.0 LMDB's nested transactions). Two arenas halved the
    // daemon's RssAnon at 2 Mi chunks (128 -> 59 MiB) at no cost in CPU
    // (docs/benchmarks.md), measured while every request took the metadata
    // lock; reads have not since (meta_store.h), which no run has re-measured
    // here. A MALLOC_ARENA_MAX in the environment is left to rule.
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
    return hiodsfs::fuse::run_daemon(argc, argv, &hiodsfs::Engine::open);
}
