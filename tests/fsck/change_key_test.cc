// hiodsfs-fsck --change-key (fsck/change_key.h): a new passphrase through
// the library and the binary, from standard input and from a terminal; a crash or a failed write or sync at any
// point of a change leaves the old passphrase or the new one opening the
// store, never neither, and the new one once the change said it was done.
#include "fsck/change_key.h"

#include <catch2/catch.hpp>

#include "../engine/engine_test_util.h"
#include "engine/key_slot.h"
#include "engine/store_layout.h"
#include "fsck_test_util.h"
#include "../skip.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

const ScryptCost kCheap{1 << 10, 8, 1};

std::shared_ptr<const StoreKey> change_key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 17 + i);
    return std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

std::shared_ptr<const Passphrase> passphrase_of(const std::string& text) { return std::make_shared<const Passphrase>(text); }

StoreEncryption encryption_of(const std::string& store) {
    StoreFormat f;
    bool exists = false;
    REQUIRE(read_store_format(Env::posix(), store, &f, &exists).is_ok());
    REQUIRE(exists);
    return f.encryption;
}

bool opens_with(const std::string& store, const std::string& passphrase) {
    StoreKey k;
    return unlock_store_key({Env::posix(), store}, encryption_of(store), Passphrase(passphrase), &k).is_ok();
}

std::string slot_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// An encrypted store made with change_key_of(1), holding one file.
void make_store(const std::string& store, const std::vector<std::uint8_t>& data) {
    EngineOptions o = options_for(store, kCdc);
    o.key = change_key_of(1);
    auto e = open_engine(o);
    write_synced(*e, "file", data);
}

// A file with the given text, mode 0600 (the key file's rules).
std::string write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
    REQUIRE(::chmod(path.c_str(), 0600) == 0);
    return path;
}

}  // namespace

TEST_CASE("change key: a crash, or a failed write or sync, at any point leaves the old passphrase or the new one",
          "[fsck][change_key]") {
    TempDir dir;
    const std::vector<std::uint8_t> data = random_bytes(*std::make_unique<std::mt19937_64>(5), 70000);
    make_store(dir.store(), data);
    ChangeKeyOptions first;
    first.store = dir.store();
    first.key = change_key_of(1);
    first.new_passphrase = passphrase_of("old words");
    first.cost = kCheap;
    REQUIRE(change_store_key(first).is_ok());
    const std::string old_slot = slot_bytes(dir.store() + "/KEYSLOT");

    // How many writes and syncs a change makes, counted once.
    std::uint64_t writes = 0, syncs = 0;
    {
        FaultInjectionEnv env(Env::posix());
        ChangeKeyOptions o = first;
        o.key = nullptr;
        o.passphrase = passphrase_of("old words");
        o.new_passphrase = passphrase_of("new words");
        o.env = &env;
        REQUIRE(change_store_key(o).is_ok());
        writes = env.write_count();
        syncs = env.sync_count();
        std::ofstream(dir.store() + "/KEYSLOT", std::ios::binary | std::ios::trunc) << old_slot;
    }
    REQUIRE(writes >= 1);
    REQUIRE(syncs >= 2);
    // Each case: no fault, a failed write, or a failed sync at each point;
    // then a power loss that keeps a random part of what was not synced.
    for (std::uint64_t fault = 0; fault < 2 + syncs; ++fault) {
        for (std::uint64_t seed = 1; seed <= 4; ++seed) {
            INFO("fault " << fault << ", seed " << seed);
            std::ofstream(dir.store() + "/KEYSLOT", std::ios::binary | std::ios::trunc) << old_slot;
            std::filesystem::remove(dir.store() + "/KEYSLOT.tmp");
            bool changed = false;
            {
                FaultInjectionEnv env(Env::posix());
                env.set_forward_syncs(false);
                if (fault == 1) env.fail_write_at(0, WriteFault::kNoSpace, true);
                if (fault >= 2) env.fail_sync_at(fault - 2, EIO, true);
                ChangeKeyOptions o = first;
                o.key = nullptr;
                o.passphrase = passphrase_of("old words");
                o.new_passphrase = passphrase_of("new words");
                o.env = &env;
                changed = change_store_key(o).is_ok();
                CHECK(changed == (fault == 0));
                REQUIRE(env.drop_unsynced(seed).is_ok());
            }
            const bool old_opens = opens_with(dir.store(), "old words");
            const bool new_opens = opens_with(dir.store(), "new words");
            CHECK(old_opens != new_opens);
            if (changed) CHECK(new_opens);
        }
    }
    // Whatever the slot, the store's key and chunks are as they were.
    EngineOptions o = options_for(dir.store(), kCdc);
    o.key = change_key_of(1);
    auto e = open_engine(o);
    CHECK(read_named(*e, "file") == data);
}

TEST_CASE("change key: refused for a plain store, a wrong key or passphrase, and without a key", "[fsck][change_key]") {
    TempDir dir;
    make_store(dir.store(), std::vector<std::uint8_t>(5000, 7));
    ChangeKeyOptions o;
    o.store = dir.store();
    o.new_passphrase = passphrase_of("n");
    o.cost = kCheap;
    CHECK(change_store_key(o).err() == EACCES);
    o.key = change_key_of(2);
    CHECK(change_store_key(o).err() == EACCES);
    o.key = nullptr;
    o.passphrase = passphrase_of("never set");
    CHECK(change_store_key(o).err() == EACCES);  // no slot yet
    CHECK_FALSE(std::filesystem::exists(dir.store() + "/KEYSLOT"));
    TempDir plain;
    {
        auto e = open_engine(options_for(plain.store(), kCdc));
    }
    o.store = plain.store();
    o.key = change_key_of(1);
    o.passphrase = nullptr;
    CHECK(change_store_key(o).err() == EINVAL);
}

TEST_CASE("hiodsfs-fsck --change-key and --key ask: the passphrase on standard input", "[fsck][change_key]") {
    TempDir dir;
    const std::vector<std::uint8_t> data(40000, 3);
    make_store(dir.store(), data);
    const std::string key = write_file(dir.path() + "/key", std::string(reinterpret_cast<const char*>(change_key_of(1)->data()), 32));
    const std::string answers = dir.path() + "/answers";
    // With the key file: one line, the new passphrase.
    write_file(answers, "first words\n");
    Run r = fsck({"--change-key", dir.store(), "--key-file", key}, "", "<'" + answers + "'");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "its passphrase is changed"));
    CHECK(opens_with(dir.store(), "first words"));
    // With the passphrase: the old one, then the new.
    write_file(answers, "first words\nsecond words\n");
    r = fsck({"--change-key", dir.store(), "--key", "ask"}, "", "<'" + answers + "'");
    CHECK(r.code == 0);
    CHECK(opens_with(dir.store(), "second words"));
    CHECK_FALSE(opens_with(dir.store(), "first words"));
    // A wrong passphrase: one line, exit 8, the slot untouched.
    const std::string slot = slot_bytes(dir.store() + "/KEYSLOT");
    write_file(answers, "first words\nthird words\n");
    r = fsck({"--change-key", dir.store(), "--key", "ask"}, "", "<'" + answers + "'");
    CHECK(r.code == 8);
    CHECK(has(r, "the passphrase is not this store's"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(slot_bytes(dir.store() + "/KEYSLOT") == slot);
    // No new passphrase on the input: nothing changes.
    write_file(answers, "second words\n");
    r = fsck({"--change-key", dir.store(), "--key", "ask"}, "", "<'" + answers + "'");
    CHECK(r.code == 8);
    CHECK(has(r, "end of input"));
    CHECK(slot_bytes(dir.store() + "/KEYSLOT") == slot);
    // A check with the passphrase.
    write_file(answers, "second words\n");
    r = fsck({dir.store(), "--scrub", "--key", "ask"}, "", "<'" + answers + "'");
    CHECK(r.code == 0);
    CHECK(has(r, "scrubbed"));
    r = fsck({dir.store(), "--key", "bad"});
    CHECK(r.code == 8);
    CHECK(has(r, "the only form is --key ask"));
}

TEST_CASE("hiodsfs-fsck --change-key on a terminal: the new passphrase asked twice, and a mistyped second "
          "refused",
          "[fsck][change_key]") {
    // script(1) runs the program on a pseudo-terminal fed from its input.
    if (::access("/usr/bin/script", X_OK) != 0) SKIP_TEST("no script(1) to give the program a terminal");
    TempDir dir;
    make_store(dir.store(), std::vector<std::uint8_t>(9000, 5));
    const std::string key = write_file(dir.path() + "/key", std::string(reinterpret_cast<const char*>(change_key_of(1)->data()), 32));
    auto on_terminal = [&](const std::string& typed) {
        const std::string answers = write_file(dir.path() + "/typed", typed);
        const std::string cmd = "script -qec \"" + std::string(HIODSFS_FSCK_BIN) + " --change-key '" + dir.store() +
                                "' --key-file '" + key + "'; echo exit=\\$?\" /dev/null < '" + answers + "' 2>&1";
        Run r;
        FILE* p = ::popen(cmd.c_str(), "r");
        REQUIRE(p != nullptr);
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
        ::pclose(p);
        return r;
    };
    Run r = on_terminal("typed twice\ntyped twice\n");
    INFO(r.out);
    CHECK(has(r, "New passphrase for store " + dir.store() + ": "));
    CHECK(has(r, "(again): "));
    CHECK(has(r, "exit=0"));
    CHECK(opens_with(dir.store(), "typed twice"));
    r = on_terminal("first try\nsecond try\n");
    CHECK(has(r, "the two passphrases differ"));
    CHECK(has(r, "exit=8"));
    CHECK(opens_with(dir.store(), "typed twice"));
}
