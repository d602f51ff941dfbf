#include "dedup/background_pass.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "common/thread_priority.h"
#include "common/tsan_fork_join.h"

namespace hiodsfs {
namespace {
constexpr std::size_t kBatchRecords = 256;
// Below full speed a batch shrinks with the speed, to this many at least.
// The throttle's speed is a duty cycle (a batch, then a rest), and a whole
// batch of small records holds their files' locks for up to a second: at
// speed 0.05 a steady writer then lost whole seconds, one in twenty.
constexpr std::size_t kMinBatchRecords = 8;

std::size_t batch_records(double speed) {
    if (speed >= 1.0) return kBatchRecords;
    const auto n = static_cast<std::size_t>(static_cast<double>(kBatchRecords) * std::max(0.0, speed));
    return std::clamp(n, kMinBatchRecords, kBatchRecords);
}
// Idle polling: dirty records also arrive from writes made before a restart.
constexpr auto kIdleWait = std::chrono::milliseconds(200);

struct FileWork {
    InodeId ino = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // merged [start, end)
    Status result;
};
}  // namespace

BackgroundPass::BackgroundPass(DedupTarget* target, std::function<double()> speed, unsigned threads)
    : target_(target),
      threads_(std::max(1u, threads)),
      speed_(speed),
      worker_("dedup-pass", [this](bool* did_work) { return step(did_work); }, std::move(speed), kIdleWait) {}

BackgroundPass::~BackgroundPass() { stop(); }

Status BackgroundPass::process_batch(DedupTarget* target, const std::vector<DirtyRecord>& batch,
                                     unsigned threads, std::uint64_t* bytes_out) {
    // Merge each file's ranges so a file written in many requests is
    // re-chunked in one sweep, as inline mode would have cut it.
    std::map<InodeId, std::vector<std::pair<std::uint64_t, std::uint64_t>>> by_file;
    for (const auto& r : batch)
        if (!r.covered) by_file[r.ino].emplace_back(r.offset, r.offset + r.length);
    std::vector<FileWork> work;
    std::uint64_t bytes = 0;
    for (auto& [ino, ranges] : by_file) {
        std::sort(ranges.begin(), ranges.end());
        FileWork w;
        w.ino = ino;
        for (const auto& r : ranges) {
            if (!w.ranges.empty() && r.first <= w.ranges.back().second)
                w.ranges.back().second = std::max(w.ranges.back().second, r.second);
            else
                w.ranges.push_back(r);
        }
        for (const auto& r : w.ranges) bytes += r.second - r.first;
        work.push_back(std::move(w));
    }
    tbb::task_arena arena(static_cast<int>(std::max(1u, threads)));
    const int nice = thread_nice();
    auto rechunk_file = [&](std::size_t i) {
        set_thread_nice(nice);  // TBB's workers are the pass's: background when it is
        FileWork& w = work[i];
        for (const auto& [start, end] : w.ranges) {
            w.result = target->rechunk(w.ino, start, end - start);
            if (!w.result) return;
        }
    };
    ForkJoin fj;  // for ThreadSanitizer: TBB's hand-off is not instrumented
    fj.fork();
    // By index, as parallel_for_each does for a vector: its copies of our
    // iterators would be more objects TSan cannot see TBB hand over.
    arena.execute([&] { tbb::parallel_for(std::size_t{0}, work.size(), fj.wrap(rechunk_file)); });
    fj.join();
    *bytes_out = bytes;
    // One file's failure must not hold back the others' records: they are
    // finished, and the failing file's are the target's to set aside.
    std::map<InodeId, Status> failed;
    for (const auto& w : work)
        if (!w.result) failed.emplace(w.ino, w.result);
    std::vector<DirtyRecord> done;
    std::map<InodeId, std::vector<DirtyRecord>> failed_records;
    for (const auto& r : batch) {
        if (!r.covered && failed.count(r.ino) != 0)
            failed_records[r.ino].push_back(r);
        else
            done.push_back(r);
    }
    if (!done.empty()) HIODSFS_TRY(target->finish_dirty(done));
    Status left_queued;
    for (const auto& [ino, records] : failed_records) {
        Status st = target->set_aside(records, failed.at(ino));
        if (!st && left_queued) left_queued = st;
    }
    return left_queued;
}

Status BackgroundPass::run_until_idle(DedupTarget* target, unsigned threads) {
    for (;;) {
        std::vector<DirtyRecord> batch;
        HIODSFS_TRY(target->take_dirty(kBatchRecords, &batch));
        if (batch.empty()) return Status::ok();
        std::uint64_t bytes = 0;
        HIODSFS_TRY(process_batch(target, batch, threads, &bytes));
    }
}

Status BackgroundPass::step(bool* did_work) {
    std::vector<DirtyRecord> batch;
    HIODSFS_TRY(target_->take_dirty(batch_records(speed_()), &batch));
    *did_work = !batch.empty();
    if (batch.empty()) return Status::ok();
    std::uint64_t bytes = 0;
    Status st = process_batch(target_, batch, threads_, &bytes);
    processed_bytes_ += bytes;
    return st;
}

}  // namespace hiodsfs
