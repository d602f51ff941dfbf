// EngineHooks: what tests inject into an engine (faults, pauses, a fixed
// background speed), kept out of the public EngineOptions: a program that
// links libhiodsfs never sets them. Tests open an engine with them through
// open_engine_with_hooks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hiodsfs/engine.h"

namespace hiodsfs {

struct EngineHooks {
    // See MetaStoreOptions::commit_fault and on_publish.
    std::function<int()> commit_fault;
    std::function<void()> on_publish;
    // Called as held-back writes of an inode are applied; a non-zero
    // errno fails them as a failed metadata write would.
    std::function<int(InodeId)> held_write_fault;
    // The background speed the pass and the reclaimer go by, in place of
    // the controller's.
    std::function<double()> background_speed;
    // Dead bytes below which reclaim is never forced (0: the engine's
    // kDeadSpaceFloor), so a test need not write hundreds of MiB.
    std::uint64_t dead_space_floor = 0;
};

// Engine::open, with hooks.
Status open_engine_with_hooks(const EngineOptions& options, const EngineHooks& hooks,
                              std::unique_ptr<Engine>* out);

// For crash tests: drops everything not yet committed (buffered tails, the
// open metadata group) as a crash would, and closes the store. e is an
// engine Engine::open or open_engine_with_hooks made.
void abandon_engine(Engine& e);

}  // namespace hiodsfs
