#include "chunk/cipher.h"

#include "chunk/fingerprint.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

namespace hiodsfs {

namespace {

// One subkey a purpose; the names are part of the format: changing one
// changes every key derived from it.
constexpr const char* kChunkInfo = "hiodsfs chunk encryption";
constexpr const char* kPrintInfo = "hiodsfs chunk fingerprint";
constexpr const char* kCheckInfo = "hiodsfs key check";
constexpr const char* kCheckText = "hiodsfs: this is the store's key";

bool hkdf(const StoreKey& key, std::span<const std::uint8_t> salt, const char* info,
          std::array<std::uint8_t, 32>* out) {
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    if (kdf == nullptr) return false;
    EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (ctx == nullptr) return false;
    OSSL_PARAM params[5];
    OSSL_PARAM* p = params;
    *p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>("SHA256"), 0);
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<std::uint8_t*>(key.data()),
                                             StoreKey::kBytes);
    if (!salt.empty())
        *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<std::uint8_t*>(salt.data()),
                                                 salt.size());
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info), std::strlen(info));
    *p = OSSL_PARAM_construct_end();
    const bool ok = EVP_KDF_derive(ctx, out->data(), out->size(), params) == 1;
    EVP_KDF_CTX_free(ctx);
    return ok;
}

Digest hmac(const std::array<std::uint8_t, 32>& key, const void* data, std::size_t len) {
    Digest d;
    unsigned int n = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), static_cast<const unsigned char*>(data), len,
         d.bytes.data(), &n);
    return d;
}

// AES-256-GCM and HMAC, fetched once: an implicit fetch on every
// initialisation costs more than sealing a 4 KiB chunk.
const EVP_CIPHER* aes_gcm() {
    static EVP_CIPHER* const c = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
    return c;
}
const EVP_CIPHER* aes_ecb() {
    static EVP_CIPHER* const c = EVP_CIPHER_fetch(nullptr, "AES-256-ECB", nullptr);
    return c;
}
EVP_MAC* hmac_algorithm() {
    static EVP_MAC* const m = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    return m;
}

std::atomic<std::uint64_t> next_cipher_serial{1};

// Nonces come from a per-thread pool of OpenSSL's random bytes, drawn 4 KiB
// at a time: a draw costs half a microsecond however small, a fifth of
// sealing an 8 KiB chunk. A forked child empties the pool of the thread
// that forked (the only one it has), so parent and child never hand out
// the same bytes; OpenSSL reseeds itself in the child.
struct NoncePool {
    std::array<std::uint8_t, 4096> bytes{};
    std::size_t used = bytes.size();
};
thread_local NoncePool nonce_pool;

void forget_nonces_after_fork() { nonce_pool.used = nonce_pool.bytes.size(); }

bool draw_nonce(std::uint8_t* out, std::size_t n) {
    static const bool registered = ::pthread_atfork(nullptr, nullptr, forget_nonces_after_fork) == 0;
    NoncePool& p = nonce_pool;
    if (!registered || n > p.bytes.size()) return RAND_bytes(out, static_cast<int>(n)) == 1;
    if (p.bytes.size() - p.used < n) {
        if (RAND_bytes(p.bytes.data(), static_cast<int>(p.bytes.size())) != 1) return false;
        p.used = 0;
    }
    std::memcpy(out, p.bytes.data() + p.used, n);  // each byte handed out once: used only grows
    p.used += n;
    return true;
}

// One thread's OpenSSL contexts, keyed for the cipher it used last (its
// serial): a chunk then costs its nonce and its bytes, not a new context,
// a key schedule and an HMAC key setup. Freed (and so wiped) when the
// thread ends or turns to another cipher.
struct ThreadContexts {
    std::uint64_t serial = 0;
    EVP_CIPHER_CTX* seal = nullptr;
    EVP_CIPHER_CTX* open = nullptr;
    EVP_CIPHER_CTX* derive = nullptr;  // kXaesGcm: AES-256 of the chunk key, block by block
    EVP_MAC_CTX* print = nullptr;
    void clear() {
        EVP_CIPHER_CTX_free(seal);
        EVP_CIPHER_CTX_free(open);
        EVP_CIPHER_CTX_free(derive);
        EVP_MAC_CTX_free(print);
        seal = open = derive = nullptr;
        print = nullptr;
        serial = 0;
    }
    ~ThreadContexts() { clear(); }
};

// kAesGcm: seal and open keyed with the chunk key. kXaesGcm: keyed per
// message (xaes_message_key), so only derive holds the chunk key.
ThreadContexts* keyed_contexts(std::uint64_t serial, ChunkCipher::Mode mode,
                               const std::array<std::uint8_t, 32>& chunk_key,
                               const std::array<std::uint8_t, 32>& print_key) {
    thread_local ThreadContexts t;
    if (t.serial == serial) return &t;
    t.clear();
    t.seal = EVP_CIPHER_CTX_new();
    t.open = EVP_CIPHER_CTX_new();
    t.derive = EVP_CIPHER_CTX_new();
    t.print = hmac_algorithm() != nullptr ? EVP_MAC_CTX_new(hmac_algorithm()) : nullptr;
    OSSL_PARAM params[2] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
                            OSSL_PARAM_construct_end()};
    const bool x = mode == ChunkCipher::Mode::kXaesGcm;
    const std::uint8_t* gcm_key = x ? nullptr : chunk_key.data();
    const bool ok = t.seal != nullptr && t.open != nullptr && t.derive != nullptr && t.print != nullptr &&
                    aes_gcm() != nullptr && aes_ecb() != nullptr &&
                    EVP_EncryptInit_ex2(t.seal, aes_gcm(), gcm_key, nullptr, nullptr) == 1 &&
                    EVP_DecryptInit_ex2(t.open, aes_gcm(), gcm_key, nullptr, nullptr) == 1 &&
                    EVP_EncryptInit_ex2(t.derive, aes_ecb(), chunk_key.data(), nullptr, nullptr) == 1 &&
                    EVP_CIPHER_CTX_set_padding(t.derive, 0) == 1 &&
                    EVP_MAC_init(t.print, print_key.data(), print_key.size(), params) == 1;
    if (!ok) {
        t.clear();
        return nullptr;
    }
    t.serial = serial;
    return &t;
}

// XAES-256-GCM's key for the message whose nonce begins with n12 (its
// first 12 bytes): AES-256 of (0x00 0x01 'X' 0x00 | n12) and (0x00 0x02 'X'
// 0x00 | n12), each XORed with the CMAC subkey k1 first.
bool xaes_message_key(EVP_CIPHER_CTX* derive, const std::array<std::uint8_t, 16>& k1, const std::uint8_t* n12,
                      std::uint8_t key[32]) {
    std::uint8_t m[32] = {0x00, 0x01, 'X', 0x00};
    std::memcpy(m + 4, n12, 12);
    m[16] = 0x00;
    m[17] = 0x02;
    m[18] = 'X';
    m[19] = 0x00;
    std::memcpy(m + 20, n12, 12);
    for (std::size_t i = 0; i < 16; ++i) {
        m[i] ^= k1[i];
        m[16 + i] ^= k1[i];
    }
    int n = 0;
    const bool ok = EVP_EncryptUpdate(derive, key, &n, m, sizeof m) == 1 && n == 32;
    OPENSSL_cleanse(m, sizeof m);
    return ok;
}

// The GCM context ready for one message: its nonce (kAesGcm), or its own
// key and the last 12 bytes of its nonce (kXaesGcm).
bool start_message(ThreadContexts* t, EVP_CIPHER_CTX* c, bool encrypt, ChunkCipher::Mode mode,
                   const std::array<std::uint8_t, 16>& k1, const std::uint8_t* nonce) {
    if (mode == ChunkCipher::Mode::kAesGcm)
        return encrypt ? EVP_EncryptInit_ex2(c, nullptr, nullptr, nonce, nullptr) == 1
                       : EVP_DecryptInit_ex2(c, nullptr, nullptr, nonce, nullptr) == 1;
    std::uint8_t key[32];
    bool ok = xaes_message_key(t->derive, k1, nonce, key);
    if (ok)
        ok = encrypt ? EVP_EncryptInit_ex2(c, nullptr, key, nonce + 12, nullptr) == 1
                     : EVP_DecryptInit_ex2(c, nullptr, key, nonce + 12, nullptr) == 1;
    OPENSSL_cleanse(key, sizeof key);
    return ok;
}

}  // namespace

StoreKey::StoreKey(std::span<const std::uint8_t, kBytes> bytes) { std::memcpy(bytes_.data(), bytes.data(), kBytes); }

StoreKey::~StoreKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

Status ChunkCipher::make(const StoreKey& key, std::span<const std::uint8_t> store_id,
                         std::unique_ptr<ChunkCipher>* out, Mode mode) {
    std::unique_ptr<ChunkCipher> c(new ChunkCipher());
    c->serial_ = next_cipher_serial.fetch_add(1);
    c->mode_ = mode;
    if (!hkdf(key, store_id, kChunkInfo, &c->chunk_key_) || !hkdf(key, store_id, kPrintInfo, &c->print_key_) ||
        !hkdf(key, store_id, kCheckInfo, &c->check_key_))
        return Status::error(EIO, "OpenSSL could not derive the store's subkeys (HKDF-SHA-256)");
    HIODSFS_TRY(c->derive_cmac_subkey());
    *out = std::move(c);
    return Status::ok();
}

Status ChunkCipher::with_chunk_key(std::span<const std::uint8_t, 32> chunk_key, Mode mode,
                                   std::unique_ptr<ChunkCipher>* out) {
    std::unique_ptr<ChunkCipher> c(new ChunkCipher());
    c->serial_ = next_cipher_serial.fetch_add(1);
    c->mode_ = mode;
    std::memcpy(c->chunk_key_.data(), chunk_key.data(), chunk_key.size());
    HIODSFS_TRY(c->derive_cmac_subkey());
    *out = std::move(c);
    return Status::ok();
}

Status ChunkCipher::derive_cmac_subkey() {
    if (mode_ != Mode::kXaesGcm) return Status::ok();
    ThreadContexts* t = keyed_contexts(serial_, mode_, chunk_key_, print_key_);
    std::uint8_t zero[16] = {}, l[16];
    int n = 0;
    if (t == nullptr || EVP_EncryptUpdate(t->derive, l, &n, zero, sizeof zero) != 1 || n != 16)
        return Status::error(EIO, "OpenSSL could not derive the store's subkeys (AES-256)");
    // Doubling in GF(2^128): a shift left, and the polynomial back in when
    // the top bit falls out.
    const bool carry = (l[0] & 0x80) != 0;
    for (std::size_t i = 0; i < 15; ++i) k1_[i] = static_cast<std::uint8_t>((l[i] << 1) | (l[i + 1] >> 7));
    k1_[15] = static_cast<std::uint8_t>((l[15] << 1) ^ (carry ? 0x87 : 0x00));
    OPENSSL_cleanse(l, sizeof l);
    return Status::ok();
}

ChunkCipher::~ChunkCipher() {
    OPENSSL_cleanse(chunk_key_.data(), chunk_key_.size());
    OPENSSL_cleanse(print_key_.data(), print_key_.size());
    OPENSSL_cleanse(check_key_.data(), check_key_.size());
    OPENSSL_cleanse(k1_.data(), k1_.size());
}

Status ChunkCipher::seal(std::span<const std::uint8_t> plain, std::span<const std::uint8_t> ad,
                         std::vector<std::uint8_t>* out) const {
    if (plain.size() > INT_MAX || ad.size() > INT_MAX) return Status::error(EINVAL, "too long to seal");
    const std::size_t at = out->size();
    const std::size_t nonce_len = nonce_bytes();
    out->resize(at + nonce_len + plain.size() + kTagBytes);
    std::uint8_t* nonce = out->data() + at;
    std::uint8_t* sealed = nonce + nonce_len;
    ThreadContexts* t = keyed_contexts(serial_, mode_, chunk_key_, print_key_);
    EVP_CIPHER_CTX* c = t != nullptr ? t->seal : nullptr;
    int n = 0, tail = 0;
    // A new nonce on the keyed context (kAesGcm: the key schedule stays).
    const bool ok = c != nullptr && draw_nonce(nonce, nonce_len) &&
                    start_message(t, c, true, mode_, k1_, nonce) &&
                    (ad.empty() || EVP_EncryptUpdate(c, nullptr, &n, ad.data(), static_cast<int>(ad.size())) == 1) &&
                    EVP_EncryptUpdate(c, sealed, &n, plain.data(), static_cast<int>(plain.size())) == 1 &&
                    EVP_EncryptFinal_ex(c, sealed + n, &tail) == 1 &&
                    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), sealed + plain.size()) ==
                        1;
    if (!ok) {
        out->resize(at);
        return Status::error(EIO, std::string("OpenSSL could not seal a chunk (") +
                                      (mode_ == Mode::kXaesGcm ? "XAES-256-GCM" : "AES-256-GCM") + ")");
    }
    return Status::ok();
}

Status ChunkCipher::open(std::span<const std::uint8_t> sealed, std::span<const std::uint8_t> ad,
                         std::vector<std::uint8_t>* plain) const {
    if (sealed.size() < overhead()) return Status::error(EBADMSG, "sealed chunk shorter than its nonce and tag");
    plain->resize(sealed.size() - overhead());
    Status st = open(sealed, ad, std::span<std::uint8_t>(plain->data(), plain->size()));
    if (!st) plain->clear();
    return st;
}

Status ChunkCipher::open(std::span<const std::uint8_t> sealed, std::span<const std::uint8_t> ad,
                         std::span<std::uint8_t> out) const {
    if (sealed.size() < overhead()) return Status::error(EBADMSG, "sealed chunk shorter than its nonce and tag");
    if (sealed.size() > INT_MAX || ad.size() > INT_MAX) return Status::error(EINVAL, "too long to open");
    const std::size_t len = sealed.size() - overhead();
    if (out.size() != len) return Status::error(EINVAL, "opening a chunk into a buffer of another size");
    const std::uint8_t* nonce = sealed.data();
    const std::uint8_t* body = nonce + nonce_bytes();
    std::uint8_t tag[kTagBytes];
    std::memcpy(tag, body + len, kTagBytes);
    ThreadContexts* t = keyed_contexts(serial_, mode_, chunk_key_, print_key_);
    EVP_CIPHER_CTX* c = t != nullptr ? t->open : nullptr;
    int n = 0, tail = 0;
    const bool set = c != nullptr && start_message(t, c, false, mode_, k1_, nonce) &&
                     (ad.empty() || EVP_DecryptUpdate(c, nullptr, &n, ad.data(), static_cast<int>(ad.size())) == 1) &&
                     EVP_DecryptUpdate(c, out.data(), &n, body, static_cast<int>(len)) == 1 &&
                     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag) == 1;
    if (!set) return Status::error(EIO, "OpenSSL could not open a chunk");
    if (EVP_DecryptFinal_ex(c, out.data() + n, &tail) != 1) {
        // What was decrypted did not authenticate: none of it is handed on.
        OPENSSL_cleanse(out.data(), out.size());
        return Status::error(EBADMSG, "chunk does not authenticate: damaged, moved, or another key's");
    }
    return Status::ok();
}

Digest chunk_fingerprint(const ChunkCipher* keyed, const void* data, std::size_t len) {
    return keyed != nullptr ? keyed->fingerprint(data, len) : thread_sha256().digest(data, len);
}

Status random_bytes(std::span<std::uint8_t> out) {
    if (out.size() > INT_MAX || RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
        return Status::error(EIO, "OpenSSL has no random bytes to give");
    return Status::ok();
}

Digest ChunkCipher::fingerprint(const void* data, std::size_t len) const {
    ThreadContexts* t = keyed_contexts(serial_, mode_, chunk_key_, print_key_);
    Digest d;
    std::size_t n = 0;
    // A NULL key keeps the one the context was keyed with.
    if (t != nullptr && EVP_MAC_init(t->print, nullptr, 0, nullptr) == 1 &&
        EVP_MAC_update(t->print, static_cast<const unsigned char*>(data), len) == 1 &&
        EVP_MAC_final(t->print, d.bytes.data(), &n, d.bytes.size()) == 1 && n == d.bytes.size())
        return d;
    return hmac(print_key_, data, len);  // the same value, the slow way
}

Digest ChunkCipher::key_check() const { return hmac(check_key_, kCheckText, std::strlen(kCheckText)); }

}  // namespace hiodsfs
