#include "engine/pending_dirty.h"

#include "dedup/background_pass.h"

namespace hiodsfs {

std::size_t PendingDirty::length_class(std::uint64_t length) {
    std::size_t c = 0;
    for (std::uint64_t most = 4096; c < kClasses && length > most; most <<= 2) ++c;
    return c;
}

PendingDirty::Ranges& PendingDirty::ranges_of(File& f, std::uint64_t length) {
    const std::size_t c = length_class(length);
    return c < kClasses ? f.by_length[c] : f.long_ranges;
}

bool PendingDirty::File::empty() const {
    for (const Ranges& r : by_length)
        if (!r.empty()) return false;
    return long_ranges.empty();
}

bool PendingDirty::covers(InodeId ino, std::uint64_t offset, std::uint64_t length) const {
    const auto f = by_file_.find(ino);
    if (f == by_file_.end()) return false;
    const std::uint64_t end = offset + length;
    // A class's ranges that start in [offset - its longest, offset]: only
    // they can cover the write.
    std::uint64_t most = 4096;
    for (const Ranges& r : f->second.by_length) {
        const std::uint64_t from = offset > most ? offset - most : 0;
        for (auto it = r.lower_bound(from); it != r.end() && it->first <= offset; ++it)
            if (it->second.first >= end) return true;
        most <<= 2;
    }
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
        Ranges& to = ranges_of(f, r.length);
        if (&to == &f.long_ranges && to.size() >= kMaxLongPerFile) continue;  // f holds those
        to.emplace(r.offset, std::pair{r.offset + r.length, r.seq});
        ++count_;
    }
}

void PendingDirty::taken(const std::vector<DirtyRecord>& records) {
    for (const DirtyRecord& r : records) {
        const auto f = by_file_.find(r.ino);
        if (f == by_file_.end()) continue;
        Ranges& ranges = ranges_of(f->second, r.length);
        auto [lo, hi] = ranges.equal_range(r.offset);
        for (auto it = lo; it != hi; ++it) {
            if (it->second.second != r.seq || it->second.first != r.offset + r.length) continue;
            ranges.erase(it);
            --count_;
            break;
        }
        if (f->second.empty()) by_file_.erase(f);
    }
}

}  // namespace hiodsfs
