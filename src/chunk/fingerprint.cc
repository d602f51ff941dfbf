// SHA-256 through OpenSSL EVP. The EVP_MD is fetched from the provider once
// per process and each Sha256 keeps one EVP_MD_CTX that is re-initialised
// per digest, because fetching or allocating per chunk would cost a large
// share of the throughput on chunks of a few KiB.
#include "chunk/fingerprint.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

namespace hiodsfs {
namespace {

// A digest that silently came out wrong would merge different chunks, so a
// crypto library that cannot hash is a fatal condition, not an error value.
[[noreturn]] void fatal(const char* what) {
    std::fprintf(stderr, "hiodsfs: OpenSSL SHA-256 failed: %s\n", what);
    std::abort();
}

// Fetched once and deliberately never freed: thread_local Sha256 objects of
// other threads may outlive static destructors at exit.
const EVP_MD* sha256_md() {
    static const EVP_MD* md = [] {
        EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
        if (m == nullptr) fatal("EVP_MD_fetch(SHA256)");
        return m;
    }();
    return md;
}

EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr) fatal("EVP_MD_CTX_new");
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_ctx(ctx_)); }

Digest Sha256::digest(const void* data, std::size_t len) {
    EVP_MD_CTX* ctx = as_ctx(ctx_);
    Digest d;
    unsigned int out_len = 0;
    // Re-initialising with the same EVP_MD keeps the provider context, so
    // this costs a few stores, not an allocation.
    if (EVP_DigestInit_ex(ctx, sha256_md(), nullptr) != 1) fatal("EVP_DigestInit_ex");
    if (EVP_DigestUpdate(ctx, data, len) != 1) fatal("EVP_DigestUpdate");
    if (EVP_DigestFinal_ex(ctx, d.bytes.data(), &out_len) != 1) fatal("EVP_DigestFinal_ex");
    if (out_len != d.bytes.size()) fatal("unexpected digest length");
    return d;
}

Sha256& thread_sha256() {
    thread_local Sha256 sha;
    return sha;
}

}  // namespace hiodsfs
