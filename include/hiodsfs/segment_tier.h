// SegmentTier: where sealed segments live beyond the local disk (Ceph RADOS
// for the daemon, memory for tests). A segment is put once, whole, after it
// is sealed and never changes there; the segment store keeps the local
// segments/ directory as a bounded cache in front of it (segment_store.h).
// Thread-safety: implementations are safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

class SegmentTier {
public:
    virtual ~SegmentTier() = default;
    // Where the segments are, for messages and BACKEND ("rados:pool/store").
    virtual std::string describe() const = 0;
    // Stores a sealed segment's bytes whole, replacing nothing a reader
    // could see half-written (an object write is atomic).
    virtual Status put(SegmentId segment, const void* data, std::size_t len) = 0;
    // The whole segment.
    virtual Status get(SegmentId segment, std::vector<char>* out) = 0;
    // ENOENT when it is not there.
    virtual Status remove(SegmentId segment) = 0;
    // Every segment stored, with its size in bytes, by id.
    virtual Status list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) = 0;
};

}  // namespace hiodsfs
