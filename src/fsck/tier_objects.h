// hiodsfs-fsck's check of a tiered store's segments against its tier:
// every byte a commit refers to is written to the tier before the commit,
// so a segment whose committed chunks reach past what the tier holds of it
// (its object removed, or cut short) lacks its copy in the pool, even when
// the cache directory still has the file and every read of it works: the
// store would not survive the loss of this machine and its disk. --repair
// uploads the cache directory's copy (a mount does the same, and says so).
// Thread-safety: free functions; one call at a time on a store.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/segment_tier.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

// A segment the cache directory holds whole and the tier does not.
struct TierGap {
    SegmentId segment = 0;
    std::uint64_t referenced = 0;  // the end of the last byte committed chunks use
    std::uint64_t in_tier = 0;     // bytes of its object (0 when there is none)
    bool missing = false;          // no object at all
};

// The gaps, by segment: `referenced` maps each segment to the end of the
// bytes its committed chunks use; segments_dir is the cache directory.
Status find_tier_gaps(Env* env, SegmentTier* tier, const std::string& segments_dir,
                      const std::map<SegmentId, std::uint64_t>& referenced,
                      std::vector<TierGap>* out);

// One line for the report.
std::string describe_tier_gap(const TierGap& gap, const std::string& tier,
                              const std::string& segments_dir);

// Puts the cache directory's copy of the segment in the tier, whole.
Status upload_from_cache(Env* env, SegmentTier* tier, const std::string& segments_dir,
                         const TierGap& gap);

}  // namespace hiodsfs
