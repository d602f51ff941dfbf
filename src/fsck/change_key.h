// hiodsfs-fsck --change-key: gives an encrypted store a new passphrase
// (engine/key_slot.h). Its current key comes from its key file or its
// current passphrase; only the key slot is written, whole, so no chunk is
// rewritten and a crash leaves the old passphrase or the new one working.
// The store may be mounted meanwhile: the daemon reads the slot at mount
// only. A RADOS store's slot is in its pool (change_pool_store_key).
// Thread-safety: one call at a time per store.
#pragma once

#include <memory>
#include <string>

#include "chunk/key_wrap.h"
#include "hiodsfs/env.h"
#include "hiodsfs/segment_tier.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

struct ChangeKeyOptions {
    std::string store;
    bool any_store_owner = false;  // --unsafe-store-dir
    // What opens the store now: its key, or its current passphrase.
    std::shared_ptr<const StoreKey> key;
    std::shared_ptr<const Passphrase> passphrase;
    std::shared_ptr<const Passphrase> new_passphrase;
    ScryptCost cost;
    // Tests: the Env to write the slot through (paths store + "/..."); null:
    // the store directory's own, which follows no link.
    Env* env = nullptr;
};

// EINVAL for a store that is not encrypted, EACCES (one line, nothing
// changed) for a wrong key or passphrase.
Status change_store_key(const ChangeKeyOptions& options);
// The same for a store in a pool, through tier (options.store, env and
// any_store_owner unused): its slot, the pool's "keyslot" object, replaced
// by one atomic object write. The caller holds the store's lock, as fsck
// does, so no daemon has it mounted.
Status change_pool_store_key(SegmentTier* tier, const ChangeKeyOptions& options);

}  // namespace hiodsfs
