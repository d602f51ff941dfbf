// StreamTable (stream_table.h): the open write streams, by inode.
#include "engine/stream_table.h"

#include <thread>

namespace hiodsfs {

std::shared_ptr<Stream> StreamTable::get(InodeId ino) {
    std::lock_guard<std::mutex> l(mu_);
    auto& s = streams_[ino];
    if (!s) s = std::make_shared<Stream>();
    return s;
}

std::shared_ptr<Stream> StreamTable::find(InodeId ino) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = streams_.find(ino);
    if (it == streams_.end()) return nullptr;
    return it->second;
}

std::vector<std::pair<InodeId, std::shared_ptr<Stream>>> StreamTable::all() {
    std::lock_guard<std::mutex> l(mu_);
    return {streams_.begin(), streams_.end()};
}

void StreamTable::clear() {
    std::lock_guard<std::mutex> l(mu_);
    streams_.clear();
}

void StreamTable::drop(InodeId ino, bool file_gone) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = streams_.find(ino);
    // Copies are only made under mu_, so a count of one (the map's)
    // means nobody holds it and nobody can get it without this lock; its own
    // lock is then free, and taking it orders this read of `active` after
    // the last holder's writes. An active stream holds bytes not yet
    // chunked: it stays unless the file itself is gone.
    if (it == streams_.end() || it->second.use_count() != 1 || pinned_(ino)) return;
    std::unique_lock<std::mutex> sl(it->second->mu, std::try_to_lock);
    if (!sl.owns_lock() || (!file_gone && it->second->active)) return;
    sl.unlock();
    streams_.erase(it);
}

StreamTable::SyncLock StreamTable::lock_for_sync(InodeId ino, std::shared_ptr<Stream>* s,
                                                 std::unique_lock<std::mutex>* l) {
    *s = find(ino);
    if (!*s) return SyncLock::kNoStream;
    *l = std::unique_lock<std::mutex>((*s)->mu, std::defer_lock);
    for (int polls = 0; !l->try_lock();) {
        if ((*s)->sweep_seq.load(std::memory_order_acquire) % 2 == 1) return SyncLock::kBesideSweep;
        // The pass takes the lock a moment before its sweep begins; anyone
        // else (a write) lets go soon: queue for it.
        if (!(*s)->pass_at_lock.load(std::memory_order_relaxed) || ++polls > kReadLockPolls) {
            l->lock();
            break;
        }
        std::this_thread::sleep_for(kReadLockPoll);
    }
    return SyncLock::kLocked;
}

}  // namespace hiodsfs
