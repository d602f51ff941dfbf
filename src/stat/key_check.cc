#include "stat/key_check.h"

#include "engine/key_slot.h"
#include "engine/store_layout.h"
#include "store/store_dir.h"

namespace hiodsfs::stat {

Status check_store_key(const std::string& store, const StoreKey* key, const Passphrase* passphrase) {
    StoreDirOptions dir_options;
    dir_options.check_owner = false;  // only read, as the report reads
    std::unique_ptr<StoreDir> dir;
    HIODSFS_TRY(StoreDir::open(store, dir_options, &dir));
    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(dir->env(), store, &format, &exists));
    if (!exists) return Status::error(ENOENT, store + " is not a hiodsfs store (it has no FORMAT record)");
    if (!format.encryption.on())
        return Status::error(EINVAL, "store " + store + " is not encrypted, and a key was given");
    if (key == nullptr && passphrase == nullptr) return Status::error(EINVAL, "no key was given to check");
    if (key == nullptr && !format.tier.empty())
        return Status::error(EINVAL, "store " + store + " keeps its key slot in its pool (" + format.tier +
                                         "): hiodsfs-fsck --key ask checks the passphrase there");
    std::unique_ptr<ChunkCipher> cipher;
    return open_store_key({dir->env(), store}, format.encryption, key, passphrase, &cipher);
}

}  // namespace hiodsfs::stat
