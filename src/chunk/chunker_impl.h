// Private to src/chunk: constructors of the concrete chunkers, which
// Chunker::make() picks from. Parameters must already have passed validate().
#pragma once

#include <cstdint>
#include <memory>

#include "hiodsfs/chunker.h"

namespace hiodsfs::chunk_detail {

std::unique_ptr<Chunker> make_fixed_chunker(std::uint32_t size);
std::unique_ptr<Chunker> make_cdc_chunker(const ChunkingParams& params);

// The 256 Gear constants of the CDC chunker, for tests that check the
// chunker against a plain byte-at-a-time model.
const std::uint64_t* gear_table();

}  // namespace hiodsfs::chunk_detail
