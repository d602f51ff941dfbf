// An encrypted store over a tier (engine/sealed_tier.h): the metadata
// objects go to the pool sealed and bound to their names, "format" alone
// plain; the pool's FORMAT decides, before anything else of it is read,
// that a key is needed and which; an empty directory recovers the store
// from the journal and from a snapshot with the key, and from nothing
// without it; no byte written is anywhere in the pool; fsck checks it. A
// passphrase store keeps its key slot in the pool, where a change of
// passphrase (fsck's, under the store's lock) replaces it.
#include "engine/sealed_tier.h"

#include <catch2/catch.hpp>

#include "../store/memory_tier.h"
#include "engine/encryption.h"
#include "engine/key_slot.h"
#include "fsck/change_key.h"
#include "engine_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

const std::string kTierMarker = "TIER-MARKER-0be91d";

std::shared_ptr<const StoreKey> tier_key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 11 + i);
    return std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

std::unique_ptr<ChunkCipher> tier_cipher_of(std::uint8_t seed) {
    std::unique_ptr<ChunkCipher> c;
    const std::uint8_t id[16] = {1, 2, 3};
    REQUIRE(ChunkCipher::make(*tier_key_of(seed), id, &c).is_ok());
    return c;
}

// A name for a file, marked all through: whatever of it the metadata
// holds (the journal's records carry names), the search finds.
std::string marked_name(int i) { return kTierMarker + "-" + std::to_string(i); }

std::vector<std::uint8_t> marked_bytes(std::size_t n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>('a' + rng() % 16);
    for (std::size_t at = 0; at + kTierMarker.size() < n; at += 1021)
        std::copy(kTierMarker.begin(), kTierMarker.end(), v.begin() + static_cast<std::ptrdiff_t>(at));
    return v;
}

bool pool_holds(MemoryTier& tier, const std::string& s) {
    std::lock_guard lock(tier.mu);
    auto in = [&](const std::vector<char>& bytes) {
        return std::string_view(bytes.data(), bytes.size()).find(s) != std::string_view::npos;
    };
    for (const auto& [id, bytes] : tier.objects)
        if (in(bytes)) return true;
    for (const auto& [name, bytes] : tier.named)
        if (in(bytes)) return true;
    return false;
}

EngineOptions sealed_options(const std::string& store, MemoryTier* tier, std::shared_ptr<const StoreKey> key) {
    EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
    o.segments.tier = tier;
    o.segments.cache_bytes = 1ull << 30;
    o.key = std::move(key);
    return o;
}

EngineOptions passphrase_options(const std::string& store, MemoryTier* tier, const std::string& passphrase) {
    EngineOptions o = sealed_options(store, tier, nullptr);
    if (!passphrase.empty()) o.passphrase = std::make_shared<const Passphrase>(passphrase);
    return o;
}

std::string pool_slot_text(MemoryTier& tier) {
    std::lock_guard lock(tier.mu);
    const auto it = tier.named.find(kKeySlotObject);
    return it == tier.named.end() ? std::string() : std::string(it->second.begin(), it->second.end());
}

// hiodsfs-fsck --change-key's part for a store in a pool.
Status change_pool_passphrase(MemoryTier* tier, const std::string& from, const std::string& to) {
    ChangeKeyOptions co;
    co.passphrase = std::make_shared<const Passphrase>(from);
    co.new_passphrase = std::make_shared<const Passphrase>(to);
    co.cost = ScryptCost{1 << 10, 8, 1};
    return change_pool_store_key(tier, co);
}

}  // namespace

TEST_CASE("sealed tier: objects round trip sealed, appends frame by frame, and damage or a move reads as damage",
          "[engine][tier][encryption]") {
    MemoryTier base;
    const auto cipher = tier_cipher_of(1);
    SealedTier tier(&base, cipher.get());
    const std::string a = kTierMarker + " first", b = kTierMarker + " second";
    REQUIRE(tier.put_object("meta.x", a.data(), a.size()).is_ok());
    REQUIRE(tier.append_object("journal.1", a.data(), a.size()).is_ok());
    REQUIRE(tier.append_object("journal.1", b.data(), b.size()).is_ok());
    REQUIRE(tier.put_object("format", a.data(), a.size()).is_ok());
    std::vector<char> out;
    REQUIRE(tier.get_object("meta.x", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == a);
    REQUIRE(tier.get_object("journal.1", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == a + b);
    CHECK(std::string(base.named["format"].begin(), base.named["format"].end()) == a);  // FORMAT stays plain
    REQUIRE(tier.put_object(kKeySlotObject, b.data(), b.size()).is_ok());
    CHECK(std::string(base.named[kKeySlotObject].begin(), base.named[kKeySlotObject].end()) == b);  // so does the slot
    REQUIRE(tier.get_object(kKeySlotObject, &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == b);
    base.named.erase("format");
    base.named.erase(kKeySlotObject);
    CHECK_FALSE(pool_holds(base, kTierMarker));
    // Moved to another name: does not open, and ends in four zero bytes.
    base.named["meta.y"] = base.named["meta.x"];
    REQUIRE(tier.get_object("meta.y", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == std::string(4, '\0'));
    // A byte of the second frame flipped: the first still opens.
    base.named["journal.1"].back() ^= 1;
    REQUIRE(tier.get_object("journal.1", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == a + std::string(4, '\0'));
    // A torn tail likewise.
    base.named["journal.1"].resize(base.named["journal.1"].size() - 10);
    REQUIRE(tier.get_object("journal.1", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == a + std::string(4, '\0'));
    // Another key opens nothing.
    const auto other = tier_cipher_of(2);
    SealedTier wrong(&base, other.get());
    REQUIRE(wrong.get_object("meta.x", &out).is_ok());
    CHECK(std::string(out.begin(), out.end()) == std::string(4, '\0'));
    CHECK(tier.get_object("none", &out).err() == ENOENT);
}

TEST_CASE("an encrypted store over a tier: nothing written is in the pool, and an empty directory recovers it "
          "with the key only",
          "[engine][tier][encryption]") {
    TempDir first, second, third, fourth;
    MemoryTier tier;
    const auto key = tier_key_of(3);
    const std::vector<std::uint8_t> big = marked_bytes(9 << 20, 1), small = marked_bytes(7000, 2);
    {
        auto e = open_engine(sealed_options(first.store(), &tier, key));
        write_synced(*e, marked_name(1), big);
        write_synced(*e, marked_name(2), small);
        abandon_engine(*e);  // a crash: the journal holds everything
    }
    CHECK(tier.named_with_prefix("journal.") >= 1);
    CHECK_FALSE(pool_holds(tier, kTierMarker));
    {
        std::lock_guard lock(tier.mu);
        const std::vector<char>& f = tier.named["format"];
        CHECK(std::string(f.begin(), f.end()).find("encryption xaes-256-gcm") != std::string::npos);
    }
    // Without the key, or with another: refused before anything is read.
    std::unique_ptr<Engine> refused;
    Status st = Engine::open(sealed_options(second.store(), &tier, nullptr), &refused);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("is encrypted") != std::string::npos);
    st = Engine::open(sealed_options(second.store(), &tier, tier_key_of(4)), &refused);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("not this store's key") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(second.store() + "/meta"));
    // From the journal, then (after a clean close) from a snapshot.
    {
        auto e = open_engine(sealed_options(third.store(), &tier, key));
        CHECK(read_named(*e, marked_name(1)) == big);
        CHECK(read_named(*e, marked_name(2)) == small);
        write_synced(*e, marked_name(3), small);
        REQUIRE(e->close().is_ok());
    }
    CHECK(tier.named_with_prefix("meta.") >= 1);
    CHECK_FALSE(pool_holds(tier, kTierMarker));
    {
        auto e = open_engine(sealed_options(fourth.store(), &tier, key));
        CHECK(read_named(*e, marked_name(1)) == big);
        CHECK(read_named(*e, marked_name(3)) == small);
        REQUIRE(e->close().is_ok());
    }
    // fsck, through the pool's sealed metadata.
    std::unique_ptr<ChunkCipher> cipher;
    std::unique_ptr<SealedTier> sealed;
    REQUIRE(open_sealed_tier(&tier, key.get(), nullptr, &cipher, &sealed).is_ok());
    REQUIRE(sealed != nullptr);
    FsckOptions fo;
    fo.store = fourth.store();
    fo.tier = sealed.get();
    fo.key = key;
    fo.scrub = true;
    FsckReport report;
    REQUIRE(run_fsck(fo, &report).is_ok());
    for (const auto& p : report.problems) INFO(p.what);
    CHECK(report.problems.empty());
    CHECK(report.scrubbed_chunks > 0);
}

TEST_CASE("a passphrase store over a tier: its key slot is in the pool, any empty directory opens with the "
          "passphrase, and a change there retires the old one",
          "[engine][tier][encryption][key_slot]") {
    TempDir first, second, third, fourth, fifth;
    MemoryTier tier;
    const std::vector<std::uint8_t> data = marked_bytes(300000, 4);
    {
        auto e = open_engine(passphrase_options(first.store(), &tier, "first words"));
        write_synced(*e, marked_name(1), data);
        REQUIRE(e->close().is_ok());
    }
    // The slot is in the pool, plain as FORMAT (its key is wrapped), and
    // not in the cache directory.
    const std::string slot = pool_slot_text(tier);
    CHECK(slot.rfind("hiodsfs key slot\n", 0) == 0);
    CHECK_FALSE(std::filesystem::exists(first.store() + "/" + kKeySlotName));
    CHECK_FALSE(pool_holds(tier, kTierMarker));
    // Refused without a passphrase or with another, before anything is made.
    std::unique_ptr<Engine> refused;
    Status st = Engine::open(passphrase_options(second.store(), &tier, ""), &refused);
    CHECK(st.err() == EACCES);
    st = Engine::open(passphrase_options(second.store(), &tier, "other words"), &refused);
    INFO(st.message());
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("passphrase is not this store's") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(second.store() + "/meta"));
    CHECK(pool_slot_text(tier) == slot);
    {
        auto e = open_engine(passphrase_options(second.store(), &tier, "first words"));  // from the pool alone
        CHECK(read_named(*e, marked_name(1)) == data);
        REQUIRE(e->close().is_ok());
    }

    // A change with a wrong passphrase, or whose write fails, changes nothing.
    CHECK(change_pool_passphrase(&tier, "wrong words", "second words").err() == EACCES);
    tier.set_objects_failing(EIO);
    CHECK(change_pool_passphrase(&tier, "first words", "second words").err() == EIO);
    tier.set_objects_failing(0);
    CHECK(pool_slot_text(tier) == slot);
    REQUIRE(change_pool_passphrase(&tier, "first words", "second words").is_ok());
    CHECK(pool_slot_text(tier) != slot);
    st = Engine::open(passphrase_options(third.store(), &tier, "first words"), &refused);
    CHECK(st.err() == EACCES);
    {
        auto e = open_engine(passphrase_options(third.store(), &tier, "second words"));
        CHECK(read_named(*e, marked_name(1)) == data);
        REQUIRE(e->close().is_ok());
    }
    // fsck: the passphrase unlocks the pool's slot, and the check goes on
    // with the key.
    std::unique_ptr<ChunkCipher> cipher;
    std::unique_ptr<SealedTier> sealed;
    StoreKey unlocked;
    const Passphrase second_words("second words");
    REQUIRE(open_sealed_tier(&tier, nullptr, &second_words, &cipher, &sealed, nullptr, &unlocked).is_ok());
    REQUIRE(sealed != nullptr);
    FsckOptions fo;
    fo.store = fourth.store();
    fo.tier = sealed.get();
    fo.key = std::make_shared<const StoreKey>(unlocked);
    fo.scrub = true;
    {
        auto e = open_engine(passphrase_options(fourth.store(), &tier, "second words"));
        REQUIRE(e->close().is_ok());
    }
    FsckReport report;
    REQUIRE(run_fsck(fo, &report).is_ok());
    for (const auto& p : report.problems) INFO(p.what);
    CHECK(report.problems.empty());
    const Passphrase first_words("first words");
    CHECK(open_sealed_tier(&tier, nullptr, &first_words, &cipher, &sealed).err() == EACCES);
    CHECK(open_sealed_tier(&tier, nullptr, nullptr, &cipher, &sealed).err() == EACCES);
    // The passphrase of a store made with a key file: it has no slot,
    // until a change given the key file makes one; then either opens it.
    MemoryTier keyed;
    const std::vector<std::uint8_t> small = marked_bytes(9000, 5);
    {
        auto e = open_engine(sealed_options(fifth.store(), &keyed, tier_key_of(5)));
        write_synced(*e, marked_name(5), small);
        REQUIRE(e->close().is_ok());
    }
    CHECK(pool_slot_text(keyed).empty());
    CHECK(open_sealed_tier(&keyed, nullptr, &first_words, &cipher, &sealed).err() == EACCES);
    ChangeKeyOptions co;
    co.key = tier_key_of(6);  // not its key
    co.new_passphrase = std::make_shared<const Passphrase>("keyed words");
    co.cost = ScryptCost{1 << 10, 8, 1};
    CHECK(change_pool_store_key(&keyed, co).err() == EACCES);
    CHECK(pool_slot_text(keyed).empty());
    co.key = tier_key_of(5);
    REQUIRE(change_pool_store_key(&keyed, co).is_ok());
    TempDir sixth, seventh;
    {
        auto e = open_engine(passphrase_options(sixth.store(), &keyed, "keyed words"));
        CHECK(read_named(*e, marked_name(5)) == small);
        REQUIRE(e->close().is_ok());
    }
    {
        auto e = open_engine(sealed_options(seventh.store(), &keyed, tier_key_of(5)));
        CHECK(read_named(*e, marked_name(5)) == small);
        REQUIRE(e->close().is_ok());
    }
}

TEST_CASE("a passphrase store over a tier: a first open that stopped before the pool's FORMAT leaves a slot "
          "the next first open replaces, and a key file's removes",
          "[engine][tier][encryption][key_slot]") {
    TempDir first, second, other;
    MemoryTier tier;
    // An unfinished first open: the pool holds a slot and nothing else.
    {
        auto e = open_engine(passphrase_options(first.store(), &tier, "early words"));
        REQUIRE(e->close().is_ok());
    }
    {
        std::lock_guard lock(tier.mu);
        const auto slot = tier.named[kKeySlotObject];
        tier.named.clear();
        tier.objects.clear();
        tier.named[kKeySlotObject] = slot;
    }
    {
        auto e = open_engine(passphrase_options(second.store(), &tier, "late words"));
        write_synced(*e, "f", marked_bytes(5000, 6));
        REQUIRE(e->close().is_ok());
    }
    std::unique_ptr<ChunkCipher> cipher;
    std::unique_ptr<SealedTier> sealed;
    const Passphrase late("late words"), early("early words");
    CHECK(open_sealed_tier(&tier, nullptr, &late, &cipher, &sealed).is_ok());
    CHECK(open_sealed_tier(&tier, nullptr, &early, &cipher, &sealed).err() == EACCES);
    // A key file's first open over such a pool leaves no slot behind.
    MemoryTier leftover;
    {
        std::lock_guard lock(leftover.mu);
        leftover.named[kKeySlotObject] = tier.named[kKeySlotObject];
    }
    {
        auto e = open_engine(sealed_options(other.store(), &leftover, tier_key_of(6)));
        REQUIRE(e->close().is_ok());
    }
    CHECK(pool_slot_text(leftover).empty());
}

TEST_CASE("a plain store over a tier keeps its pool as before: no sealed tier", "[engine][tier][encryption]") {
    TempDir dir;
    MemoryTier tier;
    {
        auto e = open_engine(sealed_options(dir.store(), &tier, nullptr));
        write_synced(*e, "f", marked_bytes(10000, 3));
        REQUIRE(e->close().is_ok());
    }
    std::unique_ptr<ChunkCipher> cipher;
    std::unique_ptr<SealedTier> sealed;
    REQUIRE(open_sealed_tier(&tier, nullptr, nullptr, &cipher, &sealed).is_ok());
    CHECK(sealed == nullptr);
    CHECK(pool_holds(tier, kTierMarker));  // the search finds what is there
    std::unique_ptr<Engine> e;
    CHECK(Engine::open(sealed_options(dir.store(), &tier, tier_key_of(1)), &e).err() == EINVAL);
}

}  // namespace hiodsfs
