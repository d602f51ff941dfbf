// hiodsfs-stat --estimate's compression figures: each distinct chunk is
// encoded with every method asked for, through the codec the store uses
// (chunk/codec.h: the entropy sample, the 97 % rule, the prefix),
// and the sizes are kept by the chunk's fingerprint, so the figures for any
// set of distinct chunks are sums and the estimate cache can carry them.
// Chunks are encoded on helper threads while the caller goes on reading
// and chunking; each encoding's thread CPU time is measured.
// Thread-safety: one thread drives a CompressionEstimate (the helpers are
// its own).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chunk/codec.h"
#include "common/parallel_loop.h"

namespace hiodsfs::stat {

// A chunk's identity in the estimate: the first 16 bytes of its SHA-256.
using ChunkKey = std::array<std::uint8_t, 16>;
struct ChunkKeyHash {
    std::size_t operator()(const ChunkKey& k) const {
        std::size_t h;
        std::memcpy(&h, k.data(), sizeof(h));
        return h;
    }
};

// One method's figures over a set of distinct chunks.
struct CompressionFigures {
    Compression method;
    std::uint64_t logical_bytes = 0;  // what the files map
    std::uint64_t raw_bytes = 0;      // the distinct chunks' bytes
    std::uint64_t chunks = 0;         // distinct chunks
    // Payloads (prefix included) plus a segment record header per chunk.
    std::uint64_t stored_bytes = 0;
    std::uint64_t encoded_chunks = 0;  // stored compressed; the others raw
    // Raw bytes encoded in this run, whichever set the figures are of
    // (cached sizes cost nothing), and the thread CPU time it took.
    std::uint64_t timed_bytes = 0;
    double cpu_s = 0;

    double ratio() const;                         // raw / stored
    double combined_ratio() const;                // logical / stored: deduplication and compression
    std::optional<double> cpu_s_per_gib() const;  // empty when nothing was encoded
};

class CompressionEstimate {
public:
    // helpers: threads beside the caller's that encode (0: the caller alone).
    CompressionEstimate(std::vector<Compression> methods, unsigned helpers);
    ~CompressionEstimate();
    CompressionEstimate(const CompressionEstimate&) = delete;
    CompressionEstimate& operator=(const CompressionEstimate&) = delete;

    const std::vector<Compression>& methods() const { return methods_; }
    // Whether the chunk's stored sizes are known or on their way.
    bool known(const ChunkKey& key) const { return rows_.count(key) != 0; }
    // A chunk not known yet: copied, and encoded with every method now or
    // on a helper. Known chunks are ignored.
    void add(const ChunkKey& key, const std::uint8_t* data, std::uint32_t len);
    // Sizes learnt earlier (the cache): payloads[i] for methods()[i].
    void remember(const ChunkKey& key, std::uint32_t len,
                  const std::vector<std::uint32_t>& payloads);
    // Waits for the encodings under way; figures() and rows() need it.
    void flush();

    // The figures over these distinct chunks (all of them known), which
    // files mapping logical_bytes refer to.
    template <typename KeySet>
    std::vector<CompressionFigures> figures(const KeySet& chunks,
                                            std::uint64_t logical_bytes) const {
        std::vector<CompressionFigures> out = empty_figures(logical_bytes);
        if (methods_.empty()) return out;
        for (const ChunkKey& k : chunks) count(k, &out);
        return out;
    }

    // Every known chunk, in the order they became known (remembered ones
    // first, so a cache read and written back is the same): fn(key, len,
    // payloads).
    template <typename Fn>
    void for_each_row(Fn&& fn) const {
        for (std::size_t row = 0; row < keys_.size(); ++row)
            fn(keys_[row], lens_[row], &payloads_[row * methods_.size()]);
    }

    // What the cached sizes depend on besides the method: the codec's
    // libraries. Sizes cached under another tag are measured again.
    static std::string codec_tag();

private:
    struct Pending;
    std::vector<CompressionFigures> empty_figures(std::uint64_t logical_bytes) const;
    void count(const ChunkKey& key, std::vector<CompressionFigures>* out) const;
    void encode(Pending& p) const;
    std::size_t new_row(const ChunkKey& key, std::uint32_t len);

    std::vector<Compression> methods_;
    std::unordered_map<ChunkKey, std::size_t, ChunkKeyHash> rows_;
    std::vector<ChunkKey> keys_;           // by row
    std::vector<std::uint32_t> lens_;      // by row
    std::vector<std::uint32_t> payloads_;  // by row, then method
    std::uint64_t timed_bytes_ = 0;        // every method encodes each chunk
    std::vector<double> cpu_s_;            // by method

    // The batch being encoded: a fixed array, so helpers read entries while
    // the caller fills the next ones.
    ParallelLoop pool_;
    std::unique_ptr<Pending[]> batch_;
    std::size_t batch_count_ = 0, batch_bytes_ = 0;
    std::unique_ptr<ParallelLoop::Open> open_;
};

}  // namespace hiodsfs::stat
