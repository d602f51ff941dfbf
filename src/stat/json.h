// A small JSON reader and writer helpers for hiodsfs-stat: enough for
// STORE/status.json and the tool's own output (RFC 8259; numbers keep their
// text so 64-bit integers round-trip exactly).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs::json {

struct Value {
    enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
    Type type = Type::kNull;
    bool boolean = false;
    std::string text;  // kString: the string; kNumber: the number as written
    std::vector<Value> items;
    std::vector<std::pair<std::string, Value>> members;

    // The member `key` of an object, or null when absent (or not an object).
    const Value* get(std::string_view key) const;
    // The same, but a null Value when absent: reads of optional fields.
    const Value& at(std::string_view key) const;
    double num(double def = 0) const;            // numbers only, else def
    std::uint64_t u64(std::uint64_t def = 0) const;  // non-negative integers exactly
    std::string str(const std::string& def = "") const;
};

// EINVAL with the byte offset of the problem.
Status parse(std::string_view text, Value* out);
// A JSON string literal, quotes included.
std::string quote(std::string_view s);
// A number for JSON: 6 significant digits (below 1e6) or 3 decimals (above);
// null when not finite.
std::string number(double v);

}  // namespace hiodsfs::json
