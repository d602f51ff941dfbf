#include "hiodsfs/json_quote.h"

#include <cstdio>

namespace hiodsfs {

std::string json_quote(std::string_view in) {
    std::string out = "\"";
    for (char ch : in) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (static_cast<unsigned char>(ch) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(ch));
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

}  // namespace hiodsfs
