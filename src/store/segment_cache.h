// SegmentCache: which sealed segments the local segments/ directory holds
// when a SegmentTier keeps them too, in order of last use, and which may be
// deleted locally to bring the directory back under its size limit. Pure
// bookkeeping, no I/O: the segment store does the unlinks.
//
// Scan-resistant: a segment fetched from the tier is on probation until it
// is used again after two other fetches, and probation goes first, oldest
// fetch first. A sequential read of more than the cache then evicts the
// segments it has just read, not the cached ones it is about to read (with
// plain LRU every segment of such a scan was a miss).
// Thread-safety: none; the segment store guards it with its files mutex.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "hiodsfs/types.h"

namespace hiodsfs {

class SegmentCache {
public:
    explicit SegmentCache(std::uint64_t limit_bytes = 0) : limit_(limit_bytes) {}

    void set_limit(std::uint64_t limit_bytes) { limit_ = limit_bytes; }
    std::uint64_t limit() const { return limit_; }

    // A local segment file of `bytes`, used now; `uploaded` when the tier
    // holds it too (only then may it be evicted); `fetched` when it was
    // just brought back from the tier (on probation).
    void add(SegmentId id, std::uint64_t bytes, bool uploaded, bool fetched = false);
    void mark_uploaded(SegmentId id);
    // A read used it: it becomes the most recently used (one on probation
    // only once two other segments were fetched since it was).
    void touch(SegmentId id);
    void erase(SegmentId id);
    bool contains(SegmentId id) const { return entries_.count(id) != 0; }
    // Bytes of the segments held (the active segment is not among them).
    std::uint64_t bytes() const { return bytes_; }
    std::size_t count() const { return entries_.size(); }

    // The segments to delete locally so that they and `other_bytes` (the
    // active segment) fit the limit: those on probation, oldest fetch
    // first, then the least recently used: only uploaded ones, and never
    // the newest fetch (with none on probation, the most recently used),
    // so a cache smaller than a segment still serves the reads of the
    // segment just fetched.
    // Fewer (or none) when the rest may not go.
    std::vector<SegmentId> victims(std::uint64_t other_bytes) const;

private:
    struct Entry {
        std::uint64_t bytes = 0;
        bool uploaded = false;
        bool probation = false;
        std::uint64_t fetched_at = 0;  // fetches_ when it was fetched
        std::list<SegmentId>::iterator pos;  // in probation_ or order_
    };
    std::uint64_t limit_;
    std::uint64_t bytes_ = 0;
    std::uint64_t fetches_ = 0;
    std::list<SegmentId> order_;      // most recently used first
    std::list<SegmentId> probation_;  // newest fetch first
    std::unordered_map<SegmentId, Entry> entries_;
};

}  // namespace hiodsfs
