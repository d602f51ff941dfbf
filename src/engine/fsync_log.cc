#include "engine/fsync_log.h"

#include <algorithm>
#include <vector>

#include "meta/journal.h"

namespace hiodsfs {

Status replay_fsync_log(MetaStore& meta, SegmentStore& segs, bool apply, LogReplay* out) {
    *out = LogReplay{};
    const SuperState committed = meta.super_snapshot();
    // A store that never committed a frontier wrote no log record.
    if (committed.frontier_segment == 0) return Status::ok();
    const SegmentPosition from{static_cast<SegmentId>(committed.frontier_segment), committed.frontier_offset};
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs.list_segments(&files));
    std::sort(files.begin(), files.end());
    std::vector<ChunkLocation> found;
    for (const auto& [seg, size] : files) {
        if (seg < from.segment) continue;
        HIODSFS_TRY(segs.scan(seg, false, [&, seg = seg](const SegmentRecord& r) {
            if (r.chunk == kLogRecord && committed.after_frontier(seg, r.header_offset))
                found.push_back(r.location);
            return true;
        }));
    }
    std::uint64_t current = meta.committed_journal_seq();
    bool applied_current = false;
    std::string bytes;
    for (const ChunkLocation& loc : found) {
        const std::string where = "fsync log record in segment " + std::to_string(loc.segment) + " at " +
                                  std::to_string(loc.offset);
        bytes.resize(loc.length);
        Status st = segs.read(loc, kLogRecord, bytes.data());
        std::vector<JournalRecord> records;
        std::size_t end = 0;
        if (st) decode_journal(bytes, &records, &end);
        if (!st || records.size() != 1 || end != bytes.size()) {
            out->stopped = where + " is damaged" + (st ? "" : " (" + st.message() + ")");
            break;
        }
        const JournalRecord& r = records[0];
        // Made again after a failed write: the same seq, holding more.
        const bool again = r.seq == current && applied_current;
        if (r.seq <= current && !again) continue;  // in the committed state
        if (r.seq != current + 1 && !again) {
            out->stopped = where + " has seq " + std::to_string(r.seq) + " where " +
                           std::to_string(current + 1) + " was next";
            break;
        }
        if (apply) HIODSFS_TRY(meta.replay(r));
        current = r.seq;
        applied_current = true;
        ++out->records;
    }
    return Status::ok();
}

}  // namespace hiodsfs
