#include "fsck/tier_objects.h"

#include <cinttypes>
#include <cstdio>
#include <memory>

namespace hiodsfs {
namespace {

std::string segment_path(const std::string& dir, SegmentId id) {
    char name[20];
    std::snprintf(name, sizeof name, "/%08" PRIx32 ".seg", id);
    return dir + name;
}

}  // namespace

Status find_tier_gaps(Env* env, SegmentTier* tier, const std::string& segments_dir,
                      const std::map<SegmentId, std::uint64_t>& referenced,
                      std::vector<TierGap>* out) {
    out->clear();
    std::vector<std::pair<SegmentId, std::uint64_t>> listed;
    HIODSFS_TRY(tier->list(&listed));
    const std::map<SegmentId, std::uint64_t> held(listed.begin(), listed.end());
    for (const auto& [id, end] : referenced) {
        auto it = held.find(id);
        if (it != held.end() && it->second >= end) continue;
        // Not in the cache directory either, or shorter there too: the
        // chunk checks name what is lost; nothing can be uploaded.
        std::unique_ptr<File> f;
        if (!env->open(segment_path(segments_dir, id), OpenMode::kRead, &f)) continue;
        std::uint64_t size = 0;
        if (!f->size(&size) || size < end) continue;
        TierGap gap;
        gap.segment = id;
        gap.referenced = end;
        gap.missing = it == held.end();
        gap.in_tier = gap.missing ? 0 : it->second;
        out->push_back(gap);
    }
    return Status::ok();
}

std::string describe_tier_gap(const TierGap& gap, const std::string& tier,
                              const std::string& segments_dir) {
    const std::string what = "segment " + std::to_string(gap.segment) +
                             " holds bytes the metadata refers to (up to byte " +
                             std::to_string(gap.referenced) + "), ";
    const std::string lacks = gap.missing ? "but " + tier + " has no object of it"
                                          : "but its object in " + tier + " has only " +
                                                std::to_string(gap.in_tier) + " bytes";
    return what + lacks + "; the copy in " + segments_dir +
           " is the only one (--repair uploads it)";
}

Status upload_from_cache(Env* env, SegmentTier* tier, const std::string& segments_dir,
                         const TierGap& gap) {
    const std::string path = segment_path(segments_dir, gap.segment);
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(path, OpenMode::kRead, &f));
    std::uint64_t size = 0;
    HIODSFS_TRY(f->size(&size));
    std::vector<char> bytes(static_cast<std::size_t>(size));
    std::size_t got = 0;
    HIODSFS_TRY(f->pread(bytes.data(), bytes.size(), 0, &got));
    if (got != bytes.size()) return Status::error(EIO, path + " shrank while being read");
    Status st = tier->put(gap.segment, bytes.data(), bytes.size());
    if (!st)
        return Status::error(st.err(),
                             "uploading " + path + " to " + tier->describe() + ": " + st.message());
    return Status::ok();
}

}  // namespace hiodsfs
