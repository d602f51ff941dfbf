// Bytes as lowercase hexadecimal digits and back, for the store's text
// records (FORMAT's encryption line, the key slot).
// Thread-safety: functions of their arguments.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hiodsfs {

std::string to_hex(std::span<const std::uint8_t> bytes);
// The bytes of hex, which must be an even number of lowercase hex digits;
// false (out untouched) otherwise.
bool from_hex(std::string_view hex, std::vector<std::uint8_t>* out);

}  // namespace hiodsfs
