#include "engine/space_budget.h"

#include <algorithm>
#include <bit>

namespace hiodsfs {
namespace {
constexpr std::uint64_t kMiB = 1ull << 20;
// Segments of a 4 GiB file system or larger keep the configured size (64 MiB
// by default); smaller ones get a 64th of it, at least 4 MiB.
constexpr std::uint64_t kSegmentsPerFs = 64;
constexpr std::uint64_t kMinSegment = 4 * kMiB;
}  // namespace

SpaceBudget plan_space(std::uint64_t fs_bytes, std::uint64_t max_segment_bytes,
                       std::uint64_t reserve_option) {
    SpaceBudget b;
    b.segment_bytes = max_segment_bytes;
    if (fs_bytes > 0) {
        const std::uint64_t fit = std::max(kMinSegment, std::bit_floor(fs_bytes / kSegmentsPerFs));
        b.segment_bytes = std::min(max_segment_bytes, fit);
    }
    // LMDB writes every changed page anew (copy on write): a commit of a
    // large delete needs room for a share of the metadata, which grows with
    // the data (about 3 % of it with 8 KiB chunks).
    const std::uint64_t metadata = std::clamp<std::uint64_t>(fs_bytes / 64, 8 * kMiB, 256 * kMiB);
    if (reserve_option == UINT64_MAX) {
        // Compaction copies at most one segment's live bytes before the
        // old file goes: the reserve above the floor holds that.
        b.reserve = std::max(std::clamp<std::uint64_t>(fs_bytes / 50, 16 * kMiB, 512 * kMiB),
                             b.segment_bytes + metadata);
        b.metadata_floor = metadata;
    } else {
        b.reserve = reserve_option;
        b.metadata_floor = std::min(metadata, reserve_option / 2);
    }
    return b;
}

}  // namespace hiodsfs
