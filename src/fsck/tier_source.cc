#include "fsck/tier_source.h"

#include "engine/store_layout.h"

namespace hiodsfs {

std::string rados_tier_of(Env* env, const std::string& store_dir) {
    StoreFormat format;
    bool exists = false;
    if (!read_store_format(env, store_dir, &format, &exists).is_ok() || !exists) return "";
    return format.tier.rfind("rados:", 0) == 0 ? format.tier : "";
}

}  // namespace hiodsfs
