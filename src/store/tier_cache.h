// TierCache: the segment store's side of a SegmentTier (segment_tier.h).
// It keeps what the tier holds (with sizes), uploads sealed segments in a
// background thread (retried with a backoff while they fail), keeps the
// directory as a bounded cache in front of the tier (SegmentCache: deletes
// uploaded segments past cache_bytes), fetches a segment back on a read
// that misses, pushes the synced bytes a commit refers to before its
// journal record does, removes segments from the tier, and reconciles the
// directory with the tier at open. A read-only store (hiodsfs-fsck) may
// read a segment from the tier into memory instead of fetching it.
//
// Thread-safety: its state is guarded by the segment store's files mutex
// (shared with the open files, whose handles eviction drops), given at
// construction; methods named *_locked require it, the others take it.
// fetch_mu serializes fetches and tier removals. Lock order: the writer's
// mu, then fetch_mu, then the files mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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
#include "store/segment_cache.h"

namespace hiodsfs {

class Appender;
class OpenSegments;

class TierCache {
public:
    // options.tier is the tier; writer and the files mutex with the open
    // files it guards belong to the segment store and outlive this.
    TierCache(Env* env, std::string dir, const SegmentStoreOptions& options, Appender& writer,
              std::mutex& files_mu, OpenSegments& open_files);
    TierCache(const TierCache&) = delete;
    TierCache& operator=(const TierCache&) = delete;

    // ---- at open, before start(): no other thread uses it yet
    // What the tier holds, a fetch a crash cut short removed, and local
    // copies shorter than the tier's dropped (tier_cache.cc says more).
    // `names` are the directory's entries; ids keeps the local segments
    // that stay.
    Status reconcile(const std::vector<std::string>& names, std::vector<SegmentId>* ids);
    const std::map<SegmentId, std::uint64_t>& remote() const { return remote_; }
    // A sealed segment in the directory, at open.
    void add_local(SegmentId id, std::uint64_t size);
    void reset_hits() { hits_ = 0; }  // the opens at open() were no reads
    // Starts the uploader (read-write stores).
    void start();
    // Stops the uploader; what it did not upload stays queued.
    void stop();

    // ---- the read path, files mutex held
    bool cached_locked(SegmentId id) const { return cache_.contains(id); }
    void note_hit_locked(SegmentId id) {
        ++hits_;
        cache_.touch(id);
    }
    // ---- the read path, without the files mutex
    // Whether a read-only store reads segment id from the tier into memory
    // (tier_reads_in_memory, and the directory does not hold it).
    bool reads_into_memory(SegmentId id);
    // Brings a segment the tier holds back into the directory, whole.
    Status fetch(SegmentId id);
    // The segment whole from the tier into memory, replacing the one read
    // before (readers that still hold that one keep it until they are done).
    Status read_into_memory(SegmentId id, std::shared_ptr<File>* out);

    // ---- the store's operations
    // A segment just sealed, of `size` bytes, to upload.
    void add_sealed(SegmentId id, std::uint64_t size);
    // Takes a segment out of the tier before its local file goes: an
    // upload of it in flight ends first, and a queued one is dropped.
    Status remove(SegmentId id);
    // The segment's local file was removed.
    void erase_cached(SegmentId id);
    // Bytes of the sealed segments in the directory.
    std::uint64_t cached_bytes();
    // SegmentStore::finish_uploads(), push_to_tier(), in_directory() and
    // tier_stats().
    Status finish_uploads();
    Status push(SegmentPosition upto);
    bool in_directory(SegmentId id);
    void stats(SegmentTierStats* out);

private:
    std::string path(SegmentId id) const;
    std::string fetch_path(SegmentId id) const;
    Status upload(SegmentId id, std::uint64_t* size);
    void upload_ended_locked(SegmentId id, const Status& st, std::uint64_t size);
    void evict_locked();
    void uploader_loop();

    Env* const env_;
    const std::string dir_;
    const SegmentStoreOptions& options_;
    SegmentTier* const tier_;
    Appender& writer_;
    std::mutex& files_mu_;
    OpenSegments& open_files_;

    SegmentCache cache_;                         // sealed segments in the directory
    std::map<SegmentId, std::uint64_t> remote_;  // what the tier holds, with sizes
    std::deque<SegmentId> uploads_;              // sealed, in the directory only, oldest first
    // Segments not yet put whole whose first bytes push() wrote.
    std::map<SegmentId, std::uint64_t> pushed_;
    SegmentId uploading_ = 0;  // being put, without the lock
    bool uploader_stopping_ = false;
    Status upload_error_;  // the last failure, until an upload works again
    std::chrono::steady_clock::time_point retry_at_{};
    std::chrono::seconds backoff_{1};
    std::condition_variable tier_cv_;  // work for the uploader; an upload ended
    std::thread uploader_;
    std::uint64_t uploads_done_ = 0, upload_failures_ = 0, evictions_ = 0;
    std::uint64_t hits_ = 0, misses_ = 0, fetched_bytes_ = 0;
    // One fetch or tier removal at a time: a removal never races a fetch
    // that would bring the segment back into the directory.
    std::mutex fetch_mu_;
    // tier_reads_in_memory: the segment read last from the tier (fetch_mu).
    SegmentId in_memory_id_ = 0;
    std::shared_ptr<File> in_memory_;
};

}  // namespace hiodsfs
