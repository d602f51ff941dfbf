// StreamTable: the open write stream of every file being written, by
// inode. A stream is made on first use and forgotten (drop) once nobody
// holds it, the kernel no longer pins its file, and it holds no bytes that
// are not chunked yet; it is never replaced while in use, so the pass
// re-chunking a file and a write after the kernel forgot and reopened it
// serialize on the same lock.
//
// Thread-safe. Lock order: the table's lock, then the pinned callback's
// (EngineImpl::pins_mu_); a Stream's mu is only tried under the table's
// lock, never waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hiodsfs/chunker.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// A read, flush or fsync that finds its file's lock taken looks this
// often, this many times, whether the pass's sweep holds it
// (EngineImpl::read, StreamTable::lock_for_sync).
inline constexpr auto kReadLockPoll = std::chrono::microseconds(50);
inline constexpr int kReadLockPolls = 200;

// The open write stream of one file (see the comment at the top of
// write_path.cc).
struct Stream {
    std::mutex mu;
    std::condition_variable moved;  // a write to the file finished
    std::atomic<int> writers{0};    // write requests inside write() for this file
    std::atomic<int> waiters{0};    // other operations waiting for mu (lock_stream)
    int streak = 0;                 // consecutive writes that continued the stream
    std::multiset<std::uint64_t> waiting;  // offsets of writes waiting for a gap to fill
    bool active = false;
    std::uint64_t off = 0;  // file offset of buf[head]; always a cut point
    std::vector<std::uint8_t> buf;
    std::size_t head = 0;
    std::unique_ptr<Chunker> chunker;
    // The background pass holds the lock for a sweep (rechunk_locked), which
    // may take seconds: every acknowledged byte of the file is then in its
    // extents, so reads need not wait for it (EngineImpl::read). Odd while a
    // sweep runs; a sweep's start and end each add one, so a read beside it
    // can tell that it ended (and a writer may have come) meanwhile.
    std::atomic<std::uint64_t> sweep_seq{0};
    // The pass holds mu or is about to take it (its checks before a sweep
    // included): flush and fsync that find mu taken poll it then, until the
    // sweep begins, and otherwise queue for it (lock_for_sync).
    std::atomic<bool> pass_at_lock{false};
    // The file was found to be a regular file (a file's type never changes):
    // a held-back write needs no metadata lookup of its own.
    bool regular = false;
    // Most chunks of the last large request the stream stored were shared
    // (a copy of data the store holds): the next one's chunks are looked up
    // before they are compressed, not compressed while they are cut.
    bool mostly_shared = false;
    // Overwrites inside the file that run without mu, each in a window
    // [first, second) holding every byte it reads or remaps (write_path.cc,
    // "Overwrites in windows"); guarded by mu. Everyone else who changes
    // the file's bytes, size or stream waits for them under mu (whole()).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> windows;
    std::condition_variable window_left;  // a window was released
    int whole_waiting = 0;  // operations waiting under mu for the windows: no new ones open
    // Where the last write to the file ended: a write that starts there (an
    // append, a rewrite in order) is no random overwrite, and takes no window.
    std::uint64_t last_end = 0;

    std::size_t size() const { return buf.size() - head; }
    std::uint64_t end() const { return off + size(); }
    const std::uint8_t* data() const { return buf.data() + head; }
    void clear() {
        active = false;
        buf.clear();
        buf.shrink_to_fit();
        head = 0;
    }
};

class StreamTable {
public:
    // pinned(ino): whether the kernel still holds ino (a lookup count); a
    // pinned file keeps its stream.
    explicit StreamTable(std::function<bool(InodeId)> pinned) : pinned_(std::move(pinned)) {}

    // ino's stream, made if it has none.
    std::shared_ptr<Stream> get(InodeId ino);
    // ino's stream, or null if it has none.
    std::shared_ptr<Stream> find(InodeId ino);
    // Every stream now, for a walk that closes them (sync_all, close).
    std::vector<std::pair<InodeId, std::shared_ptr<Stream>>> all();
    // Forgets every stream (an abandoned engine).
    void clear();
    // Forgets ino's stream once nothing holds or pins it. An active stream
    // holds bytes not yet chunked: it stays unless the file itself is gone.
    void drop(InodeId ino, bool file_gone = false);

    // How lock_for_sync found ino's stream.
    enum class SyncLock { kNoStream, kBesideSweep, kLocked };
    // For flush and fsync: ino's stream (*s), locked in *l. A sweep of the
    // pass that holds the lock emitted the stream's acknowledged bytes when
    // it took it (rechunk_locked), and no write gets in before it lets go,
    // so they need not wait for it (seconds for a large file), as reads do
    // not (EngineImpl::read): kBesideSweep, *l not locked.
    SyncLock lock_for_sync(InodeId ino, std::shared_ptr<Stream>* s,
                           std::unique_lock<std::mutex>* l);

private:
    std::function<bool(InodeId)> pinned_;
    std::mutex mu_;
    std::unordered_map<InodeId, std::shared_ptr<Stream>> streams_;
};

}  // namespace hiodsfs
