#include "store/segment_reader.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "store/appender.h"
#include "store/segment_format.h"
#include "store/tier_cache.h"

namespace hiodsfs {
namespace {

// Reads of records up to this size reuse a per-thread buffer.
constexpr std::size_t kScratchLimit = 4u << 20;

}  // namespace

std::string SegmentReader::path(SegmentId id) const { return dir_ + "/" + segment_file_name(id); }

void SegmentReader::cache_put(SegmentId id, std::shared_ptr<File> file) {
    std::lock_guard lock(files_mu_);
    cache_put_locked(id, std::move(file));
}

void SegmentReader::cache_put_locked(SegmentId id, std::shared_ptr<File> file) {
    open_files_.put(id, std::move(file));
}

void SegmentReader::cache_drop(SegmentId id) {
    std::lock_guard lock(files_mu_);
    open_files_.drop(id);
}

std::shared_ptr<File> SegmentReader::cache_take(SegmentId id) {
    std::shared_ptr<File> file;
    std::lock_guard lock(files_mu_);
    if (open_files_.find(id, &file)) open_files_.drop(id);
    return file;
}

Status SegmentReader::file_for_read(SegmentId id, std::shared_ptr<File>* out) {
    if (tier_ != nullptr && tier_->reads_into_memory(id)) return tier_->read_into_memory(id, out);
    {
        std::lock_guard lock(files_mu_);
        if (open_files_.find(id, out)) {
            note_hit_locked(id);
            return Status::ok();
        }
    }
    std::unique_ptr<File> f;
    Status st = env_->open(path(id), OpenMode::kRead, &f);
    bool fetched = false;
    // Twice: eviction may take a fetched segment before it is opened
    // when another fetch made a newer one the most recently used.
    for (int attempt = 0; attempt < 2 && st.err() == ENOENT && tier_ != nullptr; ++attempt) {
        HIODSFS_TRY(tier_->fetch(id));
        fetched = true;
        st = env_->open(path(id), OpenMode::kRead, &f);
    }
    HIODSFS_TRY(st);
    *out = std::shared_ptr<File>(std::move(f));
    std::lock_guard lock(files_mu_);
    if (!fetched) note_hit_locked(id);
    // An open handle keeps an evicted file's blocks: only segments the
    // directory still holds keep theirs.
    if (tier_ == nullptr || tier_->cached_locked(id) || id == writer_.active_id())
        cache_put_locked(id, *out);
    return Status::ok();
}

void SegmentReader::note_hit_locked(SegmentId id) {
    if (tier_ != nullptr) tier_->note_hit_locked(id);
}

Status SegmentReader::read(const ChunkLocation& loc, ChunkId chunk, void* out, bool* damaged) {
    // Every failure below but an I/O error means the record's bytes are
    // wrong or gone; the two I/O error paths say otherwise.
    bool ignored = false;
    bool& bad = damaged != nullptr ? *damaged : ignored;
    bad = true;
    auto io_error = [&](const Status& e) {
        bad = false;
        return Status::error(EIO, path(loc.segment) + " at offset " + std::to_string(loc.offset) +
                                      ": " + e.message());
    };
    auto where = [&] { return path(loc.segment) + " at offset " + std::to_string(loc.offset); };
    if (loc.offset < kHeaderBytes) {
        return Status::error(EIO, where() + ": not a record location (offset before header)");
    }
    const std::uint64_t header_off = loc.offset - kHeaderBytes;
    const std::size_t total = kHeaderBytes + std::size_t{loc.length};

    // Only the active segment has bytes in memory; the atomics are published
    // length-then-id, so a stale view can only send us to the locked path.
    Appender& w = writer_;
    if (loc.segment == w.active_id() && loc.offset + loc.length > w.active_written()) {
        std::unique_lock lock(w.mu);
        if (loc.segment == w.active() && loc.offset + loc.length > w.written()) {
            const char* rec = w.in_memory_locked(header_off, total);
            if (rec == nullptr) return Status::error(EIO, where() + ": location is past the end of the segment");
            char hdr[kHeaderBytes];
            std::memcpy(hdr, rec, kHeaderBytes);
            if (loc.length > 0) std::memcpy(out, rec + kHeaderBytes, loc.length);
            lock.unlock();
            return check_record(hdr, static_cast<const char*>(out), loc, chunk, where);
        }
    }

    std::shared_ptr<File> file;
    Status st = file_for_read(loc.segment, &file);
    if (!st) {
        bad = st.err() == ENOENT;  // the segment is gone; anything else may pass
        return Status::error(EIO, "reading chunk " + std::to_string(chunk) + ": " + st.message());
    }
    auto short_read = [&](std::size_t want, std::size_t got) {
        return Status::error(EIO, where() + ": record of " + std::to_string(total) +
                                      " bytes runs past the end of the file (read " +
                                      std::to_string(got) + " of " + std::to_string(want) + ")");
    };
    std::size_t got = 0;
    if (total <= kScratchLimit) {
        // Header and payload in one pread, into a buffer each thread reuses.
        thread_local std::vector<char> scratch;
        scratch.resize(total);
        st = file->pread(scratch.data(), total, header_off, &got);
        if (!st) return io_error(st);
        if (got != total) return short_read(total, got);
        HIODSFS_TRY(check_record(scratch.data(), scratch.data() + kHeaderBytes, loc, chunk, where));
        if (loc.length > 0) std::memcpy(out, scratch.data() + kHeaderBytes, loc.length);
        return Status::ok();
    }
    // A large record: the payload goes straight into `out`, so a bogus
    // length from damaged metadata never makes us allocate gigabytes.
    char hdr[kHeaderBytes];
    st = file->pread(hdr, kHeaderBytes, header_off, &got);
    if (!st) return io_error(st);
    if (got != kHeaderBytes) return short_read(kHeaderBytes, got);
    st = file->pread(out, loc.length, loc.offset, &got);
    if (!st) return io_error(st);
    if (got != loc.length) return short_read(loc.length, got);
    return check_record(hdr, static_cast<const char*>(out), loc, chunk, where);
}

Status SegmentReader::read_run(const ChunkLocation* locs, const ChunkId* chunks, std::size_t n,
                              char* const* dests) {
    if (n == 0) return Status::ok();
    const ChunkLocation& first = locs[0];
    const ChunkLocation& last = locs[n - 1];
    if (first.offset < kHeaderBytes) return Status::error(EIO, "not a record location");
    for (std::size_t i = 1; i < n; ++i) {
        if (!SegmentStore::adjacent(locs[i - 1], locs[i])) return Status::error(EINVAL, "records are not back to back");
    }
    const std::uint64_t begin = first.offset - kHeaderBytes;
    const std::uint64_t end = last.offset + last.length;
    if (end - begin > kMaxRunBytes) return Status::error(EINVAL, "run longer than kMaxRunBytes");
    // Bytes still in the write buffer are read() one record at a time.
    if (first.segment == writer_.active_id() && end > writer_.active_written())
        return Status::error(EAGAIN, "run reaches the write buffer");
    std::shared_ptr<File> file;
    HIODSFS_TRY(file_for_read(first.segment, &file));
    // Headers to one buffer, payloads where they belong: two iovecs a
    // record, so a call takes at most IOV_MAX / 2 records.
    constexpr std::size_t kRecordsPerCall = 512;
    thread_local std::vector<char> headers;
    thread_local std::vector<struct iovec> iov;
    headers.resize(std::min(n, kRecordsPerCall) * kHeaderBytes);
    auto where = [&] { return path(first.segment) + " (a run of records)"; };
    for (std::size_t done = 0; done < n;) {
        const std::size_t k = std::min(n - done, kRecordsPerCall);
        iov.clear();
        std::size_t want = 0;
        for (std::size_t i = 0; i < k; ++i) {
            iov.push_back({headers.data() + i * kHeaderBytes, kHeaderBytes});
            iov.push_back({dests[done + i], locs[done + i].length});
            want += kHeaderBytes + locs[done + i].length;
        }
        std::size_t got = 0;
        HIODSFS_TRY(file->preadv(iov.data(), static_cast<int>(iov.size()),
                                 locs[done].offset - kHeaderBytes, &got));
        if (got != want) return Status::error(EIO, "short read of a run");
        for (std::size_t i = 0; i < k; ++i) {
            HIODSFS_TRY(check_record(headers.data() + i * kHeaderBytes, dests[done + i], locs[done + i],
                                     chunks[done + i], where));
        }
        done += k;
    }
    return Status::ok();
}

Status SegmentReader::check_header(const ChunkLocation& loc, ChunkId chunk) {
    auto where = [&] { return path(loc.segment) + " at offset " + std::to_string(loc.offset); };
    if (loc.offset < kHeaderBytes) {
        return Status::error(EIO, where() + ": not a record location (offset before header)");
    }
    if (loc.segment == writer_.active_id() &&
        loc.offset + loc.length > writer_.active_written()) {
        // Bytes still in the write buffer: the full read checks them.
        std::vector<char> buf(loc.length);
        return read(loc, chunk, buf.data(), nullptr);
    }
    std::shared_ptr<File> file;
    Status st = file_for_read(loc.segment, &file);
    if (!st) return Status::error(EIO, "chunk " + std::to_string(chunk) + ": " + st.message());
    std::uint64_t size = 0;
    HIODSFS_TRY(file->size(&size));
    if (loc.offset + loc.length > size) {
        return Status::error(EIO, where() + ": record of " + std::to_string(loc.length) +
                                      " payload bytes runs past the end of the file (" +
                                      std::to_string(size) + " bytes; truncated?)");
    }
    char hdr[kHeaderBytes];
    std::size_t got = 0;
    st = file->pread(hdr, kHeaderBytes, loc.offset - kHeaderBytes, &got);
    if (!st) return Status::error(EIO, where() + ": " + st.message());
    if (got != kHeaderBytes) return Status::error(EIO, where() + ": short header read");
    return check_header_fields(hdr, loc, chunk, where);
}

}  // namespace hiodsfs
