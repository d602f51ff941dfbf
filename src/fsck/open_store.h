// Opening a store for hiodsfs-fsck: its directory and lock, its FORMAT
// record against the metadata's copy, a tiered store's cache directory
// brought up to the tier, the metadata (every page checked before LMDB
// maps it), the fsync log a crash left, and the segments, read-only.
// Thread-safety: one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/meta_tier.h"
#include "engine/store_layout.h"
#include "fsck/fsck.h"
#include "hiodsfs/segment_store.h"
#include "meta/meta_store.h"
#include "store/store_dir.h"

namespace hiodsfs::fsck {

struct OpenStore {
    std::unique_ptr<StoreDir> dir;  // the last to go
    std::unique_ptr<StoreLock> lock;
    std::unique_ptr<SegmentStore> segs;
    std::unique_ptr<TierJournal> journal;  // before meta, which writes through it
    std::unique_ptr<MetaStore> meta;
};

// What the FORMAT record and the metadata's copy of it say of each other.
struct FormatFinding {
    std::string problem;  // "" if they agree
    bool repairable = false;
    StoreFormat write;  // what --repair writes to FORMAT and the copy
    bool add_copy = false;  // the metadata holds no copy: --repair adds one
};

// Opens options.store for a check, or for a repair when options write
// metadata; notes gets what opening it did or found (journal records
// replayed, fsync log records, a cache directory recovered).
Status open_store(const FsckOptions& options, OpenStore* out, FormatFinding* finding, std::vector<std::string>* notes);

// (Re)opens the segments, read-only, at the metadata's committed frontier.
Status open_segments(const FsckOptions& options, OpenStore& store);

// Notes the metadata objects an interrupted snapshot left in the tier.
Status note_superseded_objects(SegmentTier* tier, FsckReport* report);

}  // namespace hiodsfs::fsck
