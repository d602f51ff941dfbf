// The super record: the store's global state (SuperState: the space
// counters, the next ids, the segment frontier of the last commit, the
// journal seq), which a group commit writes to Db::kSuper under kSuperKey,
// and its encoding. Fields are only ever appended, and every older layout
// still decodes (docs/architecture.md, "Metadata").
// Thread-safety: plain functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hiodsfs/space_counters.h"

namespace hiodsfs {

// The super record's key in Db::kSuper.
inline constexpr std::string_view kSuperKey = "state";

// Persistent global state, kept in memory while the store is open and
// written to kSuper with every group commit.
struct SuperState {
    SpaceCounters counters;
    std::uint64_t next_ino = 2;  // 1 is the root
    std::uint64_t next_chunk = 1;
    std::uint64_t next_dirty = 1;
    // How far the segments were durable when this state was committed:
    // every chunk the committed metadata refers to lies in a segment below
    // frontier_segment, or in it below frontier_offset. 0: not known (a
    // store made before it was recorded, until its next commit).
    std::uint64_t frontier_segment = 0;
    std::uint64_t frontier_offset = 0;
    // The last metadata journal record this state includes (meta/journal.h);
    // 0 for a store without a journal (a local one), whose super record
    // then keeps the layout it had before.
    std::uint64_t journal_seq = 0;

    // Whether segment `seg` holds only bytes written after this state was
    // committed (a crash's leftovers if nothing since refers to them). The
    // frontier's own segment does when the commit found it empty.
    bool written_after(std::uint64_t seg) const {
        return frontier_segment != 0 &&
               (seg > frontier_segment || (seg == frontier_segment && frontier_offset == 0));
    }
    // Whether a record at `offset` of segment `seg` lies past the frontier
    // (false when it is not known).
    bool after_frontier(std::uint64_t seg, std::uint64_t offset) const {
        return frontier_segment != 0 &&
               (seg > frontier_segment || (seg == frontier_segment && offset >= frontier_offset));
    }
};

std::string encode_super(const SuperState& s);
// False for a size no layout has. *has_file_count is false for a record
// made before file_count: the caller counts the files.
bool decode_super(std::string_view v, SuperState* out, bool* has_file_count);

}  // namespace hiodsfs
