// Key wrapping (src/chunk/key_wrap.h): scrypt gives the same key for the
// same passphrase and salt and another for anything else, a wrapped key
// opens only under its own key and associated data, and a slot's cost is
// bounded.
#include "chunk/key_wrap.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>

using namespace hiodsfs;

namespace {

const ScryptCost kCheap{1 << 10, 8, 1};  // a test's: the default's 1/32

std::span<const std::uint8_t> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

StoreKey derived(const std::string& passphrase, const std::string& salt, const ScryptCost& cost = kCheap) {
    StoreKey k;
    REQUIRE(passphrase_key(Passphrase(passphrase), as_bytes(salt), cost, &k).is_ok());
    return k;
}

bool same(const StoreKey& a, const StoreKey& b) { return std::memcmp(a.data(), b.data(), StoreKey::kBytes) == 0; }

}  // namespace

TEST_CASE("key wrap: scrypt is a function of passphrase, salt and cost", "[key_wrap]") {
    const StoreKey a = derived("correct horse", "salt-one");
    CHECK(same(a, derived("correct horse", "salt-one")));
    CHECK_FALSE(same(a, derived("correct horsf", "salt-one")));
    CHECK_FALSE(same(a, derived("correct horse", "salt-two")));
    CHECK_FALSE(same(a, derived("correct horse", "salt-one", ScryptCost{1 << 11, 8, 1})));
    // RFC 7914's test vector 2 ("password", "NaCl", N=1024, r=8, p=16),
    // the first 32 bytes: the KDF is scrypt itself.
    const StoreKey v = derived("password", "NaCl", ScryptCost{1024, 8, 16});
    const std::uint8_t want[8] = {0xfd, 0xba, 0xbe, 0x1c, 0x9d, 0x34, 0x72, 0x00};
    CHECK(std::memcmp(v.data(), want, sizeof want) == 0);
}

TEST_CASE("key wrap: a wrapped key opens under its key and associated data only", "[key_wrap]") {
    const StoreKey kek = derived("pass", "salt");
    std::array<std::uint8_t, StoreKey::kBytes> raw{};
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>(i * 7 + 1);
    const StoreKey key{std::span<const std::uint8_t, StoreKey::kBytes>(raw)};
    std::vector<std::uint8_t> wrapped;
    REQUIRE(wrap_key(kek, key, as_bytes("store-a"), &wrapped).is_ok());
    REQUIRE(wrapped.size() == kWrappedKeyBytes);
    CHECK(std::search(wrapped.begin(), wrapped.end(), raw.begin(), raw.end()) == wrapped.end());
    StoreKey out;
    REQUIRE(unwrap_key(kek, wrapped, as_bytes("store-a"), &out).is_ok());
    CHECK(same(out, key));
    CHECK(unwrap_key(derived("pasS", "salt"), wrapped, as_bytes("store-a"), &out).err() == EBADMSG);
    CHECK(unwrap_key(kek, wrapped, as_bytes("store-b"), &out).err() == EBADMSG);
    for (std::size_t at = 0; at < wrapped.size(); at += 11) {
        std::vector<std::uint8_t> bad = wrapped;
        bad[at] ^= 0x20;
        CHECK(unwrap_key(kek, bad, as_bytes("store-a"), &out).err() == EBADMSG);
    }
    wrapped.pop_back();
    CHECK(unwrap_key(kek, wrapped, as_bytes("store-a"), &out).err() == EBADMSG);
    // Two wraps of one key differ (a fresh nonce each).
    std::vector<std::uint8_t> w1, w2;
    REQUIRE(wrap_key(kek, key, as_bytes("store-a"), &w1).is_ok());
    REQUIRE(wrap_key(kek, key, as_bytes("store-a"), &w2).is_ok());
    CHECK(w1 != w2);
}

TEST_CASE("key wrap: a cost beyond the bounds is refused before any work", "[key_wrap]") {
    CHECK(ScryptCost{}.acceptable());
    CHECK_FALSE(ScryptCost{1000, 8, 1}.acceptable());          // not a power of two
    CHECK_FALSE(ScryptCost{1ull << 21, 8, 1}.acceptable());    // n too large
    CHECK_FALSE(ScryptCost{1ull << 20, 8, 1}.acceptable());    // 1 GiB
    CHECK_FALSE(ScryptCost{1 << 10, 0, 1}.acceptable());
    CHECK_FALSE(ScryptCost{1 << 10, 8, 0}.acceptable());
    CHECK_FALSE(ScryptCost{1 << 10, 8, 17}.acceptable());
    StoreKey k;
    CHECK(passphrase_key(Passphrase("p"), as_bytes("s"), ScryptCost{1ull << 30, 8, 1}, &k).err() == EINVAL);
}

TEST_CASE("key wrap: a passphrase moved from keeps nothing", "[key_wrap]") {
    Passphrase a("secret words");
    Passphrase b(std::move(a));
    CHECK(b.text() == "secret words");
    CHECK(a.empty());
}
