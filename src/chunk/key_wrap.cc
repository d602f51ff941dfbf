#include "chunk/key_wrap.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

namespace hiodsfs {

namespace {

constexpr std::size_t kNonceBytes = 12;
constexpr std::size_t kTagBytes = 16;
constexpr std::uint64_t kMaxScryptBytes = std::uint64_t{256} << 20;

struct CipherCtxFree {
    void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

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
    out->assign(kWrappedKeyBytes, 0);
    std::uint8_t* nonce = out->data();
    std::uint8_t* body = nonce + kNonceBytes;
    CipherCtx c(EVP_CIPHER_CTX_new());
    int n = 0, tail = 0;
    const bool ok = c != nullptr && random_bytes(std::span<std::uint8_t>(nonce, kNonceBytes)).is_ok() &&
                    EVP_EncryptInit_ex2(c.get(), EVP_aes_256_gcm(), kek.data(), nonce, nullptr) == 1 &&
                    (ad.empty() || EVP_EncryptUpdate(c.get(), nullptr, &n, ad.data(), static_cast<int>(ad.size())) == 1) &&
                    EVP_EncryptUpdate(c.get(), body, &n, key.data(), static_cast<int>(StoreKey::kBytes)) == 1 &&
                    EVP_EncryptFinal_ex(c.get(), body + n, &tail) == 1 &&
                    EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                                        body + StoreKey::kBytes) == 1;
    if (!ok) {
        out->clear();
        return Status::error(EIO, "OpenSSL could not wrap the store key (AES-256-GCM)");
    }
    return Status::ok();
}

Status unwrap_key(const StoreKey& kek, std::span<const std::uint8_t> wrapped, std::span<const std::uint8_t> ad,
                  StoreKey* out) {
    if (wrapped.size() != kWrappedKeyBytes) return Status::error(EBADMSG, "a wrapped key is 60 bytes");
    if (ad.size() > INT_MAX) return Status::error(EINVAL, "associated data too long");
    const std::uint8_t* nonce = wrapped.data();
    const std::uint8_t* body = nonce + kNonceBytes;
    std::array<std::uint8_t, kTagBytes> tag{};
    std::memcpy(tag.data(), body + StoreKey::kBytes, kTagBytes);
    std::array<std::uint8_t, StoreKey::kBytes> k{};
    CipherCtx c(EVP_CIPHER_CTX_new());
    int n = 0, tail = 0;
    const bool set = c != nullptr && EVP_DecryptInit_ex2(c.get(), EVP_aes_256_gcm(), kek.data(), nonce, nullptr) == 1 &&
                     (ad.empty() || EVP_DecryptUpdate(c.get(), nullptr, &n, ad.data(), static_cast<int>(ad.size())) == 1) &&
                     EVP_DecryptUpdate(c.get(), k.data(), &n, body, static_cast<int>(StoreKey::kBytes)) == 1 &&
                     EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag.data()) == 1;
    if (!set) {
        OPENSSL_cleanse(k.data(), k.size());
        return Status::error(EIO, "OpenSSL could not unwrap a key (AES-256-GCM)");
    }
    const bool authentic = EVP_DecryptFinal_ex(c.get(), k.data() + n, &tail) == 1;
    if (authentic) *out = StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(k));
    OPENSSL_cleanse(k.data(), k.size());
    if (!authentic) return Status::error(EBADMSG, "the wrapped key does not authenticate under this passphrase");
    return Status::ok();
}

}  // namespace hiodsfs
