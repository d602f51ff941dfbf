// File operations beside writes and reads: truncate, flush, fsync,
// fallocate, clone and seek.
#include "engine/engine_impl.h"

namespace hiodsfs {

Status EngineImpl::truncate_locked(InodeId ino, Stream& s, std::uint64_t size) {
    HIODSFS_TRY(close_stream(ino, s));
    // The chunk that straddles the new end is rewritten shortened, so stored
    // bytes follow the content instead of keeping the whole old chunk alive.
    std::vector<std::uint8_t> keep;
    std::uint64_t keep_start = size;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t, MetaStore::ReadFrom::kGroup));
        std::vector<MappedExtent> ex;
        if (size > 0) HIODSFS_TRY(extents_in(*t, ino, size - 1, size, &ex));
        if (!ex.empty() && ex.front().end() > size) keep_start = ex.front().start;
    }
    if (keep_start < size) {
        keep.resize(size - keep_start);
        std::size_t got = 0;
        HIODSFS_TRY(read_locked(ino, nullptr, keep_start, keep.size(), keep.data(), &got, false,
                                MetaStore::ReadFrom::kGroup));
    }
    bool zero = keep.empty() || all_zero(keep.data(), keep.size());
    Digest digest;
    if (!zero) digest = fingerprint(keep.data(), keep.size());
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    HIODSFS_TRY(replace_range(*t, ino, in, keep_start, kMaxFileSize, nullptr));
    if (!zero) {
        ExtentRecord e;
        HIODSFS_TRY(store_chunk(*t, keep.data(), static_cast<std::uint32_t>(keep.size()), digest, &e));
        HIODSFS_TRY(replace_range(*t, ino, in, keep_start, keep.size(), &e));
    }
    in.r.size = size;
    auto now = now_ts();
    set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::close_stream(InodeId ino) {
    std::shared_ptr<Stream> s;
    std::unique_lock<std::mutex> l;
    switch (streams_.lock_for_sync(ino, &s, &l)) {
        case StreamTable::SyncLock::kNoStream:
            return Status::ok();
        case StreamTable::SyncLock::kBesideSweep:
            syncs_beside_sweep_.fetch_add(1, std::memory_order_relaxed);
            return Status::ok();
        case StreamTable::SyncLock::kLocked:
            break;
    }
    return close_stream(ino, *s);
}

Status EngineImpl::flush(InodeId ino, WriteErrorCursor* seen) {
    if (Status st = close_stream(ino); !st) {
        stop_with_segments();  // a stop says so at once, not at the next interval
        return st;
    }
    // Like a kernel's writeback error: told at close or fsync, once per open file.
    return write_errors_.check(ino, seen);
}

Status EngineImpl::fsync(InodeId ino, bool /*datasync*/, WriteErrorCursor* seen) {
    Status st = close_stream(ino);
    // The commit (or log record) applies the file's last held writes: the
    // error is then about all of them.
    if (st) st = meta_->logging() ? commit_->log_now() : commit_now();
    if (!st) {
        stop_with_segments();
        return st;
    }
    return write_errors_.check(ino, seen);
}

Status EngineImpl::sync_all() {
    const auto all = streams_.all();
    for (auto& [ino, s] : all) {
        auto l = lock_stream(*s);
        HIODSFS_TRY(close_stream(ino, *s));
    }
    return commit_now();
}

Status EngineImpl::fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len) {
    if (len == 0) return Status::error(EINVAL, "fallocate of zero length");
    if (offset > kMaxFileSize || len > kMaxFileSize - offset)
        return Status::error(EFBIG, "fallocate past the maximum file size");
    const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE && mode != punch && mode != FALLOC_FL_ZERO_RANGE &&
        mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
        return Status::error(EOPNOTSUPP, "fallocate mode not supported");
    auto s = streams_.get(ino);
    auto l = lock_stream(*s);
    Inode cur;
    HIODSFS_TRY(regular_file(ino, &cur));
    HIODSFS_TRY(close_stream(ino, *s));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    // Space is not reserved: chunks are stored when written, and holes read
    // as zeros, so allocation only extends the size.
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
        HIODSFS_TRY(replace_range(*t, ino, in, offset, len, nullptr));
    if (!(mode & FALLOC_FL_KEEP_SIZE) && offset + len > in.r.size) in.r.size = offset + len;
    auto now = now_ts();
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::clone_range(InodeId src, std::uint64_t src_off, InodeId dst,
                               std::uint64_t dst_off, std::uint64_t len, std::uint64_t* copied) {
    *copied = 0;
    if (src_off > kMaxFileSize || dst_off > kMaxFileSize || len > kMaxFileSize)
        return Status::error(EFBIG, "clone past the maximum file size");
    auto ss = streams_.get(src);
    auto ds = streams_.get(dst);
    // Lock both streams in inode order (once if they are the same file).
    std::unique_lock<std::mutex> l1, l2;
    if (src == dst) {
        l1 = lock_stream(*ss);
        if (src_off < dst_off + len && dst_off < src_off + len)
            return Status::error(EINVAL, "overlapping clone within one file");
    } else if (src < dst) {
        l1 = lock_stream(*ss);
        l2 = lock_stream(*ds);
    } else {
        l1 = lock_stream(*ds);
        l2 = lock_stream(*ss);
    }
    Inode tmp;
    HIODSFS_TRY(regular_file(src, &tmp));
    HIODSFS_TRY(regular_file(dst, &tmp));
    HIODSFS_TRY(close_stream(src, *ss));
    if (src != dst) HIODSFS_TRY(close_stream(dst, *ds));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode sin, din;
    HIODSFS_TRY(load_inode(*t, src, &sin));
    if (src_off >= sin.r.size) return Status::ok();
    std::uint64_t n = std::min(len, sin.r.size - src_off);
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(*t, src, sin, src_off, src_off + n, &ex));
    HIODSFS_TRY(load_inode(*t, dst, &din));
    HIODSFS_TRY(replace_range(*t, dst, din, dst_off, n, nullptr));
    std::uint64_t shared = 0;
    bool any_raw = false;
    for (const auto& m : ex) {
        std::uint64_t a = std::max(m.start, src_off), b = std::min(m.end(), src_off + n);
        ExtentRecord e = m.e;
        e.chunk_off = static_cast<std::uint32_t>(m.e.chunk_off + (a - m.start));
        e.length = static_cast<std::uint32_t>(b - a);
        if (!any_raw) {
            bool found = false;
            ChunkRecord rec;
            HIODSFS_TRY(get_chunk(*t, e.chunk, &rec, &found));
            any_raw = found && !(rec.flags & ChunkRecord::kIndexed);
        }
        HIODSFS_TRY(chunk_ref(*t, e.chunk, +1));
        HIODSFS_TRY(map_extent(*t, dst, din, dst_off + (a - src_off), e));
        shared += e.length;
    }
    if (dst_off + n > din.r.size) din.r.size = dst_off + n;
    auto now = now_ts();
    set_time(&din.r.mtime_s, &din.r.mtime_ns, now);
    set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, dst, din));
    t->super().counters.cloned_bytes += shared;
    // Raw chunks shared before the pass reached them: the pass re-cuts the
    // source's range into new chunks, so the copy needs its own sweep, or it
    // would keep the raw bytes (stored twice) for good.
    if (any_raw) HIODSFS_TRY(queue_dirty(*t, dst, dst_off, n));
    HIODSFS_TRY(t->commit());
    *copied = n;
    return Status::ok();
}

Status EngineImpl::seek(InodeId ino, std::uint64_t offset, SeekWhence whence, std::uint64_t* out) {
    auto s = streams_.get(ino);
    auto l = lock_stream(*s);
    Inode cur;
    HIODSFS_TRY(regular_file(ino, &cur));
    HIODSFS_TRY(close_stream(ino, *s));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (offset >= in.r.size) return Status::error(ENXIO, "offset past end of file");
    std::vector<MappedExtent> ex;
    HIODSFS_TRY(extents_in(*t, ino, in, offset, in.r.size, &ex));
    if (whence == SeekWhence::kData) {
        if (ex.empty()) return Status::error(ENXIO, "no data after offset");
        *out = std::max(offset, ex.front().start);
        return Status::ok();
    }
    std::uint64_t pos = offset;
    for (const auto& m : ex) {
        if (m.start > pos) break;
        pos = std::max(pos, m.end());
    }
    *out = std::min(pos, in.r.size);
    return Status::ok();
}

}  // namespace hiodsfs
