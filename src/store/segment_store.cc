// SegmentStore: append-only segment files of self-describing records.
//
// Writer state (the active segment, its write buffer, which files need a
// sync) is guarded by mu_. Reads of bytes already in a file take no writer
// lock: the active segment's id and written length are published through
// atomics, and only a read that may reach into the write buffer locks.

#include "hiodsfs/segment_store.h"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>

#include "chunk/fingerprint.h"
#include "common/little_endian.h"
#include "common/thread_name.h"
#include "store/appender.h"
#include "store/open_segments.h"
#include "store/segment_cache.h"
#include "store/segment_format.h"
#include "store/segment_scan.h"
#include "store/sync_ledger.h"

namespace hiodsfs {
namespace {

// Reads of records up to this size reuse a per-thread buffer.
constexpr std::size_t kScratchLimit = 4u << 20;

// A segment read whole from the tier, for a read-only store that leaves
// its directory as it is (tier_reads_in_memory).
class SegmentInMemory : public File {
public:
    explicit SegmentInMemory(std::vector<char> bytes) : bytes_(std::move(bytes)) {}
    Status pwrite(const void*, std::size_t, std::uint64_t) override { return refused(); }
    Status pread(void* data, std::size_t len, std::uint64_t offset, std::size_t* got) override {
        *got = offset < bytes_.size() ? static_cast<std::size_t>(std::min<std::uint64_t>(len, bytes_.size() - offset)) : 0;
        if (*got > 0) std::memcpy(data, bytes_.data() + offset, *got);
        return Status::ok();
    }
    Status sync() override { return Status::ok(); }
    Status size(std::uint64_t* out) override {
        *out = bytes_.size();
        return Status::ok();
    }
    Status truncate(std::uint64_t) override { return refused(); }

private:
    static Status refused() { return Status::error(EROFS, "a segment read from the tier is not written"); }
    std::vector<char> bytes_;
};

}  // namespace

struct SegmentStore::Impl {
    Impl(Env* env_in, const std::string& dir_in, const SegmentStoreOptions& options_in)
        : env(env_in),
          dir(dir_in),
          options(options_in),
          writer(env_in, dir_in, options_in.write_buffer_bytes),
          open_files(options_in.max_open_segments) {
        cache.set_limit(options.cache_bytes);
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

    // ---- the tier (options.tier), also guarded by files_mu
    SegmentCache cache;                         // sealed segments in the directory
    std::map<SegmentId, std::uint64_t> remote;  // what the tier holds, with sizes
    std::deque<SegmentId> uploads;              // sealed, in the directory only, oldest first
    // Segments not yet put whole whose first bytes push_to_tier wrote.
    std::map<SegmentId, std::uint64_t> pushed;
    SegmentId uploading = 0;                    // being put, without the lock
    bool uploader_stopping = false;
    Status upload_error;  // the last failure, until an upload works again
    std::chrono::steady_clock::time_point retry_at{};
    std::chrono::seconds backoff{1};
    std::condition_variable tier_cv;  // work for the uploader; an upload ended
    std::thread uploader;
    std::uint64_t uploads_done = 0, upload_failures = 0, evictions = 0;
    std::uint64_t hits = 0, misses = 0, fetched_bytes = 0;
    // One fetch or tier removal at a time: a removal never races a fetch
    // that would bring the segment back into the directory.
    std::mutex fetch_mu;
    // tier_reads_in_memory: the segment read last from the tier (fetch_mu).
    SegmentId in_memory_id = 0;
    std::shared_ptr<File> in_memory;

    std::string path(SegmentId id) const { return dir + "/" + segment_file_name(id); }
    std::string fetch_path(SegmentId id) const { return dir + "/" + fetch_file_name(id); }

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
        if (options.tier_reads_in_memory && options.read_only && options.tier != nullptr) {
            std::unique_lock lock(files_mu);
            if (!cache.contains(id) && remote.count(id) != 0) {
                lock.unlock();
                return read_into_memory(id, out);
            }
        }
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
            HIODSFS_TRY(fetch(id));
            fetched = true;
            st = env->open(path(id), OpenMode::kRead, &f);
        }
        HIODSFS_TRY(st);
        *out = std::shared_ptr<File>(std::move(f));
        std::lock_guard lock(files_mu);
        if (!fetched) note_hit_locked(id);
        // An open handle keeps an evicted file's blocks: only segments the
        // directory still holds keep theirs.
        if (options.tier == nullptr || cache.contains(id) || id == writer.active_id())
            cache_put_locked(id, *out);
        return Status::ok();
    }

    void note_hit_locked(SegmentId id) {
        if (options.tier == nullptr) return;
        ++hits;
        cache.touch(id);
    }

    // ---- the tier

    // Brings a segment the tier holds back into the directory, whole: to a
    // temporary file, synced, then renamed, so a crash never leaves a
    // partial copy under the segment's name. In pieces, so a fetch holds
    // fetch_piece_bytes of memory, not the segment.
    Status fetch(SegmentId id) {
        const std::size_t piece_bytes = std::max<std::size_t>(options.fetch_piece_bytes, 1);
        std::lock_guard serial(fetch_mu);
        std::uint64_t size = 0;
        {
            std::lock_guard lock(files_mu);
            if (cache.contains(id)) return Status::ok();  // fetched meanwhile
            auto it = remote.find(id);
            if (it == remote.end()) {
                return Status::error(ENOENT, path(id) + " is not in the cache directory and " +
                                                 options.tier->describe() + " does not hold it");
            }
            size = it->second;
        }
        const std::string tmp = fetch_path(id);
        (void)env->unlink(tmp);  // a copy a failed fetch left
        std::unique_ptr<File> f;
        HIODSFS_TRY(env->open(tmp, OpenMode::kCreateNew, &f));
        struct RemoveUnlessKept {
            Env* env;
            const std::string& path;
            bool kept = false;
            ~RemoveUnlessKept() {
                if (!kept) (void)env->unlink(path);
            }
        } cleanup{env, tmp};
        std::vector<char> piece;
        std::uint64_t at = 0;
        for (;;) {
            Status st = options.tier->get_range(id, at, piece_bytes, &piece);
            if (!st) return Status::error(st.err(), "fetching segment " + std::to_string(id) + ": " + st.message());
            if (piece.empty()) break;
            st = f->pwrite(piece.data(), piece.size(), at);
            if (!st) return Status::error(st.err(), "caching segment " + std::to_string(id) + ": " + st.message());
            at += piece.size();
            if (piece.size() < piece_bytes) break;
        }
        if (at != size) {
            return Status::error(EIO, "segment " + std::to_string(id) + " in " + options.tier->describe() +
                                          " has " + std::to_string(at) + " bytes, " + std::to_string(size) +
                                          " expected");
        }
        Status st = f->sync();
        f.reset();
        if (st) st = env->rename(tmp, path(id));
        if (!st) return Status::error(st.err(), "caching segment " + std::to_string(id) + ": " + st.message());
        cleanup.kept = true;
        {
            std::lock_guard lock(files_mu);
            cache.add(id, size, true, true);
            ++misses;
            fetched_bytes += size;
        }
        tier_cv.notify_all();  // the uploader evicts what no longer fits
        return Status::ok();
    }

    // The segment whole from the tier into memory, replacing the one read
    // before (readers that still hold that one keep it until they are done).
    Status read_into_memory(SegmentId id, std::shared_ptr<File>* out) {
        std::lock_guard serial(fetch_mu);
        if (in_memory_id != id) {
            in_memory.reset();  // before the next, so two never add up
            std::vector<char> bytes;
            Status st = options.tier->get(id, &bytes);
            if (!st) return Status::error(st.err(), "reading segment " + std::to_string(id) + " from " +
                                                        options.tier->describe() + ": " + st.message());
            const std::size_t size = bytes.size();
            in_memory = std::make_shared<SegmentInMemory>(std::move(bytes));
            in_memory_id = id;
            std::lock_guard lock(files_mu);
            ++misses;
            fetched_bytes += size;
        }
        *out = in_memory;
        return Status::ok();
    }

    // Reads a sealed segment's file and puts it in the tier; *size is its
    // length. Synced first, so the directory's copy is never shorter than
    // the tier's after a crash. The bytes commits already pushed
    // (push_to_tier) are not sent again: only the rest, at its offset. A
    // segment of one piece goes whole; a larger one by range, piece after
    // piece, so an upload holds upload_piece_bytes of memory. A crash
    // half-way leaves an object shorter than the file, which open then
    // takes as a partial upload: the file stays the segment and is sent
    // again (reconcile_with_tier).
    Status upload(SegmentId id, std::uint64_t* size) {
        std::unique_ptr<File> f;
        HIODSFS_TRY(env->open(path(id), OpenMode::kRead, &f));
        HIODSFS_TRY(f->size(size));
        HIODSFS_TRY(f->sync());
        std::uint64_t from = 0;
        {
            std::lock_guard lock(files_mu);
            auto p = pushed.find(id);
            if (p != pushed.end()) from = std::min(p->second, *size);
        }
        const std::uint64_t piece = std::max<std::size_t>(options.upload_piece_bytes, 1);
        std::vector<char> bytes;
        for (std::uint64_t at = from; at < *size;) {
            bytes.resize(static_cast<std::size_t>(std::min(piece, *size - at)));
            std::size_t got = 0;
            HIODSFS_TRY(f->pread(bytes.data(), bytes.size(), at, &got));
            if (got != bytes.size()) return Status::error(EIO, path(id) + " shrank while being uploaded");
            if (at == 0 && bytes.size() == *size) return options.tier->put(id, bytes.data(), bytes.size());
            HIODSFS_TRY(options.tier->put_range(id, at, bytes.data(), bytes.size()));
            at += bytes.size();
        }
        return Status::ok();
    }

    // Records how an upload of `id` ended; files_mu held.
    void upload_ended_locked(SegmentId id, const Status& st, std::uint64_t size) {
        uploading = 0;
        tier_cv.notify_all();  // remove() may wait for this one
        if (st) {
            auto q = std::find(uploads.begin(), uploads.end(), id);
            if (q != uploads.end()) uploads.erase(q);
            remote[id] = size;
            pushed.erase(id);
            cache.mark_uploaded(id);
            ++uploads_done;
            upload_error = Status::ok();
            backoff = std::chrono::seconds(1);
            return;
        }
        ++upload_failures;
        if (upload_error.is_ok() && options.log) {
            options.log("hiodsfs: uploading segment " + std::to_string(id) + " to " +
                        options.tier->describe() + " failed (the local copy stays; retrying): " +
                        st.message());
        }
        upload_error = st;
        retry_at = std::chrono::steady_clock::now() + backoff;
        backoff = std::min<std::chrono::seconds>(backoff * 2, std::chrono::seconds(30));
    }

    // Deletes uploaded segments from the directory, least recently used
    // first, until it fits cache_bytes; files_mu held.
    void evict_locked() {
        for (SegmentId id : cache.victims(writer.active_written())) {
            if (!env->unlink(path(id)).is_ok()) continue;  // stays; tried again later
            cache.erase(id);
            open_files.drop(id);  // readers holding it keep reading the unlinked file
            ++evictions;
        }
    }

    void uploader_loop() {
        std::unique_lock lock(files_mu);
        for (;;) {
            evict_locked();
            if (uploader_stopping) return;
            if (uploads.empty()) {
                tier_cv.wait(lock);
                continue;
            }
            if (std::chrono::steady_clock::now() < retry_at) {
                tier_cv.wait_until(lock, retry_at);
                continue;
            }
            const SegmentId id = uploads.front();
            uploading = id;
            lock.unlock();
            std::uint64_t size = 0;
            const Status st = upload(id, &size);
            lock.lock();
            upload_ended_locked(id, st, size);
        }
    }

    void stop_uploader() {
        {
            std::lock_guard lock(files_mu);
            uploader_stopping = true;
        }
        tier_cv.notify_all();
        if (uploader.joinable()) uploader.join();
    }

    // Takes a segment out of the tier before its local file goes: an
    // upload of it in flight ends first, and a queued one is dropped.
    Status remove_from_tier(SegmentId id) {
        std::lock_guard serial(fetch_mu);
        std::unique_lock lock(files_mu);
        tier_cv.wait(lock, [&] { return uploading != id; });
        auto q = std::find(uploads.begin(), uploads.end(), id);
        if (q != uploads.end()) uploads.erase(q);
        if (remote.count(id) == 0 && pushed.count(id) == 0) return Status::ok();
        lock.unlock();
        Status st = options.tier->remove(id);
        if (!st && st.err() != ENOENT) return st;
        lock.lock();
        remote.erase(id);
        pushed.erase(id);
        return Status::ok();
    }

    // At open: what the tier holds, a fetch a crash cut short removed, and
    // local copies shorter than the tier's dropped (the tier's is the
    // segment once it has it whole). A local copy longer than the tier's
    // is the segment: the object holds a prefix of it (the bytes commits
    // pushed, or an upload cut short), which the next upload completes.
    // ids keeps the rest.
    Status reconcile_with_tier(const std::vector<std::string>& names, std::vector<SegmentId>* ids) {
        std::vector<std::pair<SegmentId, std::uint64_t>> held;
        HIODSFS_TRY(options.tier->list(&held));
        remote.insert(held.begin(), held.end());
        if (!options.read_only) {
            for (const std::string& name : names)
                if (name.size() == 14 && name.compare(8, 6, ".fetch") == 0) (void)env->unlink(dir + "/" + name);
        }
        if (ids->empty() && !remote.empty() && options.committed.segment == 0) {
            return Status::error(EEXIST, options.tier->describe() + " already holds " +
                                             std::to_string(remote.size()) +
                                             " segments, but no metadata in " + dir +
                                             "/.. refers to them (a store keeps its metadata in "
                                             "its cache_dir: use the one it was made with)");
        }
        const SegmentId wins_from = options.tier_wins_from.segment;
        std::vector<SegmentId> kept;
        for (SegmentId id : *ids) {
            auto it = remote.find(id);
            if (it == remote.end()) {
                if (options.has_live_chunks && !options.has_live_chunks(id)) {
                    // Nothing committed refers to it: a crash's leftover, or
                    // the active segment of a holder the store went on without.
                    if (!options.read_only) HIODSFS_TRY(env->unlink(path(id)));
                    continue;
                }
                if (options.has_live_chunks && options.log && !options.read_only) {
                    options.log("hiodsfs: segment " + std::to_string(id) +
                                " holds bytes the metadata refers to, but " +
                                options.tier->describe() +
                                " has no object of it: uploading it again from " + dir);
                }
                kept.push_back(id);
                continue;
            }
            std::uint64_t size = 0;
            std::unique_ptr<File> f;
            HIODSFS_TRY(env->open(path(id), OpenMode::kRead, &f));
            HIODSFS_TRY(f->size(&size));
            const bool tier_wins = wins_from != 0 && id >= wins_from;
            if (size > it->second && !tier_wins) {
                pushed[id] = it->second;
                remote.erase(it);
            } else if (size != it->second) {
                if (!options.read_only) HIODSFS_TRY(env->unlink(path(id)));
                continue;
            }
            kept.push_back(id);
        }
        *ids = std::move(kept);
        return Status::ok();
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
        if (options.tier == nullptr) return;
        std::lock_guard lock(files_mu);
        const bool uploaded = remote.count(id) != 0;
        cache.add(id, size, uploaded);
        if (!uploaded && !options.read_only) uploads.push_back(id);
    }

    // Segments only the tier holds are sealed segments too, at open.
    void add_sealed_remote() {
        for (const auto& [id, size] : remote)
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
        hits = 0;  // the opens at open() were no reads
        if (options.tier != nullptr)
            uploader = std::thread([this] {
                name_this_thread("seg-uploader");
                uploader_loop();
            });
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
        if (options.tier != nullptr) {
            {
                std::lock_guard files_lock(files_mu);
                cache.add(active, written, false);
                uploads.push_back(active);
            }
            tier_cv.notify_all();
        }
        set_active(next, std::shared_ptr<File>(std::move(f)), 0);
        return Status::ok();
    }
};

SegmentStore::SegmentStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SegmentStore::~SegmentStore() {
    // Hand buffered appends to the OS like closing a file would; durability
    // was only ever promised by sync(), so an error here loses nothing promised.
    impl_->writer.stop();
    impl_->stop_uploader();
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
    if (options.tier != nullptr) HIODSFS_TRY(impl->reconcile_with_tier(names, &ids));
    const std::map<SegmentId, std::uint64_t>& remote = impl->remote;

    if (options.read_only) {
        // Every segment counts as sealed; there is no active one (id 0).
        HIODSFS_TRY(impl->add_sealed_files(ids.data(), ids.data() + ids.size()));
        impl->add_sealed_remote();
        impl->hits = 0;  // the opens above were no reads
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
        HIODSFS_TRY(m.remove_from_tier(segment));
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
    if (m.options.tier != nullptr) {
        std::lock_guard files_lock(m.files_mu);
        m.cache.erase(segment);
    }
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
    std::lock_guard files_lock(impl_->files_mu);
    return impl_->cache.bytes() + w.end();
}

Status SegmentStore::finish_uploads() {
    Impl& m = *impl_;
    if (m.options.tier == nullptr || m.options.read_only) return Status::ok();
    m.stop_uploader();
    std::deque<SegmentId> left;
    {
        std::lock_guard lock(m.files_mu);
        left = m.uploads;
    }
    Status first;
    for (SegmentId id : left) {
        {
            std::lock_guard lock(m.files_mu);
            if (std::find(m.uploads.begin(), m.uploads.end(), id) == m.uploads.end()) continue;
            m.uploading = id;
        }
        std::uint64_t size = 0;
        const Status st = m.upload(id, &size);
        std::lock_guard lock(m.files_mu);
        m.upload_ended_locked(id, st, size);
        if (!st && first.is_ok()) first = st;
    }
    if (!first.is_ok()) {
        std::lock_guard lock(m.files_mu);
        return Status::error(first.err(), std::to_string(m.uploads.size()) +
                                              " sealed segments stay in " + m.dir +
                                              " only, to be uploaded at the next mount: " +
                                              first.message());
    }
    return Status::ok();
}

Status SegmentStore::push_to_tier(SegmentPosition upto) {
    Impl& m = *impl_;
    if (m.options.tier == nullptr || m.options.read_only || upto.segment == 0) return Status::ok();
    // What is not in the tier whole: sealed segments waiting for their
    // upload, and the active one. Segments after `upto` hold nothing the
    // commit refers to.
    struct Push {
        SegmentId id;
        std::uint64_t from, to;
    };
    std::vector<Push> todo;
    {
        std::lock_guard lock(m.writer.mu);
        std::lock_guard files_lock(m.files_mu);
        const std::map<SegmentId, std::uint64_t>& sealed = m.writer.sealed();
        std::vector<std::pair<SegmentId, std::uint64_t>> candidates;
        for (SegmentId id : m.uploads) {
            auto it = sealed.find(id);
            if (it != sealed.end()) candidates.emplace_back(id, it->second);
        }
        if (sealed.count(upto.segment) == 0) candidates.emplace_back(upto.segment, upto.offset);
        for (const auto& [id, size] : candidates) {
            if (id > upto.segment || m.remote.count(id) != 0) continue;
            const std::uint64_t to = id == upto.segment ? std::min(size, upto.offset) : size;
            auto p = m.pushed.find(id);
            const std::uint64_t from = p == m.pushed.end() ? 0 : p->second;
            if (to > from) todo.push_back(Push{id, from, to});
        }
    }
    constexpr std::uint64_t kPiece = 8u << 20;  // bounds the memory of a long push
    std::vector<char> bytes;
    for (const Push& p : todo) {
        std::unique_ptr<File> f;
        Status opened = m.env->open(m.path(p.id), OpenMode::kRead, &f);
        if (opened.err() == ENOENT) {
            {
                // Put whole by the uploader since the list was made, and
                // evicted: nothing left to push.
                std::lock_guard files_lock(m.files_mu);
                if (m.remote.count(p.id) != 0) continue;
            }
            std::lock_guard lock(m.writer.mu);
            if (m.writer.sealed().count(p.id) == 0 && p.id != m.writer.active())
                continue;  // compaction removed it
        }
        HIODSFS_TRY(opened);
        for (std::uint64_t at = p.from; at < p.to;) {
            const std::size_t n = static_cast<std::size_t>(std::min(kPiece, p.to - at));
            bytes.resize(n);
            std::size_t got = 0;
            HIODSFS_TRY(f->pread(bytes.data(), n, at, &got));
            if (got != n) return Status::error(EIO, m.path(p.id) + " is shorter than its synced bytes");
            Status st = m.options.tier->put_range(p.id, at, bytes.data(), n);
            if (!st) {
                return Status::error(EIO, "writing segment " + std::to_string(p.id) + "'s synced bytes to " +
                                                   m.options.tier->describe() + ": " + st.message());
            }
            at += n;
            std::lock_guard files_lock(m.files_mu);
            if (m.remote.count(p.id) == 0) m.pushed[p.id] = std::max(m.pushed[p.id], at);
        }
    }
    return Status::ok();
}

bool SegmentStore::in_directory(SegmentId segment) {
    Impl& m = *impl_;
    if (m.options.tier == nullptr) return true;
    std::lock_guard lock(m.files_mu);
    return m.cache.contains(segment) || segment == m.writer.active_id();
}

bool SegmentStore::tier_stats(SegmentTierStats* out) {
    Impl& m = *impl_;
    if (m.options.tier == nullptr) return false;
    std::lock_guard lock(m.files_mu);
    *out = SegmentTierStats{};
    out->where = m.options.tier->describe();
    out->tier_segments = m.remote.size();
    for (const auto& [id, size] : m.remote) out->tier_bytes += size;
    out->cached_segments = m.cache.count();
    out->cached_bytes = m.cache.bytes();
    out->cache_limit = m.cache.limit();
    out->pending_uploads = m.uploads.size();
    out->uploads = m.uploads_done;
    out->upload_failures = m.upload_failures;
    out->evictions = m.evictions;
    out->cache_hits = m.hits;
    out->cache_misses = m.misses;
    out->fetched_bytes = m.fetched_bytes;
    out->upload_error = m.upload_error.is_ok() ? "" : m.upload_error.message();
    return true;
}

SegmentPosition SegmentStore::append_position() {
    std::lock_guard lock(impl_->writer.mu);
    return SegmentPosition{impl_->writer.active(), impl_->writer.end()};
}

SegmentId SegmentStore::active_segment() { return impl_->writer.active_id(); }

}  // namespace hiodsfs
