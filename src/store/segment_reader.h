// SegmentReader: the read side of the segment store. It reads records
// (read(), read_run(), check_header() of SegmentStore) and checks each one
// read back, from the files, or from the writer's buffers for bytes of the
// active segment not written yet, and keeps segment files open for reads
// (OpenSegments, least recently used closed first). With a tier, a segment
// the directory does not hold is fetched back through the TierCache first
// (or read into memory by a read-only store).
//
// Thread-safety: all methods may be called concurrently. Reads of bytes
// already in a file take no writer lock: the active segment's id and
// written length are published through the Appender's atomics, and only a
// read that may reach into the write buffer locks. The open files are
// guarded by files_mu(), which the tier cache shares. Lock order: the
// writer's mu, then files_mu().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"
#include "store/open_segments.h"

namespace hiodsfs {

class Appender;
class TierCache;

class SegmentReader {
public:
    // writer outlives this.
    SegmentReader(Env* env, std::string dir, std::size_t max_open_segments, Appender& writer)
        : env_(env), dir_(std::move(dir)), writer_(writer), open_files_(max_open_segments) {}
    SegmentReader(const SegmentReader&) = delete;
    SegmentReader& operator=(const SegmentReader&) = delete;

    // With a tier, before the first read; it outlives this.
    void set_tier(TierCache* tier) { tier_ = tier; }
    // The open files and their lock, for the tier cache (eviction closes
    // what it deletes).
    std::mutex& files_mu() { return files_mu_; }
    OpenSegments& open_files() { return open_files_; }

    // Keeps a segment's file open for reads, or closes it.
    void cache_put(SegmentId id, std::shared_ptr<File> file);
    void cache_drop(SegmentId id);
    // Takes the segment's file out of the cache and hands it over (null if
    // it was not open), for the caller to close where it chooses.
    std::shared_ptr<File> cache_take(SegmentId id);
    // An open file of the segment: kept open, opened, or fetched from the
    // tier first.
    Status file_for_read(SegmentId id, std::shared_ptr<File>* out);

    // SegmentStore::read(), read_run() and check_header().
    Status read(const ChunkLocation& loc, ChunkId chunk, void* out, bool* damaged);
    Status read_run(const ChunkLocation* locs, const ChunkId* chunks, std::size_t n,
                    char* const* dests);
    Status check_header(const ChunkLocation& loc, ChunkId chunk);

private:
    static constexpr std::uint32_t kHeaderBytes = SegmentStore::kHeaderBytes;
    static constexpr std::size_t kMaxRunBytes = SegmentStore::kMaxRunBytes;

    std::string path(SegmentId id) const;
    void cache_put_locked(SegmentId id, std::shared_ptr<File> file);
    void note_hit_locked(SegmentId id);

    Env* const env_;
    const std::string dir_;
    Appender& writer_;
    TierCache* tier_ = nullptr;

    std::mutex files_mu_;
    OpenSegments open_files_;  // LRU, guarded by files_mu_
};

}  // namespace hiodsfs
