#include "store/segment_cache.h"

namespace hiodsfs {

void SegmentCache::add(SegmentId id, std::uint64_t bytes, bool uploaded, bool fetched) {
    erase(id);
    std::list<SegmentId>& into = fetched ? probation_ : order_;
    into.push_front(id);
    entries_.emplace(id, Entry{bytes, uploaded, fetched, fetched ? ++fetches_ : 0, into.begin()});
    bytes_ += bytes;
}

void SegmentCache::mark_uploaded(SegmentId id) {
    auto it = entries_.find(id);
    if (it != entries_.end()) it->second.uploaded = true;
}

void SegmentCache::touch(SegmentId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (e.probation) {
        // Reads of the visit that fetched it (a scan going through it) do
        // not count; a use after two other fetches does.
        if (fetches_ < e.fetched_at + 2) return;
        e.probation = false;
        order_.splice(order_.begin(), probation_, e.pos);
        return;
    }
    order_.splice(order_.begin(), order_, e.pos);
}

void SegmentCache::erase(SegmentId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    bytes_ -= it->second.bytes;
    (it->second.probation ? probation_ : order_).erase(it->second.pos);
    entries_.erase(it);
}

std::vector<SegmentId> SegmentCache::victims(std::uint64_t other_bytes) const {
    std::vector<SegmentId> out;
    std::uint64_t held = bytes_ + other_bytes;
    if (held <= limit_ || entries_.size() < 2) return out;
    // Each list from its oldest end. The one kept whatever the limit is the
    // newest fetch, or with none on probation the most recently used.
    for (const std::list<SegmentId>* list : {&probation_, &order_}) {
        const bool keep_newest = list == &probation_ || probation_.empty();
        for (auto it = list->rbegin(); held > limit_ && it != list->rend(); ++it) {
            if (keep_newest && std::next(it) == list->rend()) break;
            const Entry& e = entries_.at(*it);
            if (!e.uploaded) continue;
            out.push_back(*it);
            held -= e.bytes;
        }
    }
    return out;
}

}  // namespace hiodsfs
