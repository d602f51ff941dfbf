// An encrypted store's key as the tools take it (hiodsfs-fsck and
// hiodsfs-stat alike): --key-file FILE, read as the daemon reads key_file=
// (store/key_file.h), or --key ask, the passphrase asked for as key=ask
// asks it (cli/passphrase.h).
// Thread-safety: one caller at a time (asking owns the terminal).
#pragma once

#include <memory>
#include <string>

#include "chunk/key_wrap.h"
#include "hiodsfs/status.h"

namespace hiodsfs::cli {

struct StoreCredentials {
    std::shared_ptr<const StoreKey> key;
    std::shared_ptr<const Passphrase> passphrase;
    bool given() const { return key != nullptr || passphrase != nullptr; }
};

// key_file and key_option: the options' values, null when not given; store
// names the store in the prompt. EINVAL (one line) for --key other than
// "ask", or with --key-file; the key file's and the asking's refusals as
// they come.
Status read_store_credentials(const std::string* key_file, const std::string* key_option, const std::string& store,
                              StoreCredentials* out);

}  // namespace hiodsfs::cli
