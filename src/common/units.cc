#include "common/units.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hiodsfs {

bool parse_uint(const std::string& text, std::uint64_t min, std::uint64_t max, std::uint64_t* out) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || v < min || v > max) return false;
    *out = v;
    return true;
}

bool parse_size(const std::string& text, std::uint64_t max, std::uint64_t* out) {
    std::size_t digits = text.find_first_not_of("0123456789");
    if (digits == 0 || text.empty()) return false;
    std::string suffix = digits == std::string::npos ? "" : text.substr(digits);
    std::uint64_t mult = 1;
    if (!suffix.empty()) {
        char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
        std::string rest = suffix.substr(1);
        if (rest != "" && rest != "B" && rest != "iB" && rest != "b") return false;
        if (unit == 'K')
            mult = 1ull << 10;
        else if (unit == 'M')
            mult = 1ull << 20;
        else if (unit == 'G')
            mult = 1ull << 30;
        else if (unit == 'B' && rest.empty())
            mult = 1;
        else
            return false;
    }
    std::uint64_t n = 0;
    if (!parse_uint(text.substr(0, digits), 0, max, &n)) return false;
    if (n > max / mult) return false;
    *out = n * mult;
    return true;
}

std::string human_bytes(double b) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (std::fabs(b) >= 1024 && u < 6) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof(buf), "%.0f B", b);
    else std::snprintf(buf, sizeof(buf), "%.*f %s", std::fabs(b) < 10 ? 2 : std::fabs(b) < 100 ? 1 : 0, b, units[u]);
    return buf;
}

}  // namespace hiodsfs
