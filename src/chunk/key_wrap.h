// Encryption at rest, a passphrase's part (docs/architecture.md,
// "Encryption at rest"): a passphrase turned into a key-encrypting key
// with scrypt, and a store key wrapped under such a key with AES-256-GCM,
// for an encrypted store's key slot (engine/key_slot.h). The store's own
// key never changes: a new passphrase wraps it anew, and no chunk is
// rewritten.
// Thread-safety: functions of their arguments; a Passphrase is one owner's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chunk/cipher.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

// A passphrase's bytes, wiped when it goes.
class Passphrase {
public:
    static constexpr std::size_t kMaxBytes = 1024;
    Passphrase() = default;
    explicit Passphrase(std::string text) : text_(std::move(text)) {}
    Passphrase(const Passphrase&) = delete;
    Passphrase& operator=(const Passphrase&) = delete;
    Passphrase(Passphrase&& other) noexcept;
    Passphrase& operator=(Passphrase&& other) noexcept;
    ~Passphrase();
    const std::string& text() const { return text_; }
    bool empty() const { return text_.empty(); }

private:
    std::string text_;
};

// scrypt's cost (RFC 7914): n a power of two, r and p; memory 128·n·r bytes.
struct ScryptCost {
    std::uint64_t n = std::uint64_t{1} << 15;  // 32 MiB and about 0.1 s: an interactive unlock
    std::uint32_t r = 8;
    std::uint32_t p = 1;
    // Whether a slot may ask for this much: at most 256 MiB and n ≤ 2^20,
    // so a planted slot cannot make an unlock take the machine's memory.
    bool acceptable() const;
};

// The key-encrypting key of passphrase with salt; EIO if OpenSSL fails,
// EINVAL if cost is not acceptable.
Status passphrase_key(const Passphrase& passphrase, std::span<const std::uint8_t> salt, const ScryptCost& cost,
                      StoreKey* out);

// key sealed under kek with ad bound to it (ChunkCipher's seal, under a
// subkey of kek): a random nonce, the encrypted key and the tag,
// kWrappedKeyBytes in all.
inline constexpr std::size_t kWrappedKeyBytes = ChunkCipher::kOverhead + StoreKey::kBytes;
Status wrap_key(const StoreKey& kek, const StoreKey& key, std::span<const std::uint8_t> ad,
                std::vector<std::uint8_t>* out);
// What wrap_key sealed, under the same kek and ad; EBADMSG otherwise (a
// wrong passphrase, or a damaged or moved slot).
Status unwrap_key(const StoreKey& kek, std::span<const std::uint8_t> wrapped, std::span<const std::uint8_t> ad,
                  StoreKey* out);

}  // namespace hiodsfs
