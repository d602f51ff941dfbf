// OpenSegments: the segment files kept open for reads, keyed by segment,
// the least recently used closed first once more than a limit are open.
// Bookkeeping of handles only: a handle dropped here is closed when the
// last reader that still holds it lets go.
// Thread-safety: none; the segment store guards it with its files mutex.
#pragma once

#include <algorithm>
#include <cstddef>
#include <list>
#include <memory>
#include <unordered_map>

#include "hiodsfs/env.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

class OpenSegments {
public:
    // At least one stays open, whatever the limit.
    explicit OpenSegments(std::size_t limit) : limit_(std::max<std::size_t>(limit, 1)) {}

    // The open file of segment id, which becomes the most recently used;
    // false when it is not open. Inline: every read of a file asks.
    bool find(SegmentId id, std::shared_ptr<File>* out) {
        auto it = files_.find(id);
        if (it == files_.end()) return false;
        lru_.splice(lru_.begin(), lru_, it->second.pos);
        *out = it->second.file;
        return true;
    }
    // Keeps `file` as segment id's, the most recently used, in place of
    // one kept before; closes the least recently used past the limit.
    void put(SegmentId id, std::shared_ptr<File> file);
    void drop(SegmentId id);
    std::size_t count() const { return files_.size(); }

private:
    struct Cached {
        std::shared_ptr<File> file;
        std::list<SegmentId>::iterator pos;
    };
    std::size_t limit_;
    std::list<SegmentId> lru_;  // most recent first
    std::unordered_map<SegmentId, Cached> files_;
};

}  // namespace hiodsfs
