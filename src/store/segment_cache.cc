#include "store/segment_cache.h"

namespace hiodsfs {

void SegmentCache::add(SegmentId id, std::uint64_t bytes, bool uploaded) {
    erase(id);
    order_.push_front(id);
    entries_.emplace(id, Entry{bytes, uploaded, order_.begin()});
    bytes_ += bytes;
}

void SegmentCache::mark_uploaded(SegmentId id) {
    auto it = entries_.find(id);
    if (it != entries_.end()) it->second.uploaded = true;
}

void SegmentCache::touch(SegmentId id) {
    auto it = entries_.find(id);
    if (it != entries_.end()) order_.splice(order_.begin(), order_, it->second.pos);
}

void SegmentCache::erase(SegmentId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    bytes_ -= it->second.bytes;
    order_.erase(it->second.pos);
    entries_.erase(it);
}

std::vector<SegmentId> SegmentCache::victims(std::uint64_t other_bytes) const {
    std::vector<SegmentId> out;
    std::uint64_t held = bytes_ + other_bytes;
    if (held <= limit_ || order_.size() < 2) return out;
    // From the least recently used end, stopping before the most recent.
    for (auto it = order_.rbegin(); held > limit_ && std::next(it) != order_.rend(); ++it) {
        const Entry& e = entries_.at(*it);
        if (!e.uploaded) continue;
        out.push_back(*it);
        held -= e.bytes;
    }
    return out;
}

}  // namespace hiodsfs
