// SegmentTier: where sealed segments live beyond the local disk (Ceph RADOS
// for the daemon, memory for tests). A segment is uploaded once after it is
// sealed (whole, or by range in pieces) and never changes there after;
// before that, the synced bytes a metadata commit refers to are written
// into it by range (put_range). The
// segment store keeps the local segments/ directory as a bounded cache in
// front of it (segment_store.h). The tier also keeps the store's metadata
// objects, by names of the store's own (engine/meta_tier.h).
// A tier shared by successive holders of a store (one mount, one fsck at a
// time: RadosTier) gives each an epoch, one more than the last one's, and
// a range of segment ids of its own: the names a holder writes are never
// another's (the metadata objects carry the epoch, the segments ids that
// no other holder may make), so what a holder that lost the store still
// sends can never land on the next one's objects.
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
    // Up to len bytes of the segment at offset (fewer past its end): how a
    // fetch brings a segment back without holding all of it in memory.
    virtual Status get_range(SegmentId segment, std::uint64_t offset, std::size_t len, std::vector<char>* out) = 0;
    // Writes len bytes at offset into the segment's object (creating it):
    // bytes of a segment not yet put whole, which a metadata journal record
    // is about to refer to, or a piece of an upload. Never changes bytes
    // already there (it writes the same ones again at most).
    virtual Status put_range(SegmentId segment, std::uint64_t offset, const void* data, std::size_t len) = 0;
    // ENOENT when it is not there.
    virtual Status remove(SegmentId segment) = 0;
    // Every segment stored, with its size in bytes, by id.
    virtual Status list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) = 0;

    // The store's metadata objects, named by the caller ("journal.…",
    // "meta…"; never a segment's name). put_object replaces one whole and
    // atomically; append_object adds len bytes at its end, all or nothing;
    // get_object and remove_object fail with ENOENT when it is not there.
    virtual Status put_object(const std::string& name, const void* data, std::size_t len) = 0;
    virtual Status append_object(const std::string& name, const void* data, std::size_t len) = 0;
    virtual Status get_object(const std::string& name, std::vector<char>* out) = 0;
    virtual Status remove_object(const std::string& name) = 0;
    // The names that start with prefix, sorted.
    virtual Status list_objects(const std::string& prefix, std::vector<std::string>* out) = 0;

    // This holder's epoch, which the metadata objects it writes carry in
    // their names; 0 for a tier without holders.
    virtual std::uint32_t epoch() const { return 0; }
    // The first segment id this holder may make: ids before it may be
    // another holder's, one that lost the store and may still write them.
    virtual SegmentId first_new_segment() const { return 1; }
    // Called before a segment of id `id` (at least first_new_segment()) is
    // made; fails once another holder has the store, which then never
    // makes that id.
    virtual Status reserve_segment(SegmentId id) {
        (void)id;
        return Status::ok();
    }
};

}  // namespace hiodsfs
