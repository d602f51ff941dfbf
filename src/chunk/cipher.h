// Encryption at rest, its primitives: a store key, the subkeys derived
// from it, authenticated encryption of a chunk's stored bytes and keyed
// fingerprints (docs/architecture.md, "Encryption at rest"), for the
// engine's encrypted stores.
//
// A store's chunks are sealed with XAES-256-GCM (C2SP's "XAES-256-GCM"):
// a random 192-bit nonce for every seal, whose first 96 bits derive a key
// of its own from the store's chunk key (two AES blocks, CMAC-style) and
// whose last 96 bits are that key's AES-256-GCM nonce, so no number of
// seals under one store key comes near a repeated nonce. Stores made
// before it (FORMAT "aes-256-gcm") keep AES-256-GCM with a random 96-bit
// nonce, under which the chance of a repeat stays below 2^-32 for the
// first 2^32 seals (NIST SP 800-38D, 8.3); so does a wrapped key
// (key_wrap.h), sealed once per passphrase. Both through OpenSSL EVP.
// The associated data binds the sealed bytes to what refers to them
// (codec.h: the chunk's id and its payload's prefix), so bytes moved or
// swapped inside a segment do not open.
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
    enum class Mode {
        kAesGcm,   // a random 96-bit nonce: FORMAT "aes-256-gcm", wrapped keys
        kXaesGcm,  // a random 192-bit nonce: FORMAT "xaes-256-gcm"
    };
    static constexpr std::size_t kNonceBytes = 12;   // kAesGcm's
    static constexpr std::size_t kXNonceBytes = 24;  // kXaesGcm's
    static constexpr std::size_t kTagBytes = 16;
    // What a kAesGcm seal adds to the plain bytes; overhead() is this
    // cipher's.
    static constexpr std::size_t kOverhead = kNonceBytes + kTagBytes;

    // The subkeys of key for the store whose random id is store_id; EIO if
    // OpenSSL cannot derive them.
    static Status make(const StoreKey& key, std::span<const std::uint8_t> store_id,
                       std::unique_ptr<ChunkCipher>* out, Mode mode = Mode::kAesGcm);
    // A cipher whose chunk key is chunk_key itself, not derived: for
    // known-answer tests of the sealing (its fingerprints and key check are
    // of no store).
    static Status with_chunk_key(std::span<const std::uint8_t, 32> chunk_key, Mode mode,
                                 std::unique_ptr<ChunkCipher>* out);
    ~ChunkCipher();
    ChunkCipher(const ChunkCipher&) = delete;
    ChunkCipher& operator=(const ChunkCipher&) = delete;

    Mode mode() const { return mode_; }
    std::size_t overhead() const { return nonce_bytes() + kTagBytes; }

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
    std::size_t nonce_bytes() const { return mode_ == Mode::kXaesGcm ? kXNonceBytes : kNonceBytes; }
    // kXaesGcm: L = AES-256(chunk key, 0^128) doubled in GF(2^128), the
    // CMAC subkey every message key's derivation uses.
    Status derive_cmac_subkey();
    Mode mode_ = Mode::kAesGcm;
    std::array<std::uint8_t, 32> chunk_key_{}, print_key_{}, check_key_{};
    std::array<std::uint8_t, 16> k1_{};
    // Unique to this cipher: each thread keys its OpenSSL contexts for it
    // once (cipher.cc).
    std::uint64_t serial_ = 0;
};

}  // namespace hiodsfs
