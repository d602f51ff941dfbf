#include "engine/pending_dirty.h"

#include "dedup/background_pass.h"

namespace hiodsfs {

bool PendingDirty::covers(InodeId ino, std::uint64_t offset, std::uint64_t length) const {
    const auto f = by_file_.find(ino);
    if (f == by_file_.end()) return false;
    const std::uint64_t end = offset + length;
    // Records starting in [offset - longest_, offset]: only they can cover it.
    const std::uint64_t from = offset > longest_ ? offset - longest_ : 0;
    for (auto it = f->second.lower_bound(from); it != f->second.end() && it->first <= offset; ++it)
        if (it->second.first >= end) return true;
    return false;
}

void PendingDirty::add(const std::vector<Range>& ranges) {
    for (const Range& r : ranges) {
        if (count_ >= kMaxRanges || r.length == 0) return;
        by_file_[r.ino].emplace(r.offset, std::pair{r.offset + r.length, r.seq});
        ++count_;
        if (r.length > longest_) longest_ = r.length;
    }
}

void PendingDirty::taken(const std::vector<DirtyRecord>& records) {
    for (const DirtyRecord& r : records) {
        const auto f = by_file_.find(r.ino);
        if (f == by_file_.end()) continue;
        auto [lo, hi] = f->second.equal_range(r.offset);
        for (auto it = lo; it != hi; ++it) {
            if (it->second.second != r.seq) continue;
            f->second.erase(it);
            --count_;
            break;
        }
        if (f->second.empty()) by_file_.erase(f);
    }
}

}  // namespace hiodsfs
