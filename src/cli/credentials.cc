#include "cli/credentials.h"

#include "cli/passphrase.h"
#include "store/key_file.h"

namespace hiodsfs::cli {

Status read_store_credentials(const std::string* key_file, const std::string* key_option, const std::string& store,
                              StoreCredentials* out) {
    *out = StoreCredentials{};
    if (key_option != nullptr && *key_option != "ask")
        return Status::error(EINVAL, "--key: the only form is --key ask (a key file is --key-file FILE)");
    if (key_option != nullptr && key_file != nullptr)
        return Status::error(EINVAL, "--key ask and --key-file exclude each other");
    if (key_file != nullptr) {
        auto key = std::make_shared<StoreKey>();
        HIODSFS_TRY(read_key_file(*key_file, key.get()));
        out->key = std::move(key);
    }
    if (key_option != nullptr) {
        Passphrase p;
        HIODSFS_TRY(ask_passphrase("Passphrase for store " + store, false, &p));
        out->passphrase = std::make_shared<const Passphrase>(std::move(p));
    }
    return Status::ok();
}

}  // namespace hiodsfs::cli
