// SegmentStore: append-only segment files of self-describing records.
//
// The store opens the directory (the tail scan of the newest segment, the
// committed frontier's checks), rolls over to new segments, and owns the
// parts: Appender (appender.h) writes, under the writer lock;
// SegmentReader (segment_reader.h) reads, keeping files open under
// files_mu; with a tier, TierCache (tier_cache.h) keeps the directory as a
// cache in front of it, under files_mu too. Lock order: the writer's mu,
// then files_mu.

#include "hiodsfs/segment_store.h"

#include <algorithm>
#include <map>
#include <utility>

#include "chunk/fingerprint.h"
#include "store/appender.h"
#include "store/segment_format.h"
#include "store/segment_reader.h"
#include "store/segment_scan.h"
#include "store/sync_ledger.h"
#include "store/tier_cache.h"

namespace hiodsfs {

struct SegmentStore::Impl {
    Impl(Env* env_in, const std::string& dir_in, const SegmentStoreOptions& options_in)
        : env(env_in),
          dir(dir_in),
          options(options_in),
          writer(env_in, dir_in, options_in.write_buffer_bytes),
          reader(env_in, dir_in, options_in.max_open_segments, writer) {
        if (options.tier != nullptr) {
            tier = std::make_unique<TierCache>(env, dir, options, writer, reader.files_mu(),
                                               reader.open_files());
            reader.set_tier(tier.get());
        }
    }

    Env* const env;
    const std::string dir;
    const SegmentStoreOptions options;

    // The writer: the active segment, its buffers and flusher, the sealed
    // segments, sync bookkeeping. Its mu is the writer lock.
    Appender writer;

    // The reader: reads, and the files kept open for them (files_mu).
    SegmentReader reader;

    // With options.tier: the tier and the directory as a cache in front
    // of it (its state guarded by the reader's files_mu too).
    std::unique_ptr<TierCache> tier;

    std::string path(SegmentId id) const { return dir + "/" + segment_file_name(id); }

    Status read_only_error(const char* op) const {
        return Status::error(EROFS, "segment store " + dir + " is open read-only: cannot " + op);
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
                HIODSFS_TRY(reader.file_for_read(*id, &f));
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
        reader.cache_put(id, std::move(file));
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
    return append(chunk, data, len, crc32c(data, len), false, out);
}

Status SegmentStore::append(ChunkId chunk, const void* data, std::uint32_t len, std::uint32_t payload_crc,
                            bool encoded, ChunkLocation* out) {
    if (chunk == 0) return Status::error(EINVAL, "segment store: chunk id 0 is not valid");
    // The whole header depends only on the record, so it is built unlocked.
    char hdr[kHeaderBytes];
    encode_record_header(hdr, chunk, len, payload_crc, encoded);
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
    return w.append_locked(lock, hdr, data, len, encoded, out);
}

Status SegmentStore::read(const ChunkLocation& loc, ChunkId chunk, void* out, bool* damaged) {
    return impl_->reader.read(loc, chunk, out, damaged);
}

Status SegmentStore::read_run(const ChunkLocation* locs, const ChunkId* chunks, std::size_t n,
                              char* const* dests) {
    return impl_->reader.read_run(locs, chunks, n, dests);
}

Status SegmentStore::check_header(const ChunkLocation& loc, ChunkId chunk) {
    return impl_->reader.check_header(loc, chunk);
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
        HIODSFS_TRY(m.reader.file_for_read(segment, &file));
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
    // The file's blocks are freed when its last descriptor closes (for a
    // 64 MiB segment, tens of ms of the file system's work): kept open here,
    // that close comes at the end, after the lock, so that appends do not
    // wait for it; under the lock they all did.
    std::shared_ptr<File> last = m.reader.cache_take(segment);
    if (!last) {
        std::unique_ptr<File> f;
        if (m.env->open(m.path(segment), OpenMode::kRead, &f)) last = std::move(f);
    }
    std::lock_guard lock(w.mu);
    HIODSFS_TRY(check());
    Status unlinked = m.env->unlink(m.path(segment));
    // With a tier, an evicted segment has no file left to remove.
    if (!unlinked && !(m.options.tier != nullptr && unlinked.err() == ENOENT)) return unlinked;
    w.remove_sealed(segment, unlinked.is_ok());
    w.ledger().forget(segment);
    w.ledger().entry_changed();  // the next sync() makes the removal durable
    m.reader.cache_drop(segment);
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
