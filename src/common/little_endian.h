// Fixed-width little-endian integers in byte buffers, for the on-disk
// and in-pool records (segment records, journal records).
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>

namespace hiodsfs {

inline void put_le32(char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
inline void put_le64(char* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
inline std::uint32_t get_le32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
    return v;
}
inline std::uint64_t get_le64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
    return v;
}
inline void append_le32(std::string* out, std::uint32_t v) {
    char b[4];
    put_le32(b, v);
    out->append(b, 4);
}
inline void append_le64(std::string* out, std::uint64_t v) {
    char b[8];
    put_le64(b, v);
    out->append(b, 8);
}

}  // namespace hiodsfs
