// rados:POOL/STORE, the name of a store whose segments live in RADOS, as the
// daemon, hiodsfs-fsck and FORMAT's tier line give it.
#include "store/rados_source.h"

#include <catch2/catch.hpp>
#include <string>

using namespace hiodsfs;

TEST_CASE("rados source: pool and store name", "[rados-source]") {
    std::string pool, store, error;
    REQUIRE(parse_rados_source("rados:data/backup-1.2_x", &pool, &store, &error));
    CHECK(pool == "data");
    CHECK(store == "backup-1.2_x");
    REQUIRE(parse_rados_source("rados:p/" + std::string(64, 's'), &pool, &store, &error));
    CHECK(store.size() == 64);
}

TEST_CASE("rados source: a bad one gets one line", "[rados-source]") {
    const struct {
        const char* source;
        const char* says;
    } cases[] = {
        {"data/store", "is not rados:POOL/STORE"},
        {"rados:", "is not rados:POOL/STORE"},
        {"rados:/store", "is not rados:POOL/STORE"},
        {"rados:pool", "is not rados:POOL/STORE"},
        {"rados:pool/", "expected 1 to 64 letters"},
        {"rados:pool/.hidden", "not starting with '.'"},
        {"rados:pool/a/b", "store name 'a/b'"},
        {"rados:pool/a b", "store name 'a b'"},
    };
    for (const auto& c : cases) {
        INFO(c.source);
        std::string pool = "unchanged", store = "unchanged", error;
        CHECK_FALSE(parse_rados_source(c.source, &pool, &store, &error));
        CHECK(error.find(c.says) != std::string::npos);
        CHECK(error.find('\n') == std::string::npos);
        CHECK(pool == "unchanged");
        CHECK(store == "unchanged");
    }
    std::string pool, store, error;
    CHECK_FALSE(parse_rados_source("rados:p/" + std::string(65, 's'), &pool, &store, &error));
}

TEST_CASE("rados source: the connection defaults the daemon and hiodsfs-fsck share",
          "[rados-source]") {
    CHECK(std::string(kDefaultCephConf) == "/etc/ceph/ceph.conf");
    CHECK(std::string(kDefaultCephId) == "admin");
    // A daemon writes nothing in the last rados_timeout of its lease.
    CHECK(kDefaultRadosLeaseSeconds > 2 * kDefaultRadosTimeoutSeconds);
}
