// SHA-256: known vectors, context reuse, one context per thread.
#include "chunk/fingerprint.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "test_data.h"

using hiodsfs::Sha256;

namespace {

std::string sha_hex(Sha256& sha, const std::string& s) {
    return sha.digest(s.data(), s.size()).hex();
}

}  // namespace

TEST_CASE("SHA-256 known vectors", "[sha256]") {
    Sha256 sha;
    CHECK(sha_hex(sha, "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha_hex(sha, "abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha_hex(sha, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha_hex(sha, std::string(1000000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // Same context again after a large input: no state carried over.
    CHECK(sha_hex(sha, "abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha_hex(hiodsfs::thread_sha256(), "abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("a reused SHA-256 context gives the same digests as fresh ones", "[sha256]") {
    const auto data = hiodsfs::test::random_bytes(4 << 20, 11);
    Sha256 reused;
    std::uint64_t seed = 12;
    std::size_t pos = 0;
    int n = 0;
    while (pos < data.size()) {
        const std::size_t len =
            std::min<std::size_t>(data.size() - pos, hiodsfs::test::splitmix64(seed) % 70000);
        Sha256 fresh;
        const auto a = reused.digest(data.data() + pos, len);
        CHECK(a == fresh.digest(data.data() + pos, len));
        CHECK(a == hiodsfs::thread_sha256().digest(data.data() + pos, len));
        pos += len;
        ++n;
    }
    CHECK(n > 50);
    // Different inputs must of course give different digests.
    CHECK_FALSE(reused.digest(data.data(), 100) == reused.digest(data.data() + 1, 100));
}

TEST_CASE("thread_sha256 is one instance per thread", "[sha256]") {
    Sha256* main_one = &hiodsfs::thread_sha256();
    CHECK(&hiodsfs::thread_sha256() == main_one);
    Sha256* other = nullptr;
    std::string other_hex;
    std::thread t([&] {
        other = &hiodsfs::thread_sha256();
        other_hex = sha_hex(*other, "abc");
    });
    t.join();
    CHECK(other != main_one);
    CHECK(other_hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
