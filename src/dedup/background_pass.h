// BackgroundPass: the deferred-deduplication worker. It takes dirty records
// (file ranges written raw in deferred mode) oldest first, in batches;
// merges the ranges of each file; and has a oneTBB worker pool re-chunk and
// deduplicate the files of a batch in parallel, one file per task. A file
// that fails is the target's to set aside; the others' records finish. Between
// batches it sleeps as the throttle says: speed 1 runs flat out, speed s < 1
// stretches each batch's time by 1/s, speed 0 pauses.
// The work itself is the DedupTarget's (the engine): re-chunking reads the
// file's current content under the file's lock, so a record made stale by a
// later write, truncate, rename or unlink is harmless (skipped or redone on
// current data), never applied to the wrong bytes.
// Thread-safety: start/stop/wake/stats may be called from any thread.
#pragma once

#include <oneapi/tbb/global_control.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "dedup/paced_worker.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

struct DirtyRecord {
    std::uint64_t seq = 0;
    InodeId ino = 0;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    // Another record, queued and not yet taken, covers this one's range:
    // its sweep will re-chunk these bytes, so this record is finished
    // without a sweep of its own.
    bool covered = false;
};

class DedupTarget {
public:
    virtual ~DedupTarget() = default;
    // Up to max records, oldest first, not including records already taken
    // and not yet finished.
    virtual Status take_dirty(std::size_t max, std::vector<DirtyRecord>* out) = 0;
    // Re-chunks and deduplicates the current content of [offset, +length) of
    // ino exactly as the inline path would cut it.
    virtual Status rechunk(InodeId ino, std::uint64_t offset, std::uint64_t length) = 0;
    // Removes finished records (their work is done or stale).
    virtual Status finish_dirty(const std::vector<DirtyRecord>& done) = 0;
    // The re-chunking of one file's records failed (why): sets them aside,
    // out of the queue, so that the pass goes on with the rest; or, for a
    // failure that may pass by itself (a full disk, a stopped store),
    // returns an error and leaves them queued, to be taken again.
    virtual Status set_aside(const std::vector<DirtyRecord>& records, const Status& why) = 0;
};

class BackgroundPass {
public:
    // speed() returns the throttle's current background speed in [0, 1].
    BackgroundPass(DedupTarget* target, std::function<double()> speed, unsigned threads);
    ~BackgroundPass();  // stops; unfinished records stay for the next start
    BackgroundPass(const BackgroundPass&) = delete;
    BackgroundPass& operator=(const BackgroundPass&) = delete;

    // Before start(): the nice value the pass's steps run at, its TBB
    // workers' included (PacedWorker::set_nice).
    void set_nice(std::function<int()> nice) { worker_.set_nice(std::move(nice)); }
    void start() { worker_.start(); }
    void stop() { worker_.stop(); }
    // New records exist: wake the worker if it sleeps.
    void wake() { worker_.wake(); }
    // Bytes of dirty ranges processed since start (for the controller).
    std::uint64_t processed_bytes() const { return processed_bytes_.load(); }
    // The last error the pass met (ok if none); it retries after a pause.
    Status last_error() const { return worker_.last_error(); }

    // Processes one batch on `threads` workers: merges each file's ranges,
    // re-chunks them, then finishes the records, and sets aside those of
    // files that failed, each file on a worker at the caller's nice value.
    // *bytes is the merged size. An error: records that
    // stay queued (a failure that may pass), or one of the target's own.
    static Status process_batch(DedupTarget* target, const std::vector<DirtyRecord>& batch,
                                unsigned threads, std::uint64_t* bytes);
    // Runs batches in the calling thread until no record is left.
    static Status run_until_idle(DedupTarget* target, unsigned threads);

private:
    // One batch, for the worker: *did_work is false when none was left.
    Status step(bool* did_work);

    DedupTarget* target_;
    unsigned threads_;
    std::function<double()> speed_;
    std::atomic<std::uint64_t> processed_bytes_{0};
    PacedWorker worker_;  // last: its thread calls step() on the members above
};

// oneTBB starts worker threads for the pass's pools and keeps them past
// every object of ours; when the last user leaves it ends them without
// waiting, so they may still be exiting as the process does (LeakSanitizer
// then reports the per-thread state OpenSSL frees at a thread's exit).
// Made before the first pool, join() waits until they have exited. It
// returns false at once if another WorkerThreads is alive (the last one
// joins); it waits for any other thread still inside a pool.
class WorkerThreads {
public:
    WorkerThreads() : handle_(oneapi::tbb::attach{}) {}
    bool join() { return !handle_ || oneapi::tbb::finalize(handle_, std::nothrow); }

private:
    oneapi::tbb::task_scheduler_handle handle_;
};

}  // namespace hiodsfs
