#include "chunk/key_wrap.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

namespace hiodsfs {

namespace {

constexpr std::uint64_t kMaxScryptBytes = std::uint64_t{256} << 20;

// A key-encrypting key's cipher: ChunkCipher's AES-256-GCM, under a subkey
// of kek of its own (the HKDF salt names the purpose).
Status kek_cipher(const StoreKey& kek, std::unique_ptr<ChunkCipher>* out) {
    static constexpr char kSalt[] = "hiodsfs key wrapping";
    // AES-256-GCM: a wrapped key is sealed once per passphrase, and its size
    // (kWrappedKeyBytes) is the key slot's.
    return ChunkCipher::make(kek, std::span(reinterpret_cast<const std::uint8_t*>(kSalt), sizeof kSalt - 1), out,
                             ChunkCipher::Mode::kAesGcm);
}

}  // namespace

Passphrase::Passphrase(Passphrase&& other) noexcept : text_(std::move(other.text_)) {
    OPENSSL_cleanse(other.text_.data(), other.text_.size());
    other.text_.clear();
}

Passphrase& Passphrase::operator=(Passphrase&& other) noexcept {
    if (this != &other) {
        OPENSSL_cleanse(text_.data(), text_.size());
        text_ = std::move(other.text_);
        OPENSSL_cleanse(other.text_.data(), other.text_.size());
        other.text_.clear();
    }
    return *this;
}

Passphrase::~Passphrase() { OPENSSL_cleanse(text_.data(), text_.size()); }

bool ScryptCost::acceptable() const {
    if (n < 2 || (n & (n - 1)) != 0 || n > (std::uint64_t{1} << 20) || r == 0 || p == 0 || r > 64 || p > 16)
        return false;
    return 128 * n * r <= kMaxScryptBytes;
}

Status passphrase_key(const Passphrase& passphrase, std::span<const std::uint8_t> salt, const ScryptCost& cost,
                      StoreKey* out) {
    if (!cost.acceptable())
        return Status::error(EINVAL, "scrypt cost n=" + std::to_string(cost.n) + " r=" + std::to_string(cost.r) +
                                         " p=" + std::to_string(cost.p) + " is out of bounds");
    std::array<std::uint8_t, StoreKey::kBytes> k{};
    // Room for scrypt's own buffers besides the 128·n·r it names.
    const std::uint64_t maxmem = 128 * cost.n * cost.r * 2 + (std::uint64_t{1} << 20);
    const bool ok = EVP_PBE_scrypt(passphrase.text().data(), passphrase.text().size(), salt.data(), salt.size(),
                                   cost.n, cost.r, cost.p, maxmem, k.data(), k.size()) == 1;
    if (ok) *out = StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(k));
    OPENSSL_cleanse(k.data(), k.size());
    if (!ok) return Status::error(EIO, "OpenSSL could not derive a key from the passphrase (scrypt)");
    return Status::ok();
}

Status wrap_key(const StoreKey& kek, const StoreKey& key, std::span<const std::uint8_t> ad,
                std::vector<std::uint8_t>* out) {
    std::unique_ptr<ChunkCipher> c;
    HIODSFS_TRY(kek_cipher(kek, &c));
    out->clear();
    return c->seal(std::span<const std::uint8_t>(key.data(), StoreKey::kBytes), ad, out);
}

Status unwrap_key(const StoreKey& kek, std::span<const std::uint8_t> wrapped, std::span<const std::uint8_t> ad,
                  StoreKey* out) {
    if (wrapped.size() != kWrappedKeyBytes) return Status::error(EBADMSG, "a wrapped key is 60 bytes");
    std::unique_ptr<ChunkCipher> c;
    HIODSFS_TRY(kek_cipher(kek, &c));
    std::array<std::uint8_t, StoreKey::kBytes> k{};
    Status opened = c->open(wrapped, ad, k);
    if (opened) *out = StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(k));
    OPENSSL_cleanse(k.data(), k.size());
    if (opened.err() == EBADMSG)
        return Status::error(EBADMSG, "the wrapped key does not authenticate under this passphrase");
    return opened;
}

}  // namespace hiodsfs
