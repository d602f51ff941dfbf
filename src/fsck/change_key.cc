#include "fsck/change_key.h"

#include "engine/key_slot.h"
#include "engine/meta_tier.h"
#include "engine/store_layout.h"
#include "store/store_dir.h"

namespace hiodsfs {

namespace {

// The slot at place (of the store whose FORMAT is format) rewritten for the
// new passphrase, once the key or passphrase given is found to be its.
Status change_passphrase_at(const KeySlotPlace& place, const StoreFormat& format, const ChangeKeyOptions& options) {
    if (!format.encryption.on())
        return Status::error(EINVAL, "store " + place.store + " is not encrypted: it has no key to change");
    if (options.key == nullptr && options.passphrase == nullptr)
        return Status::error(EACCES, "store " + place.store + ": give its key file or its passphrase to change it");
    std::unique_ptr<ChunkCipher> checked;
    StoreKey key;
    HIODSFS_TRY(open_store_key(place, format.encryption, options.key.get(), options.passphrase.get(), &checked, &key));
    return change_store_passphrase(place, format.encryption, key, *options.new_passphrase, options.cost);
}

}  // namespace

Status change_store_key(const ChangeKeyOptions& options) {
    if (options.new_passphrase == nullptr) return Status::error(EINVAL, "no new passphrase was given");
    StoreDirOptions dir_options;
    dir_options.check_owner = !options.any_store_owner;
    dir_options.waiver = "--unsafe-store-dir accepts it";
    std::unique_ptr<StoreDir> dir;
    HIODSFS_TRY(StoreDir::open(options.store, dir_options, &dir));
    Env* env = options.env != nullptr ? options.env : dir->env();
    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(env, options.store, &format, &exists));
    if (!exists) return Status::error(ENOENT, options.store + " is not a hiodsfs store (it has no FORMAT record)");
    if (!format.tier.empty())
        return Status::error(EINVAL, "store " + options.store + " keeps its key slot in its pool: change it there (" +
                                         format.tier + ")");
    return change_passphrase_at({env, options.store}, format, options);
}

Status change_pool_store_key(SegmentTier* tier, const ChangeKeyOptions& options) {
    if (options.new_passphrase == nullptr) return Status::error(EINVAL, "no new passphrase was given");
    std::string text;
    const Status got = get_format(tier, &text);
    if (got.err() == ENOENT)
        return Status::error(ENOENT, tier->describe() + " holds no hiodsfs store (it has no format object)");
    HIODSFS_TRY(got);
    StoreFormat format;
    HIODSFS_TRY(parse_store_format(text, tier->describe() + " (its format object)", &format));
    return change_passphrase_at(KeySlotPlace::pool(tier), format, options);
}

}  // namespace hiodsfs
