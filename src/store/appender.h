// Appender: the writing side of the segment store. It holds the active
// segment (the one appended to) with its file, the sealed segments before
// it with their sizes, and the write buffers in front of the active file:
// `written` bytes in the file, then `flushing` (the last full buffer, which
// the flusher thread is writing), then `buffer`, which appends fill. The
// flusher writes `flushing` without the lock, so appends (and the metadata
// operations that make them) never wait for a pwrite; they wait only when
// the buffer after it is full as well. It records every write in its
// SyncLedger, syncs (sync()), and stops the store for good after a failed
// fdatasync or a write the files refuse (failed()).
// Rolling over to a new segment is the store's (segment_store.cc): the
// tier and the open-file cache take part in it.
//
// Thread-safety: mu (the writer lock) guards everything but the two
// atomics that the lock-free read path reads (active_id, active_written:
// published length first, then id) and the flusher's pwrite, which runs
// without mu on the buffer no one else changes meanwhile (flush_busy).
// Methods named *_locked, and the accessors, require mu; the others take
// it. Lock order: sync_mu, then mu, then the reader's files mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"
#include "store/sync_ledger.h"

namespace hiodsfs {

class Appender {
public:
    Appender(Env* env, std::string dir, std::size_t write_buffer_bytes)
        : env_(env), dir_(std::move(dir)), write_buffer_bytes_(write_buffer_bytes) {}
    Appender(const Appender&) = delete;
    Appender& operator=(const Appender&) = delete;

    std::mutex mu;

    // ---- without mu (the read path)
    SegmentId active_id() const { return active_id_.load(); }
    std::uint64_t active_written() const { return active_written_.load(); }

    // ---- mu held
    SegmentId active() const { return active_; }
    const std::shared_ptr<File>& active_file() const { return active_file_; }
    std::uint64_t written() const { return written_; }
    std::uint64_t end() const { return written_ + flushing_.size() + buffer_.size(); }
    // Set by a failed fdatasync: after one, the kernel may have dropped the
    // dirty pages, so a later "successful" sync would promise too much; or
    // by a write the files refuse for good (write_failed_locked). EIO.
    const Status& failed() const { return failed_; }
    SyncLedger& ledger() { return ledger_; }

    const std::map<SegmentId, std::uint64_t>& sealed() const { return sealed_; }
    std::uint64_t sealed_bytes() const { return sealed_bytes_; }
    // A sealed segment of `size` bytes; `local` when its file is in the
    // directory (only those count in sealed_bytes).
    void add_sealed(SegmentId id, std::uint64_t size, bool local) {
        sealed_[id] = size;
        if (local) sealed_bytes_ += size;
    }
    // A sealed segment removed; `file_removed` when its file was there.
    void remove_sealed(SegmentId id, bool file_removed) {
        auto it = sealed_.find(id);
        if (file_removed) sealed_bytes_ -= it->second;
        sealed_.erase(it);
    }

    void set_active(SegmentId id, std::shared_ptr<File> file, std::uint64_t size);
    // Room for a full buffer, so appends do not grow it (read-write stores).
    void reserve_buffer() { buffer_.reserve(write_buffer_bytes_); }

    // Adds a record (its encoded header, then len bytes of data) after the
    // last one; a full buffer goes to the flusher first. *out is where the
    // payload lands, readable at once.
    Status append_locked(std::unique_lock<std::mutex>& lock, const char* header, const void* data,
                         std::uint32_t len, bool encoded, ChunkLocation* out);
    // Writes everything in memory to the file (after the flusher's write in
    // progress). On failure the bytes are kept: their locations stay
    // readable from memory and the next attempt rewrites the same offsets.
    Status flush_locked(std::unique_lock<std::mutex>& lock);
    // The bytes of a record of the active segment still in memory, or null.
    const char* in_memory_locked(std::uint64_t header_off, std::size_t total) const;
    // A copy for a scan of the active segment: its file, the bytes in it,
    // and the bytes still in memory after them.
    void snapshot_locked(std::shared_ptr<File>* file, std::uint64_t* file_end,
                         std::vector<char>* tail) const;
    // A write (or a new segment) that failed. For want of room (ENOSPC,
    // EDQUOT), of memory or descriptors, or from the device (EIO, a short
    // write) it may pass: the bytes stay in memory and are written again.
    // Any other reason says the files refuse writes (EPERM of a segment made
    // immutable, EROFS of a file system remounted read-only): the store
    // stops, answering EIO with the reason, as after a failed fdatasync.
    Status write_failed_locked(const Status& st);
    // Syncs the active segment's file before it is sealed (appender.cc
    // says why).
    Status sync_sealing_locked();

    // ---- without mu
    void start_flusher();
    // Stops the flusher and hands what is buffered to the OS, like closing
    // a file would.
    void stop();
    // sync() and sync_through() of the store: the latter passes `upto`.
    Status sync(const SegmentPosition* upto, SegmentPosition* synced);

private:
    void wrote_locked(std::size_t n);
    Status write_flushing_locked();
    Status hand_off_locked(std::unique_lock<std::mutex>& lock);
    void flusher_loop();
    // The flusher's: starts the write-back of the segment's bytes up to end
    // once kWritebackStep of them have not been started.
    void start_writeback(File& file, SegmentId segment, std::uint64_t end);
    static constexpr std::uint64_t kWritebackStep = 8u << 20;
    Status stop_after_failed_sync_locked(const Status& st);

    Env* const env_;
    const std::string dir_;
    const std::size_t write_buffer_bytes_;

    SegmentId active_ = 0;
    std::shared_ptr<File> active_file_;
    std::uint64_t written_ = 0;
    std::vector<char> flushing_;
    std::vector<char> buffer_;
    bool flush_busy_ = false;  // the flusher is writing `flushing` (no one changes it)
    Status flush_error_;       // its last failure; the next hand-off or flush retries
    bool stopping_ = false;
    std::condition_variable flush_cv_;    // wakes the flusher
    std::condition_variable flushed_cv_;  // a write of `flushing` ended
    std::thread flusher_;
    SegmentId writeback_segment_ = 0;   // the flusher's own: where write-back
    std::uint64_t writeback_from_ = 0;  // was last started
    Status failed_;
    SyncLedger ledger_;                          // what sync() has left to do
    std::map<SegmentId, std::uint64_t> sealed_;  // sealed segment -> file size
    std::uint64_t sealed_bytes_ = 0;

    // Published for the lock-free read path (SegmentStore::read()).
    std::atomic<SegmentId> active_id_{0};
    std::atomic<std::uint64_t> active_written_{0};

    std::mutex sync_mu_;  // one sync() at a time; taken before mu
};

}  // namespace hiodsfs
