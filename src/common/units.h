// Sizes as people write them and read them, shared by the daemon's options,
// hiodsfs-stat and hiodsfs-fsck.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>

namespace hiodsfs {

// "4096", "64K", "64k", "1M", "1MiB", "2G", "512B": binary multiples. False
// for anything else, or a value above max.
bool parse_size(const std::string& text, std::uint64_t max, std::uint64_t* out);

// Decimal digits only, within [min, max].
bool parse_uint(const std::string& text, std::uint64_t min, std::uint64_t max, std::uint64_t* out);

// "812 B", "1.50 KiB", "12.3 MiB", "640 GiB": three significant digits.
std::string human_bytes(double bytes);

}  // namespace hiodsfs
