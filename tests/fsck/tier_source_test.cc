// rados_tier_of: which RADOS store a store directory's FORMAT names, so
// `hiodsfs-fsck DIR` checks a cache directory of one against its pool.
#include "fsck/tier_source.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/store_layout.h"
#include "hiodsfs/env.h"

using namespace hiodsfs;

namespace {

struct TierSourceDir {
    std::string path;
    TierSourceDir() {
        char tmpl[] = "/tmp/hiodsfs-tier-source-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TierSourceDir() { std::filesystem::remove_all(path); }
    void write_format(const std::string& tier) {
        StoreFormat f;
        f.version = 4;
        f.tier = tier;
        REQUIRE(write_store_format(Env::posix(), path, f));
    }
};

}  // namespace

TEST_CASE("tier source: FORMAT's rados tier line", "[tier-source]") {
    TierSourceDir d;
    d.write_format("rados:pool/store");
    CHECK(rados_tier_of(Env::posix(), d.path) == "rados:pool/store");
}

TEST_CASE("tier source: none for a local store, a missing or unreadable FORMAT", "[tier-source]") {
    TierSourceDir d;
    CHECK(rados_tier_of(Env::posix(), d.path).empty());  // no FORMAT: the check says so
    d.write_format("");
    CHECK(rados_tier_of(Env::posix(), d.path).empty());
    d.write_format("memory:test");  // a tier that is not RADOS
    CHECK(rados_tier_of(Env::posix(), d.path).empty());
    std::ofstream(d.path + "/FORMAT", std::ios::trunc) << "not a format record\n";
    CHECK(rados_tier_of(Env::posix(), d.path).empty());
}
