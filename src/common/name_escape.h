// Names and paths in lines a person reads (hiodsfs-fsck's report, the
// daemon's log, hiodsfs-stat): a name is whatever bytes a user chose, and
// printed raw a newline in it would forge a line ("ERROR: ..." in root's
// fsck report) and an escape sequence would drive the terminal. Escaped as
// `ls -b` does (GNU's "escape" quoting): backslash and space get a
// backslash, \a \b \t \n \v \f \r their letters, and every other byte that
// is a control character, part of a C1 control, U+2028/U+2029 or a bidi
// control (which reorders what the line shows; ls leaves those), or not
// valid UTF-8 at all, three octal digits: `\033`, `\377`. Valid UTF-8 that
// prints passes as it is. So the result is one line, and the name's bytes
// can be read back from it.
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <string_view>

namespace hiodsfs {

// One path component: also escapes '/', which no name holds (a damaged
// record's would otherwise read as a path of two).
std::string escape_name(std::string_view name);
// A path: '/' stays the separator.
std::string escape_path(std::string_view path);
// A message meant to be one line (it may quote names): only what could
// end the line or drive the terminal is escaped, as octal; spaces and
// backslashes stay, so the message reads as written.
std::string escape_line(std::string_view text);

}  // namespace hiodsfs
