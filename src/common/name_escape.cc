#include "common/name_escape.h"

#include <cstdint>

namespace hiodsfs {
namespace {

enum class Style { kName, kPath, kLine };

void octal(std::string* out, unsigned char c) {
    const char digits[] = {'\\', static_cast<char>('0' + (c >> 6)),
                           static_cast<char>('0' + ((c >> 3) & 7)),
                           static_cast<char>('0' + (c & 7))};
    out->append(digits, sizeof digits);
}

// The length of the valid UTF-8 sequence at s[i] and its code point, or 0
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
std::size_t utf8_at(std::string_view s, std::size_t i, char32_t* cp) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    std::size_t n = 0;
    char32_t v = 0, least = 0;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1f, least = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, v = c & 0x0f, least = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07, least = 0x10000;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xc0) != 0x80) return 0;
        v = (v << 6) | (b(k) & 0x3f);
    }
    if (v < least || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

// Code points a terminal does not simply print: C1 controls, the line and
// paragraph separators, and the bidi controls that reorder a line.
bool hidden(char32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x200e ||
           cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string escape(std::string_view s, Style style) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            char32_t cp = 0;
            const std::size_t n = utf8_at(s, i, &cp);
            if (n > 0 && !hidden(cp)) {
                out.append(s.substr(i, n));
            } else {
                for (std::size_t k = 0; k < (n > 0 ? n : 1); ++k)
                    octal(&out, static_cast<unsigned char>(s[i + k]));
            }
            i += n > 0 ? n : 1;
            continue;
        }
        ++i;
        if (c >= 0x20 && c != 0x7f) {
            const bool quoted = style != Style::kLine && (c == '\\' || c == ' ');
            if (quoted) out += '\\';
            if (c == '/' && style == Style::kName) {
                octal(&out, c);
            } else {
                out += static_cast<char>(c);
            }
            continue;
        }
        const char* letter = nullptr;
        if (style != Style::kLine) {
            switch (c) {
                case '\a':
                    letter = "\\a";
                    break;
                case '\b':
                    letter = "\\b";
                    break;
                case '\t':
                    letter = "\\t";
                    break;
                case '\n':
                    letter = "\\n";
                    break;
                case '\v':
                    letter = "\\v";
                    break;
                case '\f':
                    letter = "\\f";
                    break;
                case '\r':
                    letter = "\\r";
                    break;
                default:
                    break;
            }
        }
        if (letter != nullptr) {
            out += letter;
        } else {
            octal(&out, c);
        }
    }
    return out;
}

}  // namespace

std::string escape_name(std::string_view name) { return escape(name, Style::kName); }
std::string escape_path(std::string_view path) { return escape(path, Style::kPath); }
std::string escape_line(std::string_view text) { return escape(text, Style::kLine); }

}  // namespace hiodsfs
