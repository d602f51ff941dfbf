// Reclaimer: the background thread that gives space back. It repeatedly asks
// its ReclaimTarget (the engine) for one bounded step of reclaim work (free
// part of a deleted file, or copy one batch of a segment being compacted)
// and paces itself like the deduplication pass: speed 1 runs flat out, speed
// s < 1 rests t(1/s - 1) after a step that took t, speed 0 pauses. With
// nothing to do it sleeps until woken (a large file was deleted) or until a
// poll interval passes (segments become mostly dead as data is overwritten,
// without anyone telling it).
// Thread-safety: start/stop/wake/last_error may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <utility>

#include "dedup/paced_worker.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

class ReclaimTarget {
public:
    virtual ~ReclaimTarget() = default;
    // Does one bounded piece of reclaim work; *did_work is false when there
    // was nothing to do.
    virtual Status reclaim_step(bool* did_work) = 0;
};

class Reclaimer : public PacedWorker {
public:
    // speed() returns the throttle's current background speed in [0, 1].
    Reclaimer(ReclaimTarget* target, std::function<double()> speed,
              std::chrono::milliseconds idle_poll = std::chrono::milliseconds(1000))
        : PacedWorker("reclaim", [target](bool* did_work) { return target->reclaim_step(did_work); },
                      std::move(speed), idle_poll) {}
};

}  // namespace hiodsfs
