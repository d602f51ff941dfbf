// A store key from a key file (`-o key_file=FILE`), read as a daemon that
// runs as root must read it: the file itself, never through a symbolic
// link; a regular file of exactly 32 bytes; owned by root or by the user
// the program runs as; and readable or writable by no one else (mode 0600
// or stricter), so that no other user can have read the key or put in
// one of theirs. Each refusal is one line that says how to mend it.
// Thread-safety: a plain function.
#pragma once

#include <string>

#include "chunk/cipher.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

Status read_key_file(const std::string& path, StoreKey* out);

}  // namespace hiodsfs
