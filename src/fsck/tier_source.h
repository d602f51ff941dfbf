// Which RADOS store a store directory belongs to, as its FORMAT's tier line
// says, so that `hiodsfs-fsck DIR` checks a cache directory of one against
// its pool.
// Thread-safety: a plain function.
#pragma once

#include <string>

#include "hiodsfs/env.h"

namespace hiodsfs {

// FORMAT's tier when it is rados:POOL/STORE (not yet checked: see
// store/rados_source.h), else "": a local store, or a FORMAT that is absent
// or unreadable, which the check itself reports.
std::string rados_tier_of(Env* env, const std::string& store_dir);

}  // namespace hiodsfs
