// An encrypted store's key slot (engine/key_slot.h) through the engine: a
// store made with a passphrase opens with it and with nothing else, and a
// refusal changes nothing; a new passphrase keeps every file readable and
// retires the old one; a store made with a key file gets a slot on
// request; a slot damaged, planted from another store or left by an
// unfinished first open is told apart.
#include <fstream>

#include "compression_test_util.h"
#include "engine/key_slot.h"
#include "engine/store_layout.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

std::shared_ptr<const Passphrase> passphrase_of(const std::string& text) { return std::make_shared<const Passphrase>(text); }

std::shared_ptr<const StoreKey> slot_key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 29 + i);
    return std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

std::string slot_file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_slot_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE(out.good());
}

StoreFormat format_of(const std::string& store) {
    StoreFormat f;
    bool exists = false;
    require_ok(read_store_format(Env::posix(), store, &f, &exists));
    REQUIRE(exists);
    return f;
}

Status open_with(EngineOptions o, std::shared_ptr<const Passphrase> p) {
    o.key = nullptr;
    o.passphrase = std::move(p);
    std::unique_ptr<Engine> e;
    return Engine::open(o, &e);
}

}  // namespace

TEST_CASE("key slot: its text round trips, and what is not a slot is refused", "[engine][key_slot]") {
    KeySlot slot;
    slot.store_id = std::string(32, 'a');
    slot.cost = ScryptCost{1 << 12, 8, 2};
    slot.salt.assign(16, 0x5a);
    slot.wrapped.assign(kWrappedKeyBytes, 0xc3);
    KeySlot back;
    require_ok(parse_key_slot(key_slot_text(slot), "KEYSLOT", &back));
    CHECK(back.store_id == slot.store_id);
    CHECK(back.cost.n == slot.cost.n);
    CHECK(back.cost.r == 8);
    CHECK(back.cost.p == 2);
    CHECK(back.salt == slot.salt);
    CHECK(back.wrapped == slot.wrapped);
    const std::string text = key_slot_text(slot);
    auto refused = [](const std::string& t) {
        KeySlot s;
        return parse_key_slot(t, "KEYSLOT", &s).err() == EUCLEAN;
    };
    CHECK(refused(""));
    CHECK(refused("hiodsfs store\nformat 6\n"));
    std::string no_wrap = text.substr(0, text.find("wrapped"));
    CHECK(refused(no_wrap));
    std::string short_salt = text;
    short_salt.replace(short_salt.find("salt=") + 5, 2, "");
    CHECK(refused(short_salt));
    std::string huge = text;
    huge.replace(huge.find("n=4096"), 6, "n=1073741824");
    CHECK(refused(huge));  // a planted slot does not make an unlock take the machine's memory
    std::string junk = text;
    junk.replace(junk.find("r=8"), 3, "r=8x");
    CHECK(refused(junk));
}

TEST_CASE("a store made with a passphrase opens with it, and a wrong one, a key file or both change nothing",
          "[engine][key_slot]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.passphrase = passphrase_of("correct horse battery staple");
    const std::vector<std::uint8_t> text = text_bytes(200 * 1024, 4);
    {
        auto e = open_engine(o);
        write_synced(*e, "text", text);
    }
    const StoreFormat f = format_of(dir.store());
    REQUIRE(f.encryption.on());
    KeySlot slot;
    bool exists = false;
    require_ok(read_key_slot({Env::posix(), dir.store()}, &slot, &exists));
    REQUIRE(exists);
    CHECK(slot.store_id == f.encryption.id);
    CHECK((std::filesystem::status(dir.store() + "/KEYSLOT").permissions() & std::filesystem::perms::others_all) ==
          std::filesystem::perms::none);
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "text") == text);
    }
    const std::set<std::string> before = files_state(dir.store());
    Status st = open_with(o, passphrase_of("correct horse battery stable"));
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("passphrase is not this store's") != std::string::npos);
    EngineOptions keyed = o;
    keyed.passphrase = nullptr;
    keyed.key = slot_key_of(3);
    std::unique_ptr<Engine> e;
    st = Engine::open(keyed, &e);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("not this store's key") != std::string::npos);
    keyed.passphrase = o.passphrase;
    CHECK(Engine::open(keyed, &e).err() == EINVAL);
    CHECK(files_state(dir.store()) == before);
    // fsck with the passphrase, and not with a wrong one.
    FsckOptions fo;
    fo.store = dir.store();
    fo.scrub = true;
    fo.passphrase = passphrase_of("wrong");
    FsckReport report;
    CHECK(run_fsck(fo, &report).err() == EACCES);
    fo.passphrase = o.passphrase;
    require_ok(run_fsck(fo, &report));
    CHECK(report.problems.empty());
    CHECK(report.scrubbed_chunks > 0);
}

TEST_CASE("a new passphrase keeps every file readable and retires the old one; a key file's store gains a slot",
          "[engine][key_slot]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.key = slot_key_of(7);
    const std::vector<std::uint8_t> text = text_bytes(300 * 1024, 9);
    {
        auto e = open_engine(o);
        write_synced(*e, "text", text);
    }
    // No slot yet: a passphrase cannot open it, and says why.
    Status st = open_with(o, passphrase_of("anything"));
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("has no key slot") != std::string::npos);
    const StoreFormat f = format_of(dir.store());
    CHECK(change_store_passphrase({Env::posix(), dir.store()}, f.encryption, *slot_key_of(8), Passphrase("first")).err() ==
          EACCES);
    CHECK_FALSE(std::filesystem::exists(dir.store() + "/KEYSLOT"));
    require_ok(change_store_passphrase({Env::posix(), dir.store()}, f.encryption, *o.key, Passphrase("first")));
    {
        EngineOptions p = o;
        p.key = nullptr;
        p.passphrase = passphrase_of("first");
        auto e = open_engine(p);
        CHECK(read_named(*e, "text") == text);
        write_synced(*e, "more", text_bytes(50 * 1024, 10));
    }
    // The passphrase changes; the key file still opens the store.
    StoreKey unlocked;
    require_ok(unlock_store_key({Env::posix(), dir.store()}, f.encryption, Passphrase("first"), &unlocked));
    require_ok(change_store_passphrase({Env::posix(), dir.store()}, f.encryption, unlocked, Passphrase("second")));
    CHECK(open_with(o, passphrase_of("first")).err() == EACCES);
    {
        EngineOptions p = o;
        p.key = nullptr;
        p.passphrase = passphrase_of("second");
        auto e = open_engine(p);
        CHECK(read_named(*e, "text") == text);
        CHECK(read_named(*e, "more") == text_bytes(50 * 1024, 10));
    }
    auto e = open_engine(o);
    CHECK(read_named(*e, "text") == text);
}

TEST_CASE("a key slot damaged, or planted from another store, is refused with one line", "[engine][key_slot]") {
    TempDir a, b;
    EngineOptions oa = options_for(a.store(), kCdc), ob = options_for(b.store(), kCdc);
    oa.passphrase = ob.passphrase = passphrase_of("same words");
    open_engine(oa).reset();
    open_engine(ob).reset();
    const std::string slot_a = slot_file_text(a.store() + "/KEYSLOT");
    put_slot_file(a.store() + "/KEYSLOT", slot_file_text(b.store() + "/KEYSLOT"));
    Status st = open_with(oa, oa.passphrase);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("belongs to another store") != std::string::npos);
    // The wrapped key with a byte changed: no passphrase opens it.
    std::string damaged = slot_a;
    const std::size_t at = damaged.find("wrapped ") + 20;
    damaged[at] = damaged[at] == '0' ? '1' : '0';
    put_slot_file(a.store() + "/KEYSLOT", damaged);
    st = open_with(oa, oa.passphrase);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("key slot is damaged") != std::string::npos);
    put_slot_file(a.store() + "/KEYSLOT", "not a slot\n");
    CHECK(open_with(oa, oa.passphrase).err() == EUCLEAN);
    put_slot_file(a.store() + "/KEYSLOT", slot_a);
    require_ok(open_with(oa, oa.passphrase));
}

TEST_CASE("a key slot that an unfinished first open left is made again, by a passphrase or a key file",
          "[engine][key_slot]") {
    const bool by_key_file = GENERATE(false, true);
    TempDir dir;
    std::filesystem::create_directory(dir.store());
    KeySlot stale;
    StoreEncryption e;
    e.id = std::string(32, 'b');
    require_ok(make_key_slot(*slot_key_of(1), Passphrase("old"), e, ScryptCost{1 << 10, 8, 1}, &stale));
    require_ok(write_key_slot({Env::posix(), dir.store()}, stale));
    EngineOptions o = options_for(dir.store(), kCdc);
    if (by_key_file) o.key = slot_key_of(2);
    else o.passphrase = passphrase_of("new");
    {
        auto eng = open_engine(o);
        write_synced(*eng, "f", text_bytes(10000, 1));
    }
    CHECK(std::filesystem::exists(dir.store() + "/KEYSLOT") == !by_key_file);
    auto eng = open_engine(o);
    CHECK(read_named(*eng, "f") == text_bytes(10000, 1));
}
