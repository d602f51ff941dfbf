#include "store/open_segments.h"

namespace hiodsfs {

void OpenSegments::put(SegmentId id, std::shared_ptr<File> file) {
    auto it = files_.find(id);
    if (it != files_.end()) {
        lru_.erase(it->second.pos);
        files_.erase(it);
    }
    lru_.push_front(id);
    files_.emplace(id, Cached{std::move(file), lru_.begin()});
    while (files_.size() > limit_) {
        files_.erase(lru_.back());
        lru_.pop_back();
    }
}

void OpenSegments::drop(SegmentId id) {
    auto it = files_.find(id);
    if (it == files_.end()) return;
    lru_.erase(it->second.pos);
    files_.erase(it);
}

}  // namespace hiodsfs
