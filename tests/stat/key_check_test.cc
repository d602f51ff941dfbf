// hiodsfs-stat's key check (src/stat/key_check.h): a store's own key file or
// passphrase opens it, another does not, and nothing is changed either way;
// a plain store refuses a key; a RADOS store's passphrase is sent to
// hiodsfs-fsck, its key slot being in the pool; the report says so.
#include "stat/key_check.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../store/memory_tier.h"
#include "hiodsfs/engine.h"
#include "stat/report.h"
#include "stat_test_util.h"

using namespace hiodsfs;
using hiodsfs::test::MemoryTier;
using hiodsfs::test::ScratchDir;

namespace {

std::shared_ptr<const StoreKey> checked_key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 17 + i);
    return std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

void make_keyed_store(const std::string& dir, std::shared_ptr<const StoreKey> key,
                      std::shared_ptr<const Passphrase> passphrase, SegmentTier* tier = nullptr) {
    EngineOptions o;
    o.store_dir = dir;
    o.background_commit = false;
    o.background_threads = 0;
    o.key = std::move(key);
    o.passphrase = std::move(passphrase);
    o.segments.tier = tier;
    std::unique_ptr<Engine> e;
    REQUIRE(Engine::open(o, &e).is_ok());
    REQUIRE(e->close().is_ok());
}

std::uintmax_t tree_bytes(const std::string& dir) {
    std::uintmax_t n = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
        if (f.is_regular_file()) n += f.file_size() + f.last_write_time().time_since_epoch().count();
    return n;
}

}  // namespace

TEST_CASE("stat key check: the store's key or passphrase opens it; another does not, and nothing changes",
          "[stat][key_check]") {
    ScratchDir keyed, phrased, plain;
    const std::string keyed_store = keyed.path + "/s", phrased_store = phrased.path + "/s",
                      plain_store = plain.path + "/s";
    make_keyed_store(keyed_store, checked_key_of(1), nullptr);
    make_keyed_store(phrased_store, nullptr, std::make_shared<const Passphrase>("stat words"));
    make_keyed_store(plain_store, nullptr, nullptr);
    const std::uintmax_t before = tree_bytes(keyed_store);

    CHECK(stat::check_store_key(keyed_store, checked_key_of(1).get(), nullptr).is_ok());
    Status st = stat::check_store_key(keyed_store, checked_key_of(2).get(), nullptr);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("not this store's key") != std::string::npos);
    const Passphrase right("stat words"), wrong("stat wordz");
    CHECK(stat::check_store_key(phrased_store, nullptr, &right).is_ok());
    st = stat::check_store_key(phrased_store, nullptr, &wrong);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("passphrase is not this store's") != std::string::npos);
    // A key file's store has no slot: no passphrase opens it.
    CHECK(stat::check_store_key(keyed_store, nullptr, &right).err() == EACCES);
    st = stat::check_store_key(plain_store, checked_key_of(1).get(), nullptr);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("not encrypted") != std::string::npos);
    CHECK(stat::check_store_key(plain.path, checked_key_of(1).get(), nullptr).err() == ENOENT);
    CHECK(tree_bytes(keyed_store) == before);

    // The report of a checked store says so; one not checked does not.
    stat::Report r;
    REQUIRE(stat::load_report(keyed_store, &r).is_ok());
    CHECK(r.encryption == "xaes-256-gcm");
    CHECK(stat::format_text(r, {false}).find("encryption    xaes-256-gcm\n") != std::string::npos);
    r.key_checked = true;
    CHECK(stat::format_text(r, {false}).find("encryption    xaes-256-gcm (the key given opens it)\n") !=
          std::string::npos);
    CHECK(nlohmann::json::parse(stat::format_json(r, false)).value("key_checked", false));
}

TEST_CASE("stat key check: a RADOS store's passphrase is checked by hiodsfs-fsck, its key by either",
          "[stat][key_check]") {
    ScratchDir cache;
    const std::string store = cache.path + "/s";
    MemoryTier tier;
    make_keyed_store(store, nullptr, std::make_shared<const Passphrase>("pool words"), &tier);
    const Passphrase words("pool words");
    const Status st = stat::check_store_key(store, nullptr, &words);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("hiodsfs-fsck --key ask") != std::string::npos);
    ScratchDir keyed_cache;
    MemoryTier keyed_tier;
    make_keyed_store(keyed_cache.path + "/s", checked_key_of(3), nullptr, &keyed_tier);
    CHECK(stat::check_store_key(keyed_cache.path + "/s", checked_key_of(3).get(), nullptr).is_ok());
    CHECK(stat::check_store_key(keyed_cache.path + "/s", checked_key_of(4).get(), nullptr).err() == EACCES);
}
