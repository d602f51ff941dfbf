#include "store/tier_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/thread_name.h"
#include "store/appender.h"
#include "store/open_segments.h"
#include "store/segment_format.h"

namespace hiodsfs {
namespace {

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

TierCache::TierCache(Env* env, std::string dir, const SegmentStoreOptions& options, Appender& writer,
                     std::mutex& files_mu, OpenSegments& open_files)
    : env_(env),
      dir_(std::move(dir)),
      options_(options),
      tier_(options.tier),
      writer_(writer),
      files_mu_(files_mu),
      open_files_(open_files),
      cache_(options.cache_bytes) {}

std::string TierCache::path(SegmentId id) const { return dir_ + "/" + segment_file_name(id); }
std::string TierCache::fetch_path(SegmentId id) const { return dir_ + "/" + fetch_file_name(id); }

void TierCache::add_local(SegmentId id, std::uint64_t size) {
    std::lock_guard lock(files_mu_);
    const bool uploaded = remote_.count(id) != 0;
    cache_.add(id, size, uploaded);
    if (!uploaded && !options_.read_only) uploads_.push_back(id);
}

void TierCache::start() {
    uploader_ = std::thread([this] {
        name_this_thread("seg-uploader");
        uploader_loop();
    });
}

bool TierCache::reads_into_memory(SegmentId id) {
    if (!options_.tier_reads_in_memory || !options_.read_only) return false;
    std::lock_guard lock(files_mu_);
    return !cache_.contains(id) && remote_.count(id) != 0;
}

void TierCache::add_sealed(SegmentId id, std::uint64_t size) {
    {
        std::lock_guard files_lock(files_mu_);
        cache_.add(id, size, false);
        uploads_.push_back(id);
    }
    tier_cv_.notify_all();
}

void TierCache::erase_cached(SegmentId id) {
    std::lock_guard files_lock(files_mu_);
    cache_.erase(id);
}

std::uint64_t TierCache::cached_bytes() {
    std::lock_guard files_lock(files_mu_);
    return cache_.bytes();
}

// Brings a segment the tier holds back into the directory, whole: to a
// temporary file, synced, then renamed, so a crash never leaves a
// partial copy under the segment's name. In pieces, so a fetch holds
// fetch_piece_bytes of memory, not the segment.
Status TierCache::fetch(SegmentId id) {
    const std::size_t piece_bytes = std::max<std::size_t>(options_.fetch_piece_bytes, 1);
    std::lock_guard serial(fetch_mu_);
    std::uint64_t size = 0;
    {
        std::lock_guard lock(files_mu_);
        if (cache_.contains(id)) return Status::ok();  // fetched meanwhile
        auto it = remote_.find(id);
        if (it == remote_.end()) {
            return Status::error(ENOENT, path(id) + " is not in the cache directory and " +
                                             tier_->describe() + " does not hold it");
        }
        size = it->second;
    }
    const std::string tmp = fetch_path(id);
    (void)env_->unlink(tmp);  // a copy a failed fetch left
    std::unique_ptr<File> f;
    HIODSFS_TRY(env_->open(tmp, OpenMode::kCreateNew, &f));
    struct RemoveUnlessKept {
        Env* env;
        const std::string& path;
        bool kept = false;
        ~RemoveUnlessKept() {
            if (!kept) (void)env->unlink(path);
        }
    } cleanup{env_, tmp};
    std::vector<char> piece;
    std::uint64_t at = 0;
    for (;;) {
        Status st = tier_->get_range(id, at, piece_bytes, &piece);
        if (!st) return Status::error(st.err(), "fetching segment " + std::to_string(id) + ": " + st.message());
        if (piece.empty()) break;
        st = f->pwrite(piece.data(), piece.size(), at);
        if (!st) return Status::error(st.err(), "caching segment " + std::to_string(id) + ": " + st.message());
        at += piece.size();
        if (piece.size() < piece_bytes) break;
    }
    if (at != size) {
        return Status::error(EIO, "segment " + std::to_string(id) + " in " + tier_->describe() +
                                      " has " + std::to_string(at) + " bytes, " + std::to_string(size) +
                                      " expected");
    }
    Status st = f->sync();
    f.reset();
    if (st) st = env_->rename(tmp, path(id));
    if (!st) return Status::error(st.err(), "caching segment " + std::to_string(id) + ": " + st.message());
    cleanup.kept = true;
    {
        std::lock_guard lock(files_mu_);
        cache_.add(id, size, true, true);
        ++misses_;
        fetched_bytes_ += size;
    }
    tier_cv_.notify_all();  // the uploader evicts what no longer fits
    return Status::ok();
}

// The segment whole from the tier into memory, replacing the one read
// before (readers that still hold that one keep it until they are done).
Status TierCache::read_into_memory(SegmentId id, std::shared_ptr<File>* out) {
    std::lock_guard serial(fetch_mu_);
    if (in_memory_id_ != id) {
        in_memory_.reset();  // before the next, so two never add up
        std::vector<char> bytes;
        Status st = tier_->get(id, &bytes);
        if (!st) return Status::error(st.err(), "reading segment " + std::to_string(id) + " from " +
                                                    tier_->describe() + ": " + st.message());
        const std::size_t size = bytes.size();
        in_memory_ = std::make_shared<SegmentInMemory>(std::move(bytes));
        in_memory_id_ = id;
        std::lock_guard lock(files_mu_);
        ++misses_;
        fetched_bytes_ += size;
    }
    *out = in_memory_;
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
Status TierCache::upload(SegmentId id, std::uint64_t* size) {
    std::unique_ptr<File> f;
    HIODSFS_TRY(env_->open(path(id), OpenMode::kRead, &f));
    HIODSFS_TRY(f->size(size));
    HIODSFS_TRY(f->sync());
    std::uint64_t from = 0;
    {
        std::lock_guard lock(files_mu_);
        auto p = pushed_.find(id);
        if (p != pushed_.end()) from = std::min(p->second, *size);
    }
    const std::uint64_t piece = std::max<std::size_t>(options_.upload_piece_bytes, 1);
    std::vector<char> bytes;
    for (std::uint64_t at = from; at < *size;) {
        bytes.resize(static_cast<std::size_t>(std::min(piece, *size - at)));
        std::size_t got = 0;
        HIODSFS_TRY(f->pread(bytes.data(), bytes.size(), at, &got));
        if (got != bytes.size()) return Status::error(EIO, path(id) + " shrank while being uploaded");
        if (at == 0 && bytes.size() == *size) return tier_->put(id, bytes.data(), bytes.size());
        HIODSFS_TRY(tier_->put_range(id, at, bytes.data(), bytes.size()));
        at += bytes.size();
    }
    return Status::ok();
}

// Records how an upload of `id` ended; files_mu held.
void TierCache::upload_ended_locked(SegmentId id, const Status& st, std::uint64_t size) {
    uploading_ = 0;
    tier_cv_.notify_all();  // remove() may wait for this one
    if (st) {
        auto q = std::find(uploads_.begin(), uploads_.end(), id);
        if (q != uploads_.end()) uploads_.erase(q);
        remote_[id] = size;
        pushed_.erase(id);
        cache_.mark_uploaded(id);
        ++uploads_done_;
        upload_error_ = Status::ok();
        backoff_ = std::chrono::seconds(1);
        return;
    }
    ++upload_failures_;
    if (upload_error_.is_ok() && options_.log) {
        options_.log("hiodsfs: uploading segment " + std::to_string(id) + " to " +
                    tier_->describe() + " failed (the local copy stays; retrying): " +
                    st.message());
    }
    upload_error_ = st;
    retry_at_ = std::chrono::steady_clock::now() + backoff_;
    backoff_ = std::min<std::chrono::seconds>(backoff_ * 2, std::chrono::seconds(30));
}

// Deletes uploaded segments from the directory, least recently used
// first, until it fits cache_bytes; files_mu held.
void TierCache::evict_locked() {
    for (SegmentId id : cache_.victims(writer_.active_written())) {
        if (!env_->unlink(path(id)).is_ok()) continue;  // stays; tried again later
        cache_.erase(id);
        open_files_.drop(id);  // readers holding it keep reading the unlinked file
        ++evictions_;
    }
}

void TierCache::uploader_loop() {
    std::unique_lock lock(files_mu_);
    for (;;) {
        evict_locked();
        if (uploader_stopping_) return;
        if (uploads_.empty()) {
            tier_cv_.wait(lock);
            continue;
        }
        if (std::chrono::steady_clock::now() < retry_at_) {
            tier_cv_.wait_until(lock, retry_at_);
            continue;
        }
        const SegmentId id = uploads_.front();
        uploading_ = id;
        lock.unlock();
        std::uint64_t size = 0;
        const Status st = upload(id, &size);
        lock.lock();
        upload_ended_locked(id, st, size);
    }
}

void TierCache::stop() {
    {
        std::lock_guard lock(files_mu_);
        uploader_stopping_ = true;
    }
    tier_cv_.notify_all();
    if (uploader_.joinable()) uploader_.join();
}

// Takes a segment out of the tier before its local file goes: an
// upload of it in flight ends first, and a queued one is dropped.
Status TierCache::remove(SegmentId id) {
    std::lock_guard serial(fetch_mu_);
    std::unique_lock lock(files_mu_);
    tier_cv_.wait(lock, [&] { return uploading_ != id; });
    auto q = std::find(uploads_.begin(), uploads_.end(), id);
    if (q != uploads_.end()) uploads_.erase(q);
    if (remote_.count(id) == 0 && pushed_.count(id) == 0) return Status::ok();
    lock.unlock();
    Status st = tier_->remove(id);
    if (!st && st.err() != ENOENT) return st;
    lock.lock();
    remote_.erase(id);
    pushed_.erase(id);
    return Status::ok();
}

// At open: what the tier holds, a fetch a crash cut short removed, and
// local copies shorter than the tier's dropped (the tier's is the
// segment once it has it whole). A local copy longer than the tier's
// is the segment: the object holds a prefix of it (the bytes commits
// pushed, or an upload cut short), which the next upload completes.
// ids keeps the rest.
Status TierCache::reconcile(const std::vector<std::string>& names, std::vector<SegmentId>* ids) {
    std::vector<std::pair<SegmentId, std::uint64_t>> held;
    HIODSFS_TRY(tier_->list(&held));
    remote_.insert(held.begin(), held.end());
    if (!options_.read_only) {
        for (const std::string& name : names)
            if (name.size() == 14 && name.compare(8, 6, ".fetch") == 0) (void)env_->unlink(dir_ + "/" + name);
    }
    if (ids->empty() && !remote_.empty() && options_.committed.segment == 0) {
        return Status::error(EEXIST, tier_->describe() + " already holds " +
                                         std::to_string(remote_.size()) +
                                         " segments, but no metadata in " + dir_ +
                                         "/.. refers to them (a store keeps its metadata in "
                                         "its cache_dir: use the one it was made with)");
    }
    const SegmentId wins_from = options_.tier_wins_from.segment;
    std::vector<SegmentId> kept;
    for (SegmentId id : *ids) {
        auto it = remote_.find(id);
        if (it == remote_.end()) {
            if (options_.has_live_chunks && !options_.has_live_chunks(id)) {
                // Nothing committed refers to it: a crash's leftover, or
                // the active segment of a holder the store went on without.
                if (!options_.read_only) HIODSFS_TRY(env_->unlink(path(id)));
                continue;
            }
            if (options_.has_live_chunks && options_.log && !options_.read_only) {
                options_.log("hiodsfs: segment " + std::to_string(id) +
                            " holds bytes the metadata refers to, but " +
                            tier_->describe() +
                            " has no object of it: uploading it again from " + dir_);
            }
            kept.push_back(id);
            continue;
        }
        std::uint64_t size = 0;
        std::unique_ptr<File> f;
        HIODSFS_TRY(env_->open(path(id), OpenMode::kRead, &f));
        HIODSFS_TRY(f->size(&size));
        const bool tier_wins = wins_from != 0 && id >= wins_from;
        if (size > it->second && !tier_wins) {
            pushed_[id] = it->second;
            remote_.erase(it);
        } else if (size != it->second) {
            if (!options_.read_only) HIODSFS_TRY(env_->unlink(path(id)));
            continue;
        }
        kept.push_back(id);
    }
    *ids = std::move(kept);
    return Status::ok();
}

Status TierCache::finish_uploads() {
    if (options_.read_only) return Status::ok();
    stop();
    std::deque<SegmentId> left;
    {
        std::lock_guard lock(files_mu_);
        left = uploads_;
    }
    Status first;
    for (SegmentId id : left) {
        {
            std::lock_guard lock(files_mu_);
            if (std::find(uploads_.begin(), uploads_.end(), id) == uploads_.end()) continue;
            uploading_ = id;
        }
        std::uint64_t size = 0;
        const Status st = upload(id, &size);
        std::lock_guard lock(files_mu_);
        upload_ended_locked(id, st, size);
        if (!st && first.is_ok()) first = st;
    }
    if (!first.is_ok()) {
        std::lock_guard lock(files_mu_);
        return Status::error(first.err(), std::to_string(uploads_.size()) +
                                              " sealed segments stay in " + dir_ +
                                              " only, to be uploaded at the next mount: " +
                                              first.message());
    }
    return Status::ok();
}

Status TierCache::push(SegmentPosition upto) {
    if (options_.read_only || upto.segment == 0) return Status::ok();
    // What is not in the tier whole: sealed segments waiting for their
    // upload, and the active one. Segments after `upto` hold nothing the
    // commit refers to.
    struct Push {
        SegmentId id;
        std::uint64_t from, to;
    };
    std::vector<Push> todo;
    {
        std::lock_guard lock(writer_.mu);
        std::lock_guard files_lock(files_mu_);
        const std::map<SegmentId, std::uint64_t>& sealed = writer_.sealed();
        std::vector<std::pair<SegmentId, std::uint64_t>> candidates;
        for (SegmentId id : uploads_) {
            auto it = sealed.find(id);
            if (it != sealed.end()) candidates.emplace_back(id, it->second);
        }
        if (sealed.count(upto.segment) == 0) candidates.emplace_back(upto.segment, upto.offset);
        for (const auto& [id, size] : candidates) {
            if (id > upto.segment || remote_.count(id) != 0) continue;
            const std::uint64_t to = id == upto.segment ? std::min(size, upto.offset) : size;
            auto p = pushed_.find(id);
            const std::uint64_t from = p == pushed_.end() ? 0 : p->second;
            if (to > from) todo.push_back(Push{id, from, to});
        }
    }
    constexpr std::uint64_t kPiece = 8u << 20;  // bounds the memory of a long push
    std::vector<char> bytes;
    for (const Push& p : todo) {
        std::unique_ptr<File> f;
        Status opened = env_->open(path(p.id), OpenMode::kRead, &f);
        if (opened.err() == ENOENT) {
            {
                // Put whole by the uploader since the list was made, and
                // evicted: nothing left to push.
                std::lock_guard files_lock(files_mu_);
                if (remote_.count(p.id) != 0) continue;
            }
            std::lock_guard lock(writer_.mu);
            if (writer_.sealed().count(p.id) == 0 && p.id != writer_.active())
                continue;  // compaction removed it
        }
        HIODSFS_TRY(opened);
        for (std::uint64_t at = p.from; at < p.to;) {
            const std::size_t n = static_cast<std::size_t>(std::min(kPiece, p.to - at));
            bytes.resize(n);
            std::size_t got = 0;
            HIODSFS_TRY(f->pread(bytes.data(), n, at, &got));
            if (got != n) return Status::error(EIO, path(p.id) + " is shorter than its synced bytes");
            Status st = tier_->put_range(p.id, at, bytes.data(), n);
            if (!st) {
                return Status::error(EIO, "writing segment " + std::to_string(p.id) + "'s synced bytes to " +
                                                   tier_->describe() + ": " + st.message());
            }
            at += n;
            std::lock_guard files_lock(files_mu_);
            if (remote_.count(p.id) == 0) pushed_[p.id] = std::max(pushed_[p.id], at);
        }
    }
    return Status::ok();
}

bool TierCache::in_directory(SegmentId segment) {
    std::lock_guard lock(files_mu_);
    return cache_.contains(segment) || segment == writer_.active_id();
}

void TierCache::stats(SegmentTierStats* out) {
    std::lock_guard lock(files_mu_);
    *out = SegmentTierStats{};
    out->where = tier_->describe();
    out->tier_segments = remote_.size();
    for (const auto& [id, size] : remote_) out->tier_bytes += size;
    out->cached_segments = cache_.count();
    out->cached_bytes = cache_.bytes();
    out->cache_limit = cache_.limit();
    out->pending_uploads = uploads_.size();
    out->uploads = uploads_done_;
    out->upload_failures = upload_failures_;
    out->evictions = evictions_;
    out->cache_hits = hits_;
    out->cache_misses = misses_;
    out->fetched_bytes = fetched_bytes_;
    out->upload_error = upload_error_.is_ok() ? "" : upload_error_.message();
}

}  // namespace hiodsfs
