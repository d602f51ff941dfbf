// RandomPages: an estimate of the pages an open group has dirtied in one
// database whose keys fall uniformly over the key space (the fingerprint
// index, old chunk records), which LMDB does not tell; MetaStore compares
// it with group_dirty_bytes (meta/meta_store.h).
// Thread-safety: a value; MetaStore's under its mutex.
#pragma once

#include <lmdb.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hiodsfs {

// Distinct leaf pages touched in one database whose keys spread
// uniformly over [0, 2^64) (by their first 8 bytes, or scaled).
struct RandomPages {
    __extension__ using Wide = unsigned __int128;  // for 64x64-bit scaling

    std::vector<std::uint64_t> seen;  // a bit per leaf page at the group's start
    std::uint64_t leaves = 0, branches = 0, per_leaf = 1, distinct = 0, writes = 0;
    // typical_entry_bytes: what one write adds; entries_per_record: how
    // many such writes one LMDB record holds (a bucket of the index).
    void reset(const MDB_stat& st, std::uint64_t typical_entry_bytes, std::uint64_t entries_per_record = 1);
    void note(std::uint64_t position);
    // Leaves touched, the pages their splits added, and the branch
    // pages above them.
    std::uint64_t pages() const { return distinct + writes / per_leaf + std::min(distinct, branches); }
};

}  // namespace hiodsfs
