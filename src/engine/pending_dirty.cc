#include "engine/pending_dirty.h"

#include "dedup/background_pass.h"

namespace hiodsfs {

bool PendingDirty::covers(InodeId ino, std::uint64_t offset, std::uint64_t length) const {
    const auto f = by_file_.find(ino);
    if (f == by_file_.end()) return false;
    const std::uint64_t end = offset + length;
    // Short records starting in [offset - kShortMost, offset]: only they can cover it.
    const std::uint64_t from = offset > kShortMost ? offset - kShortMost : 0;
    const Ranges& s = f->second.short_ranges;
    for (auto it = s.lower_bound(from); it != s.end() && it->first <= offset; ++it)
        if (it->second.first >= end) return true;
    const Ranges& l = f->second.long_ranges;
    for (auto it = l.begin(); it != l.end() && it->first <= offset; ++it)
        if (it->second.first >= end) return true;
    return false;
}

void PendingDirty::add(const std::vector<Range>& ranges) {
    for (const Range& r : ranges) {
        if (count_ >= kMaxRanges) return;
        if (r.length == 0) continue;
        File& f = by_file_[r.ino];
        Ranges* to = &f.short_ranges;
        if (r.length > kShortMost) {
            if (f.long_ranges.size() >= kMaxLongPerFile) continue;
            to = &f.long_ranges;
        }
        to->emplace(r.offset, std::pair{r.offset + r.length, r.seq});
        ++count_;
    }
}

bool PendingDirty::erase(Ranges* ranges, const DirtyRecord& r) {
    auto [lo, hi] = ranges->equal_range(r.offset);
    for (auto it = lo; it != hi; ++it) {
        if (it->second.second != r.seq) continue;
        ranges->erase(it);
        return true;
    }
    return false;
}

void PendingDirty::taken(const std::vector<DirtyRecord>& records) {
    for (const DirtyRecord& r : records) {
        const auto f = by_file_.find(r.ino);
        if (f == by_file_.end()) continue;
        if (erase(&f->second.short_ranges, r) || erase(&f->second.long_ranges, r)) --count_;
        if (f->second.short_ranges.empty() && f->second.long_ranges.empty()) by_file_.erase(f);
    }
}

}  // namespace hiodsfs
