// Chunkers split a byte stream into chunks. Both kinds are streaming: they
// keep their state across calls, so the cut points are identical whatever
// sizes the input arrives in.
//  - fixed: cuts at every absolute stream offset that is a multiple of size.
//  - cdc:   FastCDC-style content-defined chunking (Gear rolling hash,
//           normalized chunking with two masks, min/avg/max sizes).
// Thread-safety: a Chunker instance is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs {

struct ChunkingParams {
    enum class Kind : std::uint8_t { kFixed = 0, kCdc = 1 };
    Kind kind = Kind::kCdc;
    // For fixed chunking only avg_size is used (the chunk size). The CDC
    // default (8 KiB average) was chosen by measurement: docs/chunking.md.
    std::uint32_t min_size = 2048;
    std::uint32_t avg_size = 8192;
    std::uint32_t max_size = 32768;

    static ChunkingParams fixed(std::uint32_t size);
    static ChunkingParams cdc(std::uint32_t min, std::uint32_t avg, std::uint32_t max);
    // Sizes must be powers of two between 256 B and 4 MiB with min <= avg <= max
    // (cdc: min < avg < max). Returns a message naming what is wrong.
    Status validate() const;
    // "fixed:4096" or "cdc:2048/8192/32768".
    std::string describe() const;
    // Parses the form describe() prints.
    static Status parse(const std::string& text, ChunkingParams* out);
    bool operator==(const ChunkingParams&) const = default;
};

class Chunker {
public:
    static constexpr std::size_t kNoCut = static_cast<std::size_t>(-1);

    virtual ~Chunker() = default;
    // Starts a new chunk at absolute stream offset `offset` (which must be a
    // cut point: 0, or where a previous chunk ended).
    virtual void reset(std::uint64_t offset) = 0;
    // Consumes data until the current chunk ends. Returns the number of bytes
    // of `data` that complete the current chunk (a cut lies right after them;
    // the chunker has then started the next chunk), or kNoCut if all of
    // `data` was consumed without reaching a cut.
    virtual std::size_t next_cut(const std::uint8_t* data, std::size_t len) = 0;
    // Bytes consumed since the last cut (the length of the open chunk).
    virtual std::uint64_t pending() const = 0;

    // Returns nullptr when params fail validate(): cut points are part of the
    // stored data, so a bad configuration gets no chunker rather than a guess.
    static std::unique_ptr<Chunker> make(const ChunkingParams& params);
};

// Convenience: all chunk lengths of a whole buffer chunked from offset 0;
// the last chunk may be shorter (end of data is always a cut). Empty when
// params fail validate().
std::vector<std::uint32_t> chunk_lengths(const ChunkingParams& params, const std::uint8_t* data,
                                         std::size_t len);

}  // namespace hiodsfs
