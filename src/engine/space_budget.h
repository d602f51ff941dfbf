// SpaceBudget: how the free space of the store's file system is shared out
// when it runs low (docs/architecture.md "A full disk").
//
// File data (write requests) and the background pass stop at `reserve`:
// what is left below it is for freeing space. Compaction may copy into the
// reserve, down to `metadata_floor`, so the copying of one segment always
// fits (a full store can always compact its way out); below the floor only
// metadata commits write, so a commit never fails for lack of space.
// Segments are made smaller on small file systems, so that one segment's
// copy is a small share of the disk and deleted files free whole segments.
#pragma once

#include <cstdint>

namespace hiodsfs {

struct SpaceBudget {
    std::uint64_t segment_bytes = 0;   // max segment size to open the store with
    std::uint64_t reserve = 0;         // free bytes file data and the pass leave
    std::uint64_t metadata_floor = 0;  // free bytes compaction leaves
};

// fs_bytes: the file system's size (0 when unknown: segments as given);
// max_segment_bytes: the configured segment size (never grown);
// reserve_option: EngineOptions::space_reserve (UINT64_MAX: sized here).
SpaceBudget plan_space(std::uint64_t fs_bytes, std::uint64_t max_segment_bytes,
                       std::uint64_t reserve_option);

}  // namespace hiodsfs
