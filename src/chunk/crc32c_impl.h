// Private to src/chunk: the two CRC-32C implementations behind crc32c(), so
// tests can check that they agree. All take and return the finished CRC
// (pre- and post-inverted), like crc32c().
#pragma once

#include <cstddef>
#include <cstdint>

namespace hiodsfs::chunk_detail {

// True when this CPU has the SSE4.2 crc32 instruction.
bool crc32c_hw_available();
// Uses the crc32 instruction; call only when crc32c_hw_available().
std::uint32_t crc32c_hw(const void* data, std::size_t len, std::uint32_t seed);
// Table-driven (slicing-by-8), for any CPU.
std::uint32_t crc32c_portable(const void* data, std::size_t len, std::uint32_t seed);

}  // namespace hiodsfs::chunk_detail
