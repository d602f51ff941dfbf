// Deterministic pseudo-random test data for the chunk tests (splitmix64:
// fast enough to make 100 MiB in a fraction of a second, same on every run).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace hiodsfs::test {

inline std::uint64_t splitmix64(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
    std::vector<std::uint8_t> out(n);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const std::uint64_t v = splitmix64(seed);
        std::memcpy(out.data() + i, &v, 8);
    }
    for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(splitmix64(seed));
    return out;
}

}  // namespace hiodsfs::test
