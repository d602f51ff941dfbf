// The encryption primitives (src/chunk/cipher.h): a seal opens with the same
// key and associated data and with nothing else, a flipped byte anywhere is
// refused, nonces do not repeat, and subkeys and fingerprints depend on the
// key and the store; in both modes, XAES-256-GCM (C2SP's test vectors) and
// the AES-256-GCM of the stores made before it.
#include "chunk/cipher.h"

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "chunk/fingerprint.h"

using namespace hiodsfs;

namespace {

StoreKey key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 31 + i);
    return StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

constexpr ChunkCipher::Mode kModes[] = {ChunkCipher::Mode::kXaesGcm, ChunkCipher::Mode::kAesGcm};

const char* mode_name(ChunkCipher::Mode m) { return m == ChunkCipher::Mode::kXaesGcm ? "xaes" : "aes"; }

std::unique_ptr<ChunkCipher> cipher(std::uint8_t seed, const std::string& store_id = "store-one",
                                    ChunkCipher::Mode mode = ChunkCipher::Mode::kXaesGcm) {
    std::unique_ptr<ChunkCipher> c;
    const auto* id = reinterpret_cast<const std::uint8_t*>(store_id.data());
    REQUIRE(ChunkCipher::make(key_of(seed), std::span<const std::uint8_t>(id, store_id.size()), &c, mode).is_ok());
    return c;
}

std::vector<std::uint8_t> unhex(const std::string& h) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

std::vector<std::uint8_t> bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

}  // namespace

TEST_CASE("a sealed chunk opens with its key and associated data", "[chunk][cipher]") {
    for (const auto mode : kModes) {
        INFO(mode_name(mode));
        auto c = cipher(1, "store-one", mode);
        const std::vector<std::uint8_t> ad = bytes("fingerprint and length");
        for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{8192},
                                std::size_t{65537}}) {
            std::vector<std::uint8_t> plain(len);
            for (std::size_t i = 0; i < len; ++i) plain[i] = static_cast<std::uint8_t>(i * 7 + len);
            std::vector<std::uint8_t> sealed = bytes("prefix");  // appended after what is there
            REQUIRE(c->seal(plain, ad, &sealed).is_ok());
            REQUIRE(sealed.size() == 6 + len + c->overhead());
            CHECK(std::string(sealed.begin(), sealed.begin() + 6) == "prefix");
            std::vector<std::uint8_t> back;
            REQUIRE(c->open(std::span<const std::uint8_t>(sealed).subspan(6), ad, &back).is_ok());
            CHECK(back == plain);
        }
        CHECK(c->overhead() == (mode == ChunkCipher::Mode::kXaesGcm ? 40u : 28u));
    }
}

TEST_CASE("a chunk sealed under one key does not open changed, elsewhere, or under another", "[chunk][cipher]") {
    for (const auto mode : kModes) {
        INFO(mode_name(mode));
        auto c = cipher(1, "store-one", mode);
        const std::string marker = "a marker string that must not be seen in a store";
        const std::vector<std::uint8_t> plain = bytes(marker), ad = bytes("print A");
        std::vector<std::uint8_t> sealed;
        REQUIRE(c->seal(plain, ad, &sealed).is_ok());
        // The plain bytes appear nowhere in what is stored.
        CHECK(std::string(sealed.begin(), sealed.end()).find("marker") == std::string::npos);
        std::vector<std::uint8_t> out;
        // Each byte flipped: the nonce, the encrypted bytes, the tag.
        for (std::size_t i = 0; i < sealed.size(); ++i) {
            std::vector<std::uint8_t> bad = sealed;
            bad[i] ^= 0x01;
            Status st = c->open(bad, ad, &out);
            INFO("byte " << i);
            CHECK(st.err() == EBADMSG);
            CHECK(out.empty());
        }
        // Bound to its associated data: what another record says it is.
        CHECK(c->open(sealed, bytes("print B"), &out).err() == EBADMSG);
        CHECK(c->open(sealed, {}, &out).err() == EBADMSG);
        // Another key, or the same key of another store.
        CHECK(cipher(2, "store-one", mode)->open(sealed, ad, &out).err() == EBADMSG);
        CHECK(cipher(1, "store-two", mode)->open(sealed, ad, &out).err() == EBADMSG);
        // The same key in the other mode.
        const auto other_mode =
            mode == ChunkCipher::Mode::kXaesGcm ? ChunkCipher::Mode::kAesGcm : ChunkCipher::Mode::kXaesGcm;
        CHECK(cipher(1, "store-one", other_mode)->open(sealed, ad, &out).err() == EBADMSG);
        // Cut short.
        CHECK(c->open(std::span<const std::uint8_t>(sealed).first(c->overhead() - 1), ad, &out).err() == EBADMSG);
        CHECK(c->open(std::span<const std::uint8_t>(sealed).first(sealed.size() - 1), ad, &out).err() == EBADMSG);
        REQUIRE(c->open(sealed, ad, &out).is_ok());
        CHECK(out == plain);
    }
}

TEST_CASE("XAES-256-GCM opens C2SP's test vectors, and seals what opens the same way", "[chunk][cipher]") {
    struct Vector {
        std::uint8_t key_byte;
        std::string ad, sealed_hex;
    };
    // c2sp.org/XAES-256-GCM: the nonce "ABCDEFGHIJKLMNOPQRSTUVWX", the
    // plaintext "XAES-256-GCM"; the second key's L has its top bit set.
    const Vector vectors[] = {
        {0x01, "", "ce546ef63c9cc60765923609b33a9a1974e96e52daf2fcf7075e2271"},
        {0x03, "c2sp.org/XAES-256-GCM", "986ec1832593df5443a179437fd083bf3fdb41abd740a21f71eb769d"},
    };
    const std::string nonce = "ABCDEFGHIJKLMNOPQRSTUVWX", plain = "XAES-256-GCM";
    for (const Vector& v : vectors) {
        INFO("key byte " << int(v.key_byte));
        std::array<std::uint8_t, 32> key;
        key.fill(v.key_byte);
        std::unique_ptr<ChunkCipher> x;
        REQUIRE(ChunkCipher::with_chunk_key(key, ChunkCipher::Mode::kXaesGcm, &x).is_ok());
        std::vector<std::uint8_t> sealed = bytes(nonce);
        const std::vector<std::uint8_t> body = unhex(v.sealed_hex);
        sealed.insert(sealed.end(), body.begin(), body.end());
        std::vector<std::uint8_t> out;
        REQUIRE(x->open(sealed, bytes(v.ad), &out).is_ok());
        CHECK(std::string(out.begin(), out.end()) == plain);
        sealed[30] ^= 0x04;
        CHECK(x->open(sealed, bytes(v.ad), &out).err() == EBADMSG);
        // A seal of its own, with a random nonce, opens likewise.
        std::vector<std::uint8_t> own;
        REQUIRE(x->seal(bytes(plain), bytes(v.ad), &own).is_ok());
        REQUIRE(own.size() == ChunkCipher::kXNonceBytes + plain.size() + ChunkCipher::kTagBytes);
        REQUIRE(x->open(own, bytes(v.ad), &out).is_ok());
        CHECK(std::string(out.begin(), out.end()) == plain);
        // AES-256-GCM under the same key does not open it.
        std::unique_ptr<ChunkCipher> plain_gcm;
        REQUIRE(ChunkCipher::with_chunk_key(key, ChunkCipher::Mode::kAesGcm, &plain_gcm).is_ok());
        CHECK(plain_gcm->open(own, bytes(v.ad), &out).err() == EBADMSG);
    }
}

TEST_CASE("every seal draws a nonce of its own", "[chunk][cipher]") {
    for (const auto mode : kModes) {
        INFO(mode_name(mode));
        auto c = cipher(3, "store-one", mode);
        const std::vector<std::uint8_t> plain(64, 0x5a);
        std::set<std::vector<std::uint8_t>> nonces, seals;
        const std::size_t nonce_bytes = c->overhead() - ChunkCipher::kTagBytes;
        for (int i = 0; i < 2000; ++i) {
            std::vector<std::uint8_t> s;
            REQUIRE(c->seal(plain, {}, &s).is_ok());
            nonces.emplace(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(nonce_bytes));
            seals.insert(s);
        }
        CHECK(nonces.size() == 2000);
        CHECK(seals.size() == 2000);  // equal bytes sealed twice look unrelated
    }
}

TEST_CASE("keyed fingerprints: equal within a store, unrelated across keys and to plain SHA-256",
          "[chunk][cipher]") {
    auto a = cipher(4), b = cipher(5), other_store = cipher(4, "store-two");
    const std::string x = "the same bytes", y = "other bytes";
    CHECK(a->fingerprint(x.data(), x.size()) == a->fingerprint(x.data(), x.size()));
    CHECK_FALSE(a->fingerprint(x.data(), x.size()) == a->fingerprint(y.data(), y.size()));
    CHECK_FALSE(a->fingerprint(x.data(), x.size()) == b->fingerprint(x.data(), x.size()));
    CHECK_FALSE(a->fingerprint(x.data(), x.size()) == other_store->fingerprint(x.data(), x.size()));
    CHECK_FALSE(a->fingerprint(x.data(), x.size()) == Sha256().digest(x.data(), x.size()));
    // The key check tells keys apart and is none of the other values.
    CHECK(a->key_check() == cipher(4)->key_check());
    CHECK_FALSE(a->key_check() == b->key_check());
    CHECK_FALSE(a->key_check() == other_store->key_check());
}

TEST_CASE("a thread that turns from one cipher to another and back gets each one's prints and seals",
          "[chunk][cipher]") {
    auto a = cipher(1);
    auto b = cipher(2);
    const std::vector<std::uint8_t> data = bytes("a chunk's bytes");
    const Digest pa = a->fingerprint(data.data(), data.size());
    const Digest pb = b->fingerprint(data.data(), data.size());
    CHECK_FALSE(pa == pb);
    std::vector<std::uint8_t> sealed_a;
    REQUIRE(a->seal(data, bytes("ad"), &sealed_a).is_ok());
    std::vector<std::uint8_t> sealed_b, plain;
    REQUIRE(b->seal(data, bytes("ad"), &sealed_b).is_ok());
    // Back to a: its contexts are keyed again, and agree with the first use.
    CHECK(a->fingerprint(data.data(), data.size()) == pa);
    REQUIRE(a->open(sealed_a, bytes("ad"), &plain).is_ok());
    CHECK(plain == data);
    CHECK(a->open(sealed_b, bytes("ad"), &plain).err() == EBADMSG);
    // Other threads key their own.
    Digest from_thread;
    std::thread([&] { from_thread = a->fingerprint(data.data(), data.size()); }).join();
    CHECK(from_thread == pa);
    // And a new cipher with a's key and store is a's in all but its contexts.
    auto again = cipher(1);
    CHECK(again->fingerprint(data.data(), data.size()) == pa);
    REQUIRE(again->open(sealed_a, bytes("ad"), &plain).is_ok());
}

TEST_CASE("a forked child draws nonces of its own, not the ones its parent would draw next", "[chunk][cipher]") {
    for (const auto mode : kModes) {
        INFO(mode_name(mode));
        auto c = cipher(6, "store-one", mode);
        const std::size_t nonce_bytes = c->overhead() - ChunkCipher::kTagBytes;
        const std::vector<std::uint8_t> plain(16, 0x11);
        std::vector<std::uint8_t> first;
        REQUIRE(c->seal(plain, {}, &first).is_ok());  // the thread's nonces drawn ahead
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            std::vector<std::uint8_t> s;
            const bool ok = c->seal(plain, {}, &s).is_ok() && s.size() >= nonce_bytes;
            const ssize_t wrote = ok ? ::write(fds[1], s.data(), nonce_bytes) : 0;
            ::_exit(wrote == static_cast<ssize_t>(nonce_bytes) ? 0 : 1);
        }
        ::close(fds[1]);
        std::vector<std::uint8_t> theirs(nonce_bytes);
        std::size_t got = 0;
        while (got < theirs.size()) {
            const ssize_t n = ::read(fds[0], theirs.data() + got, theirs.size() - got);
            if (n <= 0) break;
            got += static_cast<std::size_t>(n);
        }
        ::close(fds[0]);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
        REQUIRE(got == nonce_bytes);
        std::vector<std::uint8_t> mine;
        REQUIRE(c->seal(plain, {}, &mine).is_ok());
        CHECK(std::vector<std::uint8_t>(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(nonce_bytes)) !=
              theirs);
    }
}
