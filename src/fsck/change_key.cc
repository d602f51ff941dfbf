#include "fsck/change_key.h"

#include "engine/key_slot.h"
#include "engine/store_layout.h"
#include "store/store_dir.h"

namespace hiodsfs {

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
    if (!format.encryption.on())
        return Status::error(EINVAL, "store " + options.store + " is not encrypted: it has no key to change");
    StoreKey key;
    if (options.key != nullptr) key = *options.key;
    else if (options.passphrase != nullptr)
        HIODSFS_TRY(unlock_store_key(env, options.store, format.encryption, *options.passphrase, &key));
    else
        return Status::error(EACCES, "store " + options.store + ": give its key file or its passphrase to change it");
    return change_store_passphrase(env, options.store, format.encryption, key, *options.new_passphrase,
                                   options.cost);
}

}  // namespace hiodsfs
