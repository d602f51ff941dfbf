// hiodsfs-stat --key-file FILE / --key ask: whether a key opens an encrypted
// store, checked as the daemon checks it when it mounts the store (against
// FORMAT's key check; a passphrase through the store's key slot), without
// reading a chunk: a backup's key tried in milliseconds, where
// hiodsfs-fsck reads the whole store.
// Thread-safety: a function of its arguments.
#pragma once

#include <string>

#include "chunk/key_wrap.h"
#include "hiodsfs/status.h"

namespace hiodsfs::stat {

// ok when key, or else passphrase, opens the store in directory store (a
// store, or a RADOS store's cache_dir). EACCES with one line when it does
// not; EINVAL for a plain store, and for a passphrase of a RADOS store,
// whose key slot is in its pool (hiodsfs-fsck --key ask checks it there).
Status check_store_key(const std::string& store, const StoreKey* key, const Passphrase* passphrase);

}  // namespace hiodsfs::stat
