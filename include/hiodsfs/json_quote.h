// JSON string quoting shared by the engine's status.json and hiodsfs-stat.
#pragma once

#include <string>
#include <string_view>

namespace hiodsfs {

// `in` as a JSON string literal, quotes included: '"' and '\' escaped,
// control characters as \u00XX; other bytes (UTF-8) as they are.
std::string json_quote(std::string_view in);

}  // namespace hiodsfs
