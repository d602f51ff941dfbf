// SyncLedger: what a sync of the segment store has left to make durable:
// the segment files written since their last fdatasync, whether the
// directory gained or lost an entry since its last sync, and the append
// position before which everything is durable. A sync takes the list
// (pending()), syncs without the writer lock so that appends go on, then
// settles what it synced (synced()): write generations tell it which files
// were written again meanwhile, and those stay dirty.
// Thread-safety: none; the segment store guards it with its writer lock
// (mu), and runs one sync at a time (sync_mu), so each pending() is settled
// before the next is taken.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

class SyncLedger {
public:
    // A segment file written since its last sync, with the write generation
    // of its last write.
    struct Dirty {
        std::shared_ptr<File> file;
        std::uint64_t gen = 0;
    };
    // What one sync has to do.
    struct Pending {
        std::vector<std::pair<SegmentId, Dirty>> files;
        std::uint64_t dir_gen = 0;
        bool need_dir = false;
        bool empty() const { return files.empty() && !need_dir; }
    };

    // Segment id's file was written to (or cut short).
    void wrote(SegmentId id, std::shared_ptr<File> file) {
        dirty_[id] = Dirty{std::move(file), ++write_gen_};
    }
    // A segment file was created or removed: the directory needs a sync.
    void entry_changed() { ++dir_gen_; }
    bool is_dirty(SegmentId id) const { return dirty_.count(id) != 0; }
    // Segment id's file was synced, or is gone.
    void forget(SegmentId id) { dirty_.erase(id); }
    // Whether everything before `upto` is durable.
    bool covers(const SegmentPosition& upto) const { return !(durable_ < upto); }

    Pending pending() const;
    // The sync of `p` succeeded, and everything appended before `position`
    // is durable.
    void synced(const Pending& p, const SegmentPosition& position);

private:
    std::map<SegmentId, Dirty> dirty_;
    std::uint64_t write_gen_ = 0;
    std::uint64_t dir_gen_ = 0;  // bumped when a segment is created or removed
    std::uint64_t dir_synced_gen_ = 0;
    SegmentPosition durable_;  // everything before it is synced
};

}  // namespace hiodsfs
