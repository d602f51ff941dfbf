#include "meta/random_pages.h"

namespace hiodsfs {

// A write to a key spread uniformly over the key space lands in a leaf of
// its own with the probability that the leaf is not dirty yet: numbering
// the leaves by the key's position (first 8 bytes, or id over id range)
// counts them without asking LMDB, which does not tell. Every per_leaf
// writes (inserts, mostly) split a leaf into a new page; branch pages count
// as many as touched, at most all of them.
void RandomPages::reset(const MDB_stat& st, std::uint64_t typical_entry_bytes,
                         std::uint64_t entries_per_record) {
    leaves = std::max<std::uint64_t>(1, st.ms_leaf_pages);
    branches = st.ms_branch_pages;
    // A tree of a few pages says little about how many entries a page holds.
    per_leaf = st.ms_leaf_pages >= 8 ? std::max<std::uint64_t>(1, st.ms_entries * entries_per_record / leaves)
                                     : std::max<std::uint64_t>(1, st.ms_psize / typical_entry_bytes);
    distinct = 0;
    writes = 0;
    seen.assign((leaves + 63) / 64, 0);
}

void RandomPages::note(std::uint64_t position) {
    ++writes;
    const auto leaf = static_cast<std::uint64_t>((static_cast<Wide>(position) * leaves) >> 64);
    std::uint64_t& word = seen[leaf / 64];
    const std::uint64_t bit = std::uint64_t{1} << (leaf % 64);
    if ((word & bit) == 0) {
        word |= bit;
        ++distinct;
    }
}

}  // namespace hiodsfs
