#include "store/appender.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/thread_name.h"

namespace hiodsfs {

void Appender::set_active(SegmentId id, std::shared_ptr<File> file, std::uint64_t size) {
    // written before id: a reader that sees the new id also sees its length.
    active_written_.store(size);
    active_id_.store(id);
    active_ = id;
    active_file_ = std::move(file);
    written_ = size;
}

Status Appender::append_locked(std::unique_lock<std::mutex>& lock, const char* header,
                               const void* data, std::uint32_t len, bool encoded, ChunkLocation* out) {
    const std::uint64_t record = SegmentStore::kHeaderBytes + std::uint64_t{len};
    if (!buffer_.empty() && buffer_.size() + record > write_buffer_bytes_) {
        HIODSFS_TRY(hand_off_locked(lock));
    }
    const std::uint64_t at = end();
    // insert, not resize + memcpy: no zero-filling of every appended byte.
    buffer_.insert(buffer_.end(), header, header + SegmentStore::kHeaderBytes);
    const char* bytes = static_cast<const char*>(data);
    if (len > 0) buffer_.insert(buffer_.end(), bytes, bytes + len);
    *out = ChunkLocation{active_, at + SegmentStore::kHeaderBytes, len, encoded};
    return Status::ok();
}

void Appender::snapshot_locked(std::shared_ptr<File>* file, std::uint64_t* file_end,
                               std::vector<char>* tail) const {
    *file = active_file_;
    *file_end = written_;
    *tail = flushing_;
    tail->insert(tail->end(), buffer_.begin(), buffer_.end());
}

void Appender::start_flusher() {
    flushing_.reserve(write_buffer_bytes_);
    flusher_ = std::thread([this] {
        name_this_thread("seg-flusher");
        flusher_loop();
    });
}

void Appender::stop() {
    std::unique_lock lock(mu);
    if (flusher_.joinable()) {
        stopping_ = true;
        flush_cv_.notify_all();
        lock.unlock();
        flusher_.join();
        lock.lock();
    }
    if (failed_.is_ok()) (void)flush_locked(lock);
}

void Appender::wrote_locked(std::size_t n) {
    ledger_.wrote(active_, active_file_);
    written_ += n;
    active_written_.store(written_);
}

Status Appender::write_failed_locked(const Status& st) {
    switch (st.err()) {
        case ENOSPC:
        case EDQUOT:
        case ENOMEM:
        case EMFILE:
        case ENFILE:
        case EIO:
            return st;
    }
    if (failed_.is_ok())
        failed_ = Status::error(
            EIO, "segment store " + dir_ + " stopped after a failed write (" + st.message() + ")");
    return failed_;
}

// Writes `flushing` here, under mu: the flusher is not writing it (it
// failed, or has not started on it).
Status Appender::write_flushing_locked() {
    if (flushing_.empty()) return Status::ok();
    if (Status st = active_file_->pwrite(flushing_.data(), flushing_.size(), written_); !st)
        return write_failed_locked(st);
    wrote_locked(flushing_.size());
    flushing_.clear();
    flush_error_ = Status::ok();
    flushed_cv_.notify_all();  // a hand-off may wait for the slot
    return Status::ok();
}

Status Appender::flush_locked(std::unique_lock<std::mutex>& lock) {
    flushed_cv_.wait(lock, [&] { return !flush_busy_; });
    HIODSFS_TRY(write_flushing_locked());
    if (buffer_.empty()) return Status::ok();
    if (Status st = active_file_->pwrite(buffer_.data(), buffer_.size(), written_); !st)
        return write_failed_locked(st);
    wrote_locked(buffer_.size());
    buffer_.clear();
    return Status::ok();
}

// A full buffer goes to the flusher. Waits while the flusher still has
// the one before; if that one failed, writes it here and fails with it.
Status Appender::hand_off_locked(std::unique_lock<std::mutex>& lock) {
    if (!flusher_.joinable()) return flush_locked(lock);
    flushed_cv_.wait(lock,
                     [&] { return flushing_.empty() || (!flush_busy_ && !flush_error_.is_ok()); });
    HIODSFS_TRY(write_flushing_locked());
    flushing_.swap(buffer_);  // the emptied vector keeps its capacity
    flush_cv_.notify_one();
    return Status::ok();
}

// A segment fills in under a second at a fast writer's pace, and its
// roll-over syncs it under mu (sync_sealing_locked): with the whole segment
// still in the page cache that took hundreds of ms, and every append
// waited. Written back as it fills, the sync finds little left.
void Appender::start_writeback(File& file, SegmentId segment, std::uint64_t end) {
    if (segment != writeback_segment_ || end < writeback_from_) {
        writeback_segment_ = segment;
        writeback_from_ = 0;
    }
    if (end - writeback_from_ < kWritebackStep) return;
    file.start_writeback(writeback_from_, end - writeback_from_);
    writeback_from_ = end;
}

void Appender::flusher_loop() {
    std::unique_lock lock(mu);
    for (;;) {
        flush_cv_.wait(lock, [&] {
            return stopping_ || (!flushing_.empty() && !flush_busy_ && flush_error_.is_ok());
        });
        if (stopping_) return;  // the destructor writes what is left
        flush_busy_ = true;
        const std::shared_ptr<File> file = active_file_;  // no roll-over while busy
        const SegmentId segment = active_;
        const std::uint64_t at = written_;
        lock.unlock();
        Status st = file->pwrite(flushing_.data(), flushing_.size(), at);
        if (st) start_writeback(*file, segment, at + flushing_.size());
        lock.lock();
        flush_busy_ = false;
        if (st) {
            wrote_locked(flushing_.size());
            flushing_.clear();
        } else {
            flush_error_ = st;
        }
        flushed_cv_.notify_all();
    }
}

const char* Appender::in_memory_locked(std::uint64_t header_off, std::size_t total) const {
    if (header_off >= written_ && header_off + total <= written_ + flushing_.size())
        return flushing_.data() + (header_off - written_);
    const std::uint64_t base = written_ + flushing_.size();
    if (header_off >= base && header_off + total <= base + buffer_.size())
        return buffer_.data() + (header_off - base);
    return nullptr;
}

// The segment being sealed is made durable before its successor takes a
// byte: an fsync log record in the next segment may refer to chunks in
// this one's tail, and a power loss must never keep the record without
// them (files are written back independently). Under mu, once a
// segment: the writes since the last sync() are all there is to sync.
Status Appender::sync_sealing_locked() {
    if (!ledger_.is_dirty(active_)) return Status::ok();
    Status st = active_file_->sync();
    if (!st) return stop_after_failed_sync_locked(st);
    ledger_.forget(active_);
    return Status::ok();
}

// After a failed fdatasync the kernel may have dropped the pages: the
// store stops for good (see `failed`).
Status Appender::stop_after_failed_sync_locked(const Status& st) {
    failed_ = Status::error(EIO, "segment store " + dir_ + " stopped after a failed sync (" +
                                     st.message() + "); reopen it");
    return failed_;
}

Status Appender::sync(const SegmentPosition* upto, SegmentPosition* synced) {
    std::lock_guard sync_lock(sync_mu_);
    SyncLedger::Pending pending;
    SegmentPosition position;
    {
        std::unique_lock lock(mu);
        if (!failed_.is_ok()) return failed_;
        // A sync that ran while this caller waited for sync_mu may have
        // covered it already.
        if (upto != nullptr && ledger_.covers(*upto)) return Status::ok();
        HIODSFS_TRY(flush_locked(lock));
        pending = ledger_.pending();
        position = SegmentPosition{active_, written_};
    }
    if (synced != nullptr) *synced = position;
    if (pending.empty()) {
        std::lock_guard lock(mu);
        ledger_.synced(pending, position);
        return Status::ok();
    }

    // fdatasync without the writer lock, so appends go on meanwhile; the
    // generations tell afterwards which files were not written again.
    for (const auto& [id, d] : pending.files) {
        Status st = d.file->sync();
        if (!st) {
            std::lock_guard lock(mu);
            return stop_after_failed_sync_locked(st);
        }
    }
    // A failed directory sync is not sticky: entries live in the journal,
    // not in pages the kernel could drop, so retrying it is sound.
    if (pending.need_dir) HIODSFS_TRY(env_->sync_dir(dir_));

    std::lock_guard lock(mu);
    ledger_.synced(pending, position);
    return Status::ok();
}

}  // namespace hiodsfs
