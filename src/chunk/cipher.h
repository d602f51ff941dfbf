// Encryption at rest, its primitives: a store key, the subkeys derived
// from it, authenticated encryption of a chunk's stored bytes and keyed
// fingerprints (docs/architecture.md, "Encryption at rest"), for the
// engine's encrypted stores.
//
// AES-256-GCM through OpenSSL EVP, with a random 96-bit nonce for every
// seal: under one key the chance of a repeated nonce stays below 2^-32 for
// the first 2^32 seals (NIST SP 800-38D, 8.3). The associated data binds
// the sealed bytes to what refers to them (codec.h: the chunk's id and its
// payload's prefix), so bytes moved or swapped inside a segment do not open.
// The subkeys are HKDF-SHA-256 of the store key, salted with the store's
// random id, one for each purpose: a key is never used for two.
// Thread-safety: a ChunkCipher is immutable once made; seal, open,
// fingerprint and key_check may run on any number of threads at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

// A store's key, 32 bytes; wiped when it goes.
class StoreKey {
public:
    static constexpr std::size_t kBytes = 32;
    StoreKey() = default;
    explicit StoreKey(std::span<const std::uint8_t, kBytes> bytes);
    StoreKey(const StoreKey& other) = default;
    StoreKey& operator=(const StoreKey& other) = default;
    ~StoreKey();
    const std::uint8_t* data() const { return bytes_.data(); }

private:
    std::array<std::uint8_t, kBytes> bytes_{};
};

class ChunkCipher;

// A chunk's fingerprint: keyed under an encrypted store's cipher, else
// SHA-256 (cipher.cc).
Digest chunk_fingerprint(const ChunkCipher* keyed, const void* data, std::size_t len);

// Fills out with bytes from OpenSSL's random generator; EIO if it has none.
Status random_bytes(std::span<std::uint8_t> out);

class ChunkCipher {
public:
    static constexpr std::size_t kNonceBytes = 12;
    static constexpr std::size_t kTagBytes = 16;
    // What a seal adds to the plain bytes.
    static constexpr std::size_t kOverhead = kNonceBytes + kTagBytes;

    // The subkeys of key for the store whose random id is store_id; EIO if
    // OpenSSL cannot derive them.
    static Status make(const StoreKey& key, std::span<const std::uint8_t> store_id,
                       std::unique_ptr<ChunkCipher>* out);
    ~ChunkCipher();
    ChunkCipher(const ChunkCipher&) = delete;
    ChunkCipher& operator=(const ChunkCipher&) = delete;

    // Appends the nonce, the encrypted bytes and the tag to out; ad is
    // bound to them, not stored. EIO if OpenSSL fails (no random bytes).
    Status seal(std::span<const std::uint8_t> plain, std::span<const std::uint8_t> ad,
                std::vector<std::uint8_t>* out) const;
    // The plain bytes of what seal made with this key and the same ad, in
    // place of plain's content; EBADMSG if a byte, the ad or the key differ.
    Status open(std::span<const std::uint8_t> sealed, std::span<const std::uint8_t> ad,
                std::vector<std::uint8_t>* plain) const;
    // The same into out, which takes exactly sealed.size() - kOverhead
    // bytes (EINVAL otherwise); out holds nothing of use after a failure.
    Status open(std::span<const std::uint8_t> sealed, std::span<const std::uint8_t> ad,
                std::span<std::uint8_t> out) const;
    // A chunk's fingerprint under this store's key (HMAC-SHA-256): equal
    // bytes still have equal prints within the store, and a print says
    // nothing to whoever lacks the key.
    Digest fingerprint(const void* data, std::size_t len) const;
    // A value that tells this key from another for the store's record of
    // it, and reveals nothing of the key (HMAC-SHA-256 of a constant under
    // a subkey of its own).
    Digest key_check() const;

private:
    ChunkCipher() = default;
    std::array<std::uint8_t, 32> chunk_key_{}, print_key_{}, check_key_{};
    // Unique to this cipher: each thread keys its OpenSSL contexts for it
    // once (cipher.cc).
    std::uint64_t serial_ = 0;
};

}  // namespace hiodsfs
