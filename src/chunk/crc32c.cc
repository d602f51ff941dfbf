// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for segment record
// checksums. This file alone is built with -msse4.2; the crc32 instruction is
// used only after a run-time CPU check, and everything else in the file is
// compiled without SSE4.x so the fallback really runs on any x86-64.
#include <array>
#include <cstring>

#include "chunk/crc32c_impl.h"
#include "chunk/fingerprint.h"

#if defined(__x86_64__) && defined(__SSE4_2__)
#include <nmmintrin.h>
#define HIODSFS_CRC32C_HW 1
#else
#define HIODSFS_CRC32C_HW 0
#endif

namespace hiodsfs::chunk_detail {

#if HIODSFS_CRC32C_HW
namespace {

constexpr std::uint32_t kPolyReflected = 0x82F63B78u;

// One crc32 instruction chain runs at a third of the instruction's rate
// (latency 3, one per cycle), so buffers are cut into rounds of three
// blocks checksummed at once and joined: crc(A||B) = zeros(crc(A), |B|) ^
// crc0(B), where zeros() appends |B| zero bytes, a linear map kept as 4
// tables. Blocks of 256 bytes: 2-2.5 x the single chain's speed on data in
// cache (where a chunk is when it is checksummed); blocks of 2 KiB were a
// little faster there but slower than one chain on data read from memory,
// whose prefetcher follows three streams 2 KiB apart badly.
constexpr std::size_t kBlock = 256;

using ZeroTables = std::array<std::array<std::uint32_t, 256>, 4>;

constexpr std::uint32_t append_zeros(std::uint32_t crc, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes * 8; ++i) crc = (crc & 1) ? (crc >> 1) ^ kPolyReflected : crc >> 1;
    return crc;
}

constexpr ZeroTables make_zero_tables(std::size_t bytes) {
    std::array<std::uint32_t, 32> basis{};
    for (int i = 0; i < 32; ++i) basis[i] = append_zeros(std::uint32_t{1} << i, bytes);
    ZeroTables t{};
    for (int k = 0; k < 4; ++k) {
        for (std::uint32_t n = 0; n < 256; ++n) {
            std::uint32_t v = 0;
            for (int j = 0; j < 8; ++j)
                if (n & (1u << j)) v ^= basis[8 * k + j];
            t[k][n] = v;
        }
    }
    return t;
}
constexpr ZeroTables kZeros = make_zero_tables(kBlock);

inline std::uint32_t shift(std::uint32_t crc) {
    return kZeros[0][crc & 0xff] ^ kZeros[1][(crc >> 8) & 0xff] ^ kZeros[2][(crc >> 16) & 0xff] ^
           kZeros[3][crc >> 24];
}

inline std::uint64_t load64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Rounds of 3 x kBlock bytes from p while they fit; returns the running crc.
inline std::uint64_t three_streams(std::uint64_t c0, const std::uint8_t*& p, std::size_t& len) {
    for (; len >= 3 * kBlock; p += 3 * kBlock, len -= 3 * kBlock) {
        std::uint64_t c1 = 0, c2 = 0;
        for (std::size_t i = 0; i < kBlock; i += 8) {
            c0 = _mm_crc32_u64(c0, load64(p + i));
            c1 = _mm_crc32_u64(c1, load64(p + kBlock + i));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * kBlock + i));
        }
        c0 = shift(static_cast<std::uint32_t>(c0)) ^ c1;
        c0 = shift(static_cast<std::uint32_t>(c0)) ^ c2;
    }
    return c0;
}

}  // namespace

// Only this function may use SSE4.2; it is never inlined into the portable
// code below, which GCC then compiles for the baseline instruction set.
__attribute__((noinline)) std::uint32_t crc32c_hw(const void* data, std::size_t len,
                                                  std::uint32_t seed) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t crc = ~seed;
    while (len > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
        crc = _mm_crc32_u8(crc, *p++);
        --len;
    }
    std::uint64_t c64 = crc;
    c64 = three_streams(c64, p, len);
    for (; len >= 8; len -= 8, p += 8) c64 = _mm_crc32_u64(c64, load64(p));
    crc = static_cast<std::uint32_t>(c64);
    for (; len > 0; --len) crc = _mm_crc32_u8(crc, *p++);
    return ~crc;
}
#endif

}  // namespace hiodsfs::chunk_detail

#if HIODSFS_CRC32C_HW && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("no-sse4.1,no-sse4.2,no-popcnt")
#define HIODSFS_CRC32C_POP 1
#endif

namespace hiodsfs::chunk_detail {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

// Slicing-by-8 tables: t[k][b] is the CRC of byte b followed by k zero bytes.
constexpr Tables make_tables() {
    Tables t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
        t[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k) {
        for (std::size_t i = 0; i < 256; ++i)
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
    return t;
}
constexpr Tables kTables = make_tables();

std::uint32_t load32_le(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
           std::uint32_t{p[3]} << 24;
}

}  // namespace

std::uint32_t crc32c_portable(const void* data, std::size_t len, std::uint32_t seed) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    const Tables& t = kTables;
    std::uint32_t crc = ~seed;
    for (; len >= 8; len -= 8, p += 8) {
        const std::uint32_t lo = crc ^ load32_le(p);
        const std::uint32_t hi = load32_le(p + 4);
        crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
              t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    }
    for (; len > 0; --len) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

bool crc32c_hw_available() {
#if HIODSFS_CRC32C_HW
    static const bool has = __builtin_cpu_supports("sse4.2");
    return has;
#else
    return false;
#endif
}

#if !HIODSFS_CRC32C_HW
std::uint32_t crc32c_hw(const void* data, std::size_t len, std::uint32_t seed) {
    return crc32c_portable(data, len, seed);
}
#endif

}  // namespace hiodsfs::chunk_detail

namespace hiodsfs {

std::uint32_t crc32c(const void* data, std::size_t len, std::uint32_t seed) {
    if (chunk_detail::crc32c_hw_available()) return chunk_detail::crc32c_hw(data, len, seed);
    return chunk_detail::crc32c_portable(data, len, seed);
}

}  // namespace hiodsfs

#ifdef HIODSFS_CRC32C_POP
#pragma GCC pop_options
#endif
