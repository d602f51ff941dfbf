// The numbers in metadata keys (format 3): a length byte, then the number's
// minimal big-endian bytes. Byte order is numeric order (a longer number is
// a larger one), and an encoded number is self-delimiting, so enc(ino) is
// an exact prefix of every key of that inode: keys of 255 and 256 do not
// share one. 0 is the length byte alone (no value bytes); 1..255 take two
// bytes, 256..65535 three, and so on. The readers refuse a length past 8,
// a key cut short and a form that is not the shortest (a leading zero
// byte), so a damaged key is reported, never read as another number.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hiodsfs {

// The most bytes one encoded number takes.
constexpr std::size_t kMaxKeyU64 = 9;

void append_key_u64(std::string* out, std::uint64_t v);
// Reads one number from the front of *in and drops it from *in; false (and
// *in unchanged) if it is not a well-formed one.
bool read_key_u64(std::string_view* in, std::uint64_t* v);

// Keys made of numbers, and of a number and a name (dirents, xattrs).
std::string key_u64(std::uint64_t v);
std::string key_u64_u64(std::uint64_t a, std::uint64_t b);
std::string key_u64_str(std::uint64_t a, std::string_view s);
// False unless key is exactly that shape (a name may be empty only where
// the caller allows it: parse_key_u64_str gives what follows the number).
bool parse_key_u64(std::string_view key, std::uint64_t* v);
bool parse_key_u64_u64(std::string_view key, std::uint64_t* a, std::uint64_t* b);
bool parse_key_u64_str(std::string_view key, std::uint64_t* a, std::string_view* rest);

// The last number of a key whose end delimits it (the fingerprint index's
// chunk id, where entries under one digest prefix need no order): the
// minimal big-endian bytes without the length byte, one byte shorter.
// Refuses 0 (no chunk has id 0, and its form would be empty).
void append_tail_u64(std::string* out, std::uint64_t v);
bool read_tail_u64(std::string_view in, std::uint64_t* v);

// Fixed 8-byte big-endian numbers: values (dirty records, live bytes of a
// segment) and the history's time keys, which are all full-width anyway.
void put_be64(std::string* out, std::uint64_t v);
std::uint64_t get_be64(std::string_view in, std::size_t pos = 0);
std::string be64(std::uint64_t v);

}  // namespace hiodsfs
