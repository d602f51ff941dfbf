// How a chunk is stored: as it is, or compressed with lz4 or zstd (with or
// without a dictionary). An encoded chunk's payload starts with a prefix
// that says how to turn it back into the chunk, 4 to 12 bytes (5 or 6 for
// a chunk of 2-32 KiB):
//   0x80 | flags << 2 | method u8 | level i8 |
//   dictionary id (LEB128, 0: none) | raw length (LEB128) | compressed bytes
// Flags: bit 0 (0x04 of the first byte) says the bytes after the prefix
// are sealed (ChunkCipher, an encrypted store): nonce, the compressed
// bytes encrypted, tag; with it the method may be none, for a chunk
// stored as it is. The other flag bits are 0.
// The level is the one it was compressed at, so compaction can tell a
// chunk stored below the store's background level. The first 0.6.0
// builds wrote a fixed 12-byte prefix, which is still read:
//   method u8 | level i8 | 0 u8 | 0 u8 | dictionary id u32 | raw length u32
// (little-endian); its first byte never has the top bit set.
// A chunk that would not shrink below kWorthIt of its size is stored as it
// is, so random or already-compressed data costs a sample, not a
// compression.
// Thread-safety: Compression and the functions are of their arguments
// only; a ChunkEncoder is used by one thread at a time; a Dictionary and a
// DictionarySet may be shared.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "chunk/cipher.h"
#include "hiodsfs/compression.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// A zstd dictionary a store trained from its chunks, known by its id
// (1, 2, ...: the prefix's dictionary field). Its compression tables are
// built once per level on first use.
class Dictionary {
public:
    // EINVAL if bytes is not a dictionary zstd accepts.
    static Status make(std::uint32_t id, std::string bytes, std::shared_ptr<const Dictionary>* out);
    ~Dictionary();
    Dictionary(const Dictionary&) = delete;
    Dictionary& operator=(const Dictionary&) = delete;

    std::uint32_t id() const { return id_; }
    const std::string& bytes() const { return bytes_; }
    // Opaque ZSTD_DDict* / ZSTD_CDict* (callers need no zstd header).
    void* decompression_tables() const { return ddict_; }
    void* compression_tables(int level) const;

private:
    Dictionary(std::uint32_t id, std::string bytes) : id_(id), bytes_(std::move(bytes)) {}
    std::uint32_t id_;
    std::string bytes_;
    void* ddict_ = nullptr;
    mutable std::mutex cdict_mu_;
    mutable std::map<int, void*> cdicts_;
};

// The dictionaries a store holds, by id.
class DictionarySet {
public:
    void add(std::shared_ptr<const Dictionary> d);
    std::shared_ptr<const Dictionary> find(std::uint32_t id) const;
    // The newest one (highest id), or null: what new chunks are compressed with.
    std::shared_ptr<const Dictionary> newest() const;
    std::size_t size() const;
    std::vector<std::uint32_t> ids() const;

private:
    mutable std::shared_mutex mu_;
    std::map<std::uint32_t, std::shared_ptr<const Dictionary>> by_id_;
};

// The longest prefix, which the encoder leaves room for.
inline constexpr std::uint32_t kMaxCodecPrefixBytes = 12;
// A chunk is stored encoded only if its payload, prefix included, is at
// most this share of its size.
inline constexpr double kWorthIt = 0.97;

// What an encoded payload's prefix says.
struct CodecPrefix {
    CompressionMethod method = CompressionMethod::kNone;
    int level = 0;
    std::uint32_t dictionary = 0;
    std::uint32_t raw_length = 0;
    std::uint32_t bytes = 0;  // the prefix's own: the compressed bytes follow
    bool sealed = false;      // they are sealed (an encrypted store's)
};
// False if the payload is too short or its prefix is not one this program
// writes (unknown method or flags, raw length 0).
bool read_codec_prefix(const char* payload, std::uint32_t len, CodecPrefix* out);

// Compresses chunks; keeps its compression contexts and output buffer.
class ChunkEncoder {
public:
    ChunkEncoder();
    ~ChunkEncoder();
    ChunkEncoder(const ChunkEncoder&) = delete;
    ChunkEncoder& operator=(const ChunkEncoder&) = delete;

    struct Payload {
        const char* data = nullptr;  // the chunk itself, or this encoder's buffer
        std::uint32_t length = 0;
        bool encoded = false;
        std::uint32_t dictionary = 0;  // encoded with this dictionary (0: none)
    };
    // The payload to store for a chunk: encoded when that saves enough,
    // otherwise the chunk as it is. dict (zstd only) may be null. Valid
    // until the next call. sampled: the caller already found that
    // looks_incompressible() is false for it (the sample is not taken twice).
    Payload encode(const char* raw, std::uint32_t len, const Compression& c, const Dictionary* dict = nullptr,
                   bool sampled = false);

    // Calls since construction that compressed, and that a sample or the
    // result sent back raw (for tests and counters).
    std::uint64_t compressed() const { return compressed_; }
    std::uint64_t skipped() const { return skipped_; }

private:
    void* zstd_ = nullptr;  // ZSTD_CCtx*
    std::vector<char> lz4_state_;
    std::vector<char> out_;
    std::uint64_t compressed_ = 0, skipped_ = 0;
};

// One encoder per thread, for callers on thread pools.
ChunkEncoder& thread_chunk_encoder();

// Whether a sample of the chunk looks like random bytes (order-0 entropy
// near 8 bits a byte): such a chunk is stored raw without trying.
bool looks_incompressible(const char* data, std::uint32_t len);

// Trains a zstd dictionary of at most `capacity` bytes from samples: chunks
// of sizes[i] bytes each, back to back in `samples` (ZDICT_trainFromBuffer).
// EINVAL with zstd's reason when it cannot (too few or too small samples);
// *out is then left as it was.
Status train_dictionary(std::string_view samples, const std::vector<std::size_t>& sizes,
                        std::size_t capacity, std::string* out);

// An encrypted store's payload for chunk id: the prefix of the encoding
// (encoded: payload is one ChunkEncoder made) or of the chunk as it is,
// with the sealed flag, then the bytes after it sealed, bound to id and
// the prefix (the associated data): bytes moved to another chunk's place,
// or a prefix changed, do not open. Written to *out. EIO if OpenSSL fails.
Status seal_chunk_payload(const ChunkCipher& cipher, ChunkId id, const char* payload, std::uint32_t len,
                          bool encoded, std::vector<std::uint8_t>* out);

// Turns an encoded payload back into the chunk: out has room for
// expect_raw bytes, which the prefix must state. EIO with one line when
// the prefix, the dictionary (dicts may be null when none is used) or the
// compressed bytes are wrong, or they do not make exactly expect_raw bytes.
// A sealed payload is opened with cipher as chunk id's first; EIO if there
// is no cipher or it does not open (damaged, moved, another key's).
Status decode_chunk(const char* payload, std::uint32_t len, char* out, std::uint32_t expect_raw,
                    const DictionarySet* dicts, const ChunkCipher* cipher = nullptr, ChunkId id = 0);

}  // namespace hiodsfs
