// SHA-256 fingerprints through OpenSSL EVP, with one context reused for
// every digest (a fresh context per chunk costs ~30 %), and CRC-32C for
// segment record checksums (SSE4.2 instruction where the CPU has it).
// Thread-safety: a Sha256 instance is used by one thread at a time;
// crc32c is reentrant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hiodsfs/types.h"

namespace hiodsfs {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    Digest digest(const void* data, std::size_t len);

private:
    void* ctx_;  // EVP_MD_CTX*, kept opaque so callers need no OpenSSL headers
};

// One Sha256 per thread, for callers on thread pools.
Sha256& thread_sha256();

std::uint32_t crc32c(const void* data, std::size_t len, std::uint32_t seed = 0);

}  // namespace hiodsfs
