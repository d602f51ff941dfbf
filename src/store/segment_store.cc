// SegmentStore: append-only segment files of self-describing records.
//
// The parts: Appender (appender.h) writes, with the writer lock, its
// buffers and flusher and the sync bookkeeping; reads take no writer lock
// for bytes already in a file (the active segment's id and written length
// are published through atomics), and only a read that may reach into the
// write buffer locks. Open files for reads are kept under files_mu, and
// with a tier, TierCache (tier_cache.h) keeps the directory as a cache in
// front of it under the same lock. Lock order: the writer's mu, then
// files_mu.

#include "hiodsfs/segment_store.h"

#include <sys/uio.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "chunk/fingerprint.h"
#include "common/little_endian.h"
#include "store/appender.h"
#include "store/open_segments.h"
#include "store/segment_format.h"
#include "store/segment_scan.h"
#include "store/sync_ledger.h"
#include "store/tier_cache.h"

namespace hiodsfs {
namespace {

// Reads of records up to this size reuse a per-thread buffer.
constexpr std::size_t kScratchLimit = 4u << 20;

}  // namespace

struct SegmentStore::Impl {
    Impl(Env* env_in, const std::string& dir_in, const SegmentStoreOptions& options_in)
        : env(env_in),
          dir(dir_in),
          options(options_in),
          writer(env_in, dir_in, options_in.write_buffer_bytes),
          open_files(options_in.max_open_segments) {
        if (options.tier != nullptr)
            tier = std::make_unique<TierCache>(env, dir, options, writer, files_mu, open_files);
    }

    Env* const env;
    const std::string dir;
    const SegmentStoreOptions options;

    // The writer: the active segment, its buffers and flusher, the sealed
    // segments, sync bookkeeping. Its mu is the writer lock.
    Appender writer;

    // ---- open handles for reads, LRU, guarded by files_mu
    std::mutex files_mu;
    OpenSegments open_files;

    // With options.tier: the tier and the directory as a cache in front
    // of it (its state guarded by files_mu too).
    std::unique_ptr<TierCache> tier;

    std::string path(SegmentId id) const { return dir + "/" + segment_file_name(id); }

    Status read_only_error(const char* op) const {
        return Status::error(EROFS, "segment store " + dir + " is open read-only: cannot " + op);
    }

    void cache_put(SegmentId id, std::shared_ptr<File> file) {
        std::lock_guard lock(files_mu);
        cache_put_locked(id, std::move(file));
    }

    void cache_put_locked(SegmentId id, std::shared_ptr<File> file) {
        open_files.put(id, std::move(file));
    }

    void cache_drop(SegmentId id) {
        std::lock_guard lock(files_mu);
        open_files.drop(id);
    }

    Status file_for_read(SegmentId id, std::shared_ptr<File>* out) {
        if (tier != nullptr && tier->reads_into_memory(id)) return tier->read_into_memory(id, out);
        {
            std::lock_guard lock(files_mu);
            if (open_files.find(id, out)) {
                note_hit_locked(id);
                return Status::ok();
            }
        }
        std::unique_ptr<File> f;
        Status st = env->open(path(id), OpenMode::kRead, &f);
        bool fetched = false;
        // Twice: eviction may take a fetched segment before it is opened
        // when another fetch made a newer one the most recently used.
        for (int attempt = 0; attempt < 2 && st.err() == ENOENT && options.tier != nullptr; ++attempt) {
            HIODSFS_TRY(tier->fetch(id));
            fetched = true;
            st = env->open(path(id), OpenMode::kRead, &f);
        }
        HIODSFS_TRY(st);
        *out = std::shared_ptr<File>(std::move(f));
        std::lock_guard lock(files_mu);
        if (!fetched) note_hit_locked(id);
        // An open handle keeps an evicted file's blocks: only segments the
        // directory still holds keep theirs.
        if (tier == nullptr || tier->cached_locked(id) || id == writer.active_id())
            cache_put_locked(id, *out);
        return Status::ok();
    }

    void note_hit_locked(SegmentId id) {
        if (tier != nullptr) tier->note_hit_locked(id);
    }

    // Sealed segment files of the directory, at open, with their sizes.
    Status add_sealed_files(const SegmentId* begin, const SegmentId* end) {
        for (const SegmentId* id = begin; id != end; ++id) {
            std::shared_ptr<File> f;
            // With a tier, the file itself: file_for_read keeps no handle of
            // a segment the cache does not list yet, and would read one the
            // tier also holds from there in memory.
            if (options.tier != nullptr) {
                std::unique_ptr<File> file;
                HIODSFS_TRY(env->open(path(*id), OpenMode::kRead, &file));
                f = std::move(file);
            } else {
                HIODSFS_TRY(file_for_read(*id, &f));
            }
            std::uint64_t size = 0;
            HIODSFS_TRY(f->size(&size));
            add_sealed_local(*id, size);
        }
        return Status::ok();
    }

    // A sealed segment in the directory, at open.
    void add_sealed_local(SegmentId id, std::uint64_t size) {
        writer.add_sealed(id, size, true);
        if (tier != nullptr) tier->add_local(id, size);
    }

    // Segments only the tier holds are sealed segments too, at open.
    void add_sealed_remote() {
        if (tier == nullptr) return;
        for (const auto& [id, size] : tier->remote())
            if (writer.sealed().count(id) == 0 && id != writer.active())
                writer.add_sealed(id, size, false);
    }

    void set_active(SegmentId id, std::shared_ptr<File> file, std::uint64_t size) {
        writer.set_active(id, file, size);
        cache_put(id, std::move(file));
    }

    // The id of a segment made after `newest`: with a tier, never one
    // before the ids this holder may make (segment_tier.h).
    SegmentId new_segment_id(SegmentId newest) const {
        const SegmentId next = newest + 1;
        return options.tier != nullptr ? std::max(next, options.tier->first_new_segment()) : next;
    }

    // ---- the following require mu

    void start_threads() {
        writer.start_flusher();
        if (tier != nullptr) {
            tier->reset_hits();
            tier->start();
        }
    }

    // Seals the active segment and starts the next; writer.mu held.
    Status roll_over_locked(std::unique_lock<std::mutex>& lock) {
        HIODSFS_TRY(writer.flush_locked(lock));
        const SegmentId active = writer.active();
        if (active == UINT32_MAX) {
            return Status::error(ENOSPC, "segment store " + dir + ": segment ids exhausted");
        }
        HIODSFS_TRY(writer.sync_sealing_locked());
        const SegmentId next = new_segment_id(active);
        if (options.tier != nullptr) HIODSFS_TRY(options.tier->reserve_segment(next));
        std::unique_ptr<File> f;
        if (Status st = env->open(path(next), OpenMode::kCreateNew, &f); !st)
            return writer.write_failed_locked(st);
        const std::uint64_t written = writer.written();
        writer.add_sealed(active, written, true);
        writer.ledger().entry_changed();
        if (tier != nullptr) tier->add_sealed(active, written);
        set_active(next, std::shared_ptr<File>(std::move(f)), 0);
        return Status::ok();
    }
};

SegmentStore::SegmentStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SegmentStore::~SegmentStore() {
    // Hand buffered appends to the OS like closing a file would; durability
    // was only ever promised by sync(), so an error here loses nothing promised.
    impl_->writer.stop();
    if (impl_->tier != nullptr) impl_->tier->stop();
}

Status SegmentStore::create_empty(Env* env, const std::string& dir, SegmentId id) {
    if (id == 0)
        return Status::error(EINVAL, "segment store " + dir + ": segment id 0 is not valid");
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(dir + "/" + segment_file_name(id), OpenMode::kCreateNew, &f));
    HIODSFS_TRY(f->sync());
    return env->sync_dir(dir);
}

Status SegmentStore::open(Env* env, const std::string& dir, const SegmentStoreOptions& options,
                          std::unique_ptr<SegmentStore>* out) {
    if (options.max_segment_bytes == 0 || options.write_buffer_bytes == 0) {
        return Status::error(EINVAL, "segment store " + dir +
                                         ": max_segment_bytes and write_buffer_bytes must be > 0");
    }
    auto impl = std::make_unique<Impl>(env, dir, options);
    if (!options.read_only) {
        impl->writer.reserve_buffer();
        HIODSFS_TRY(env->mkdir(dir));
    }

    std::vector<std::string> names;
    HIODSFS_TRY(env->list_dir(dir, &names));
    std::vector<SegmentId> ids;
    for (const std::string& name : names) {
        SegmentId id;
        if (parse_segment_name(name, &id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    if (impl->tier != nullptr) HIODSFS_TRY(impl->tier->reconcile(names, &ids));
    const std::map<SegmentId, std::uint64_t> no_tier;
    const std::map<SegmentId, std::uint64_t>& remote =
        impl->tier != nullptr ? impl->tier->remote() : no_tier;

    if (options.read_only) {
        // Every segment counts as sealed; there is no active one (id 0).
        HIODSFS_TRY(impl->add_sealed_files(ids.data(), ids.data() + ids.size()));
        impl->add_sealed_remote();
        if (impl->tier != nullptr) impl->tier->reset_hits();  // the opens above were no reads
        *out = std::unique_ptr<SegmentStore>(new SegmentStore(std::move(impl)));
        return Status::ok();
    }

    const SegmentPosition committed = options.committed;
    // (A frontier at a segment's start refers to none of it: with a tier,
    // a commit pushes nothing of a segment it refers to no byte of.)
    if (committed.segment != 0 && (committed.offset != 0 || options.tier == nullptr)) {
        // Committed metadata refers to bytes up to here: a missing or short
        // file means data is gone, and a new segment or append there would
        // put other bytes under chunk records that still point at them.
        const auto in_tier = remote.find(committed.segment);
        const bool local = std::binary_search(ids.begin(), ids.end(), committed.segment);
        if (!local && in_tier == remote.end()) {
            return Status::error(EUCLEAN, "segment " + impl->path(committed.segment) +
                                              " is missing, but committed metadata refers to " +
                                              std::to_string(committed.offset) + " bytes of it");
        }
        std::uint64_t size = 0;
        if (local) {
            std::unique_ptr<File> f;
            HIODSFS_TRY(env->open(impl->path(committed.segment), OpenMode::kRead, &f));
            HIODSFS_TRY(f->size(&size));
        } else {
            size = in_tier->second;
        }
        if (size < committed.offset) {
            return Status::error(EUCLEAN, "segment " + impl->path(committed.segment) + " has " +
                                              std::to_string(size) +
                                              " bytes, but committed metadata refers to " +
                                              std::to_string(committed.offset) + " (truncated?)");
        }
    }

    // A segment the tier holds never changes: when the newest segment is
    // there (or there only), appending goes on in a new one after it.
    const SegmentId newest_in_tier = remote.empty() ? 0 : remote.rbegin()->first;
    const bool newest_sealed = !ids.empty() && newest_in_tier >= ids.back();
    if (ids.empty() || newest_sealed) {
        HIODSFS_TRY(impl->add_sealed_files(ids.data(), ids.data() + ids.size()));
        const SegmentId first =
            impl->new_segment_id(std::max<SegmentId>(ids.empty() ? 0 : ids.back(), newest_in_tier));
        if (options.tier != nullptr) HIODSFS_TRY(options.tier->reserve_segment(first));
        std::unique_ptr<File> f;
        HIODSFS_TRY(env->open(impl->path(first), OpenMode::kCreateNew, &f));
        // The first sync() makes the new file's entry durable.
        impl->writer.ledger().entry_changed();
        impl->set_active(first, std::shared_ptr<File>(std::move(f)), 0);
        impl->add_sealed_remote();
        impl->start_threads();
        *out = std::unique_ptr<SegmentStore>(new SegmentStore(std::move(impl)));
        return Status::ok();
    }

    HIODSFS_TRY(impl->add_sealed_files(ids.data(), ids.data() + ids.size() - 1));

    // The newest segment may end in a record torn by a crash.
    const SegmentId newest = ids.back();
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(impl->path(newest), OpenMode::kReadWrite, &f));
    std::shared_ptr<File> file(std::move(f));
    std::uint64_t size = 0;
    HIODSFS_TRY(file->size(&size));
    ScanReader reader(file.get(), size);
    TailScan tail;
    Status st = scan_tail(reader, &tail);
    if (!st) {
        return Status::error(st.err(),
                             "segment store: scanning " + impl->path(newest) + ": " + st.message());
    }
    const bool committed_damage = newest == committed.segment && tail.last_good < committed.offset;
    if (tail.intact_after_break || committed_damage) {
        // Damage in the middle, not a torn tail, or in bytes committed
        // metadata refers to: keep every byte (records after the damage
        // still read back, and a damaged chunk stays where fsck can name
        // it) and append to a fresh segment.
        impl->writer.set_active(newest, file, size);
        std::unique_lock lock(impl->writer.mu);
        HIODSFS_TRY(impl->roll_over_locked(lock));
    } else {
        if (tail.last_good < size) {
            HIODSFS_TRY(file->truncate(tail.last_good));
            // The shorter length must be durable before anything is appended
            // after it counts as durable; the next sync() covers it.
            impl->writer.ledger().wrote(newest, file);
        }
        impl->set_active(newest, file, tail.last_good);
    }
    impl->add_sealed_remote();
    impl->start_threads();
    *out = std::unique_ptr<SegmentStore>(new SegmentStore(std::move(impl)));
    return Status::ok();
}

Status SegmentStore::append(ChunkId chunk, const void* data, std::uint32_t len,
                            ChunkLocation* out) {
    return append(chunk, data, len, crc32c(data, len), out);
}

Status SegmentStore::append(ChunkId chunk, const void* data, std::uint32_t len, std::uint32_t payload_crc,
                            ChunkLocation* out) {
    if (chunk == 0) return Status::error(EINVAL, "segment store: chunk id 0 is not valid");
    // The whole header depends only on the record, so it is built unlocked.
    char hdr[kHeaderBytes];
    encode_record_header(hdr, chunk, len, payload_crc);
    const std::uint64_t record = kHeaderBytes + std::uint64_t{len};

    Impl& m = *impl_;
    if (m.options.read_only) return m.read_only_error("append");
    Appender& w = m.writer;
    std::unique_lock lock(w.mu);
    if (!w.failed().is_ok()) return w.failed();
    const std::uint64_t used = w.end();
    // After a roll-over the buffer is empty: append_locked hands nothing off.
    if (used > 0 && used + record > m.options.max_segment_bytes)
        HIODSFS_TRY(m.roll_over_locked(lock));
    return w.append_locked(lock, hdr, data, len, out);
}

Status SegmentStore::read(const ChunkLocation& loc, ChunkId chunk, void* out, bool* damaged) {
    Impl& m = *impl_;
    // Every failure below but an I/O error means the record's bytes are
    // wrong or gone; the two I/O error paths say otherwise.
    bool ignored = false;
    bool& bad = damaged != nullptr ? *damaged : ignored;
    bad = true;
    auto io_error = [&](const Status& e) {
        bad = false;
        return Status::error(EIO, m.path(loc.segment) + " at offset " + std::to_string(loc.offset) +
                                      ": " + e.message());
    };
    auto where = [&] { return m.path(loc.segment) + " at offset " + std::to_string(loc.offset); };
    if (loc.offset < kHeaderBytes) {
        return Status::error(EIO, where() + ": not a record location (offset before header)");
    }
    const std::uint64_t header_off = loc.offset - kHeaderBytes;
    const std::size_t total = kHeaderBytes + std::size_t{loc.length};

    // Only the active segment has bytes in memory; the atomics are published
    // length-then-id, so a stale view can only send us to the locked path.
    Appender& w = m.writer;
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
    Status st = m.file_for_read(loc.segment, &file);
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

Status SegmentStore::read_run(const ChunkLocation* locs, const ChunkId* chunks, std::size_t n,
                              char* const* dests) {
    if (n == 0) return Status::ok();
    Impl& m = *impl_;
    const ChunkLocation& first = locs[0];
    const ChunkLocation& last = locs[n - 1];
    if (first.offset < kHeaderBytes) return Status::error(EIO, "not a record location");
    for (std::size_t i = 1; i < n; ++i) {
        if (!adjacent(locs[i - 1], locs[i])) return Status::error(EINVAL, "records are not back to back");
    }
    const std::uint64_t begin = first.offset - kHeaderBytes;
    const std::uint64_t end = last.offset + last.length;
    if (end - begin > kMaxRunBytes) return Status::error(EINVAL, "run longer than kMaxRunBytes");
    // Bytes still in the write buffer are read() one record at a time.
    if (first.segment == m.writer.active_id() && end > m.writer.active_written())
        return Status::error(EAGAIN, "run reaches the write buffer");
    std::shared_ptr<File> file;
    HIODSFS_TRY(m.file_for_read(first.segment, &file));
    // Headers to one buffer, payloads where they belong: two iovecs a
    // record, so a call takes at most IOV_MAX / 2 records.
    constexpr std::size_t kRecordsPerCall = 512;
    thread_local std::vector<char> headers;
    thread_local std::vector<struct iovec> iov;
    headers.resize(std::min(n, kRecordsPerCall) * kHeaderBytes);
    auto where = [&] { return m.path(first.segment) + " (a run of records)"; };
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

Status SegmentStore::check_header(const ChunkLocation& loc, ChunkId chunk) {
    Impl& m = *impl_;
    auto where = [&] { return m.path(loc.segment) + " at offset " + std::to_string(loc.offset); };
    if (loc.offset < kHeaderBytes) {
        return Status::error(EIO, where() + ": not a record location (offset before header)");
    }
    if (loc.segment == m.writer.active_id() &&
        loc.offset + loc.length > m.writer.active_written()) {
        // Bytes still in the write buffer: the full read checks them.
        std::vector<char> buf(loc.length);
        return read(loc, chunk, buf.data());
    }
    std::shared_ptr<File> file;
    Status st = m.file_for_read(loc.segment, &file);
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

Status SegmentStore::flush() {
    if (impl_->options.read_only) return impl_->read_only_error("flush");
    Appender& w = impl_->writer;
    std::unique_lock lock(w.mu);
    if (!w.failed().is_ok()) return w.failed();
    return w.flush_locked(lock);
}

Status SegmentStore::sync(SegmentPosition* synced) { return impl_->writer.sync(nullptr, synced); }

Status SegmentStore::failure() {
    std::lock_guard lock(impl_->writer.mu);
    return impl_->writer.failed();
}

Status SegmentStore::sync_through(const SegmentPosition& upto) {
    return impl_->writer.sync(&upto, nullptr);
}

Status SegmentStore::list_segments(std::vector<std::pair<SegmentId, std::uint64_t>>* out) {
    Appender& w = impl_->writer;
    std::lock_guard lock(w.mu);
    out->assign(w.sealed().begin(), w.sealed().end());
    if (w.active() != 0) out->emplace_back(w.active(), w.end());
    return Status::ok();
}

Status SegmentStore::scan(SegmentId segment, bool verify_payload,
                          const std::function<bool(const SegmentRecord&)>& fn) {
    Impl& m = *impl_;
    std::shared_ptr<File> file;
    std::uint64_t file_end = 0;
    std::vector<char> tail;
    {
        std::lock_guard lock(m.writer.mu);
        // A snapshot: what is in the file now, then a copy of the buffer.
        if (segment == m.writer.active()) m.writer.snapshot_locked(&file, &file_end, &tail);
    }
    if (!file) {
        HIODSFS_TRY(m.file_for_read(segment, &file));
        HIODSFS_TRY(file->size(&file_end));
    }
    ScanReader r(file.get(), file_end, std::move(tail));
    return walk_records(r, segment, verify_payload, fn);
}

Status SegmentStore::remove(SegmentId segment) {
    Impl& m = *impl_;
    if (m.options.read_only) return m.read_only_error("remove");
    Appender& w = m.writer;
    auto check = [&]() {
        if (segment == w.active()) {
            return Status::error(EBUSY, "segment store: " + m.path(segment) +
                                            " is the active segment and cannot be removed");
        }
        if (w.sealed().count(segment) == 0) {
            return Status::error(ENOENT, "segment store: no segment " + m.path(segment));
        }
        return Status::ok();
    };
    if (m.options.tier != nullptr) {
        // Not under mu: the tier may take up to its timeout, and appends
        // must not wait for it.
        {
            std::lock_guard lock(w.mu);
            HIODSFS_TRY(check());
        }
        HIODSFS_TRY(m.tier->remove(segment));
    }
    std::lock_guard lock(w.mu);
    HIODSFS_TRY(check());
    Status unlinked = m.env->unlink(m.path(segment));
    // With a tier, an evicted segment has no file left to remove.
    if (!unlinked && !(m.options.tier != nullptr && unlinked.err() == ENOENT)) return unlinked;
    w.remove_sealed(segment, unlinked.is_ok());
    w.ledger().forget(segment);
    w.ledger().entry_changed();  // the next sync() makes the removal durable
    m.cache_drop(segment);
    if (m.tier != nullptr) m.tier->erase_cached(segment);
    return Status::ok();
}

Status SegmentStore::seal() {
    Impl& m = *impl_;
    if (m.options.read_only) return m.read_only_error("seal");
    std::unique_lock lock(m.writer.mu);
    if (!m.writer.failed().is_ok()) return m.writer.failed();
    if (m.writer.end() == 0) return Status::ok();
    return m.roll_over_locked(lock);
}

std::uint64_t SegmentStore::disk_bytes() {
    Appender& w = impl_->writer;
    std::lock_guard lock(w.mu);
    if (impl_->options.tier == nullptr) return w.sealed_bytes() + w.end();
    return impl_->tier->cached_bytes() + w.end();
}

Status SegmentStore::finish_uploads() {
    if (impl_->tier == nullptr) return Status::ok();
    return impl_->tier->finish_uploads();
}

Status SegmentStore::push_to_tier(SegmentPosition upto) {
    if (impl_->tier == nullptr) return Status::ok();
    return impl_->tier->push(upto);
}

bool SegmentStore::in_directory(SegmentId segment) {
    if (impl_->tier == nullptr) return true;
    return impl_->tier->in_directory(segment);
}

bool SegmentStore::tier_stats(SegmentTierStats* out) {
    if (impl_->tier == nullptr) return false;
    impl_->tier->stats(out);
    return true;
}

SegmentPosition SegmentStore::append_position() {
    std::lock_guard lock(impl_->writer.mu);
    return SegmentPosition{impl_->writer.active(), impl_->writer.end()};
}

SegmentId SegmentStore::active_segment() { return impl_->writer.active_id(); }

}  // namespace hiodsfs
