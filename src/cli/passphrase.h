// Asking for a store's passphrase (`-o key=ask`, `hiodsfs-fsck --key ask`),
// where the program finds one to ask (docs/architecture.md, "Encryption at
// rest"):
//   - standard input is a terminal: a prompt on stderr, with echo off (a new
//     passphrase twice, to catch a typing mistake);
//   - standard input is a pipe, a socket or a file: its next line, read a
//     byte at a time so that a second line is left for the next question
//     (`hiodsfs-fsck --change-key` reads the old passphrase, then the new);
//   - otherwise (a mount at boot, stdin /dev/null): systemd-ask-password,
//     which asks through the console or a desktop agent.
// Thread-safety: one caller at a time (it owns the terminal's mode).
#pragma once

#include <string>

#include "chunk/key_wrap.h"
#include "hiodsfs/status.h"

namespace hiodsfs::cli {

// One line from fd, without its newline (and a carriage return before it):
// EINVAL for an empty line or one over Passphrase::kMaxBytes, ENODATA at
// end of input before any byte.
Status read_passphrase_line(int fd, Passphrase* out);

// prompt: "Passphrase for store /srv/store"; confirm: ask a terminal twice.
// ENXIO with one line when there is no way to ask.
Status ask_passphrase(const std::string& prompt, bool confirm, Passphrase* out);

}  // namespace hiodsfs::cli
