// Nanosecond units for the control tests, whose clocks count nanoseconds.
#pragma once

#include <cstdint>

namespace hiodsfs::test {

inline constexpr std::uint64_t kMs = 1'000'000;
inline constexpr std::uint64_t kSec = 1'000'000'000;

}  // namespace hiodsfs::test
