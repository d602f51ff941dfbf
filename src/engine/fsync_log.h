// The fsync log of a store without a journal: an fsync makes the open
// group's changes durable as one record in the segment stream, with one
// segment sync, instead of committing the group (a segment sync and two
// more of LMDB's). The group commits later, at the committer's interval.
//
// A record is a segment record whose chunk id is kLogRecord, its payload a
// journal record (meta/journal.h): the changes since the previous record,
// and the state with its seq and a frontier that lies before the record.
// At open, the records after the committed frontier whose seq follows the
// committed one are replayed (MetaStore::replay), before anything else
// reads the metadata.
// Thread-safety: plain functions; the caller holds the store alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "hiodsfs/segment_store.h"
#include "hiodsfs/status.h"
#include "meta/meta_store.h"

namespace hiodsfs {

// The chunk id of a log record: never a chunk's (ids count up from 1).
inline constexpr ChunkId kLogRecord = ~ChunkId{0};

struct LogReplay {
    std::uint64_t records = 0;  // applied (or, when only counting, to apply)
    // Why replay stopped before the end of the log (a damaged record, or a
    // seq that does not follow): what follows is lost. Empty when it did not.
    std::string stopped;
};

// Replays, or with apply false only counts, the records that follow the
// committed state of `meta` in `segs`.
Status replay_fsync_log(MetaStore& meta, SegmentStore& segs, bool apply, LogReplay* out);

}  // namespace hiodsfs
