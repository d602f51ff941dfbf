// The hiodsfs daemon's life: options, mount point check, fork into the
// background (before the engine starts any thread, and with the parent
// waiting so that every start-up error is one line on the terminal and a
// non-zero exit), engine, mount, request loop, unmount, engine close.
// Thread-safety: run_daemon is called once, from main.
#pragma once

#include <memory>

#include "hiodsfs/engine.h"

namespace hiodsfs::fuse {

using EngineOpener = Status (*)(const EngineOptions& options, std::unique_ptr<Engine>* out);

// Runs the hiodsfs command line; returns the process exit code. The opener
// is Engine::open in the daemon and a test double in tests.
int run_daemon(int argc, char** argv, EngineOpener open_engine);

}  // namespace hiodsfs::fuse
