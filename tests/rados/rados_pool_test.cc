// RadosPool against a real single-node cluster (tests/rados/ceph_cluster.h).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../store/store_test_util.h"
#include "ceph_cluster.h"
#include "rados_test_util.h"

#ifdef HIODSFS_HAVE_RADOS
#include "store/librados_api.h"
#include "store/rados_pool.h"

namespace {

using hiodsfs::RadosLock;
using hiodsfs::RadosLocker;
using hiodsfs::RadosOptions;
using hiodsfs::RadosPool;
using hiodsfs::Status;
using hiodsfs::test::CephCluster;
using hiodsfs::test::connect;
using hiodsfs::test::unique_name;
using namespace std::chrono_literals;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(rng());
    return v;
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

void round_trip(const CephCluster& c) {
    auto pool = connect(c);
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4 << 20} + 1}) {
        DYNAMIC_SECTION("size " << size) {
            const std::string name = unique_name("round-trip");
            auto data = random_bytes(size, static_cast<std::uint32_t>(size));
            REQUIRE_OK(pool->write_full(name, data.data(), data.size()));
            std::uint64_t stored = 12345;
            REQUIRE_OK(pool->stat(name, &stored));
            CHECK(stored == size);
            std::vector<std::uint8_t> back{7, 7, 7};
            REQUIRE_OK(pool->read(name, &back));
            CHECK(back == data);
            // write_full replaces: a shorter content leaves nothing of the old.
            const std::uint8_t two[] = {1, 2};
            REQUIRE_OK(pool->write_full(name, two, sizeof two));
            REQUIRE_OK(pool->read(name, &back));
            CHECK(back == std::vector<std::uint8_t>{1, 2});
            REQUIRE_OK(pool->remove(name));
        }
    }
}

void range_read(const CephCluster& c) {
    auto pool = connect(c);
    const std::string name = unique_name("range");
    auto data = random_bytes(1 << 20, 42);
    REQUIRE_OK(pool->write_full(name, data.data(), data.size()));
    std::vector<std::uint8_t> got;
    REQUIRE_OK(pool->read(name, 1000, 5000, &got));
    CHECK(got == std::vector<std::uint8_t>(data.begin() + 1000, data.begin() + 6000));
    // Past the end: what there is, then nothing.
    REQUIRE_OK(pool->read(name, data.size() - 10, 100, &got));
    CHECK(got == std::vector<std::uint8_t>(data.end() - 10, data.end()));
    REQUIRE_OK(pool->read(name, data.size() + 5, 100, &got));
    CHECK(got.empty());
    REQUIRE_OK(pool->remove(name));
}

void missing_objects(const CephCluster& c) {
    auto pool = connect(c);
    const std::string name = unique_name("gone");
    const char byte = 'x';
    REQUIRE_OK(pool->write_full(name, &byte, 1));
    REQUIRE_OK(pool->remove(name));
    std::uint64_t size = 0;
    Status st = pool->stat(name, &size);
    CHECK(st.err() == ENOENT);
    CHECK(contains(st.message(), "'" + name + "'"));
    CHECK(contains(st.message(), "pool '" + c.pool + "'"));
    std::vector<std::uint8_t> got;
    CHECK(pool->read(name, &got).err() == ENOENT);
    CHECK(pool->read(name, 0, 10, &got).err() == ENOENT);
    CHECK(pool->remove(name).err() == ENOENT);
}

void listing(const CephCluster& c) {
    auto pool = connect(c);
    const std::string prefix = unique_name("list") + "/";
    const std::vector<std::string> mine = {prefix + "a", prefix + "b", prefix + "c/d"};
    for (const auto& n : mine) REQUIRE_OK(pool->write_full(n, n.data(), n.size()));
    const std::string other = unique_name("list") + "/a";  // shares "list-" only
    REQUIRE_OK(pool->write_full(other, "x", 1));
    std::vector<std::string> names;
    REQUIRE_OK(pool->list(prefix, &names));
    CHECK(names == mine);
    REQUIRE_OK(pool->list(prefix + "c/", &names));
    CHECK(names == std::vector<std::string>{prefix + "c/d"});
    REQUIRE_OK(pool->list(unique_name("nothing"), &names));
    CHECK(names.empty());
    for (const auto& n : mine) REQUIRE_OK(pool->remove(n));
    REQUIRE_OK(pool->remove(other));
    REQUIRE_OK(pool->list(prefix, &names));
    CHECK(names.empty());
}

void locking(const CephCluster& c) {
    // Two connections: two RADOS clients, as two daemons would be.
    auto first = connect(c);
    auto second = connect(c);
    const std::string object = unique_name("lock");
    RadosLock mine{object, "writer", "host-a pid 1", "hiodsfs test"};
    RadosLock theirs{object, "writer", "host-b pid 2", "hiodsfs test"};

    SECTION("a second client is refused, with the holder named, until release") {
        REQUIRE_OK(first->lock_exclusive(mine, 60s));
        Status st = second->lock_exclusive(theirs, 60s);
        CHECK(st.err() == EBUSY);
        CHECK(contains(st.message(), "'host-a pid 1'"));
        CHECK(contains(st.message(), "'" + object + "'"));
        std::vector<std::string> holders;
        REQUIRE_OK(second->lock_holders(object, "writer", &holders));
        REQUIRE(holders.size() == 1);
        CHECK(contains(holders[0], "'host-a pid 1' (client."));
        // The same cookie from another client is not the holder either.
        CHECK(second->lock_exclusive(mine, 60s).err() == EBUSY);
        REQUIRE_OK(first->unlock(mine));
        REQUIRE_OK(second->lock_exclusive(theirs, 60s));
        CHECK(first->lock_exclusive(mine, 60s).err() == EBUSY);
        REQUIRE_OK(second->unlock(theirs));
        REQUIRE_OK(second->lock_holders(object, "writer", &holders));
        CHECK(holders.empty());
        CHECK(second->unlock(theirs).err() == ENOENT);
    }
    SECTION("a holder's lock broken by another client is the other's to take, and lost to the holder") {
        REQUIRE_OK(first->lock_exclusive(mine, 60s));
        std::vector<RadosLocker> holders;
        REQUIRE_OK(second->lockers(object, "writer", &holders));
        REQUIRE(holders.size() == 1);
        CHECK(holders[0].cookie == "host-a pid 1");
        CHECK(holders[0].client.rfind("client.", 0) == 0);
        REQUIRE_OK(second->break_lock(object, "writer", holders[0]));
        CHECK(second->break_lock(object, "writer", holders[0]).err() == ENOENT);
        REQUIRE_OK(second->lock_exclusive(theirs, 60s));
        CHECK(first->renew_lock(mine, 60s).err() == ENOENT);
        REQUIRE_OK(second->unlock(theirs));
    }
    SECTION("renewing keeps the lock past its first lease") {
        // A 5 s lease renewed every half second for 6 s, past the first
        // lease: a renewal would have to come 4.5 s late, even on a loaded
        // machine (the suite under ASan), for the lock to lapse between two.
        REQUIRE_OK(first->lock_exclusive(mine, 5s));
        for (int i = 0; i < 12; ++i) {
            std::this_thread::sleep_for(500ms);
            REQUIRE_OK(first->renew_lock(mine, 5s));
            CHECK(second->lock_exclusive(theirs, 5s).err() == EBUSY);
        }
        REQUIRE_OK(first->unlock(mine));
    }
    SECTION("after the lease lapses another takes it, and the old holder cannot renew") {
        REQUIRE_OK(first->lock_exclusive(mine, 2s));
        CHECK(second->lock_exclusive(theirs, 2s).err() == EBUSY);
        std::this_thread::sleep_for(2500ms);
        REQUIRE_OK(second->lock_exclusive(theirs, 60s));
        Status st = first->renew_lock(mine, 2s);
        CHECK_FALSE(st.is_ok());
        INFO(st.message());
        CHECK((st.err() == ENOENT || st.err() == EBUSY));
        REQUIRE_OK(second->unlock(theirs));
    }
    // The lock object is created by the first lock; it goes with the test.
    (void)first->remove(object);
}

void missing_pool(const CephCluster& c) {
    RadosOptions o;
    o.conf_path = c.conf;
    o.pool = "no-such-pool";
    o.timeout = 10s;
    std::unique_ptr<RadosPool> pool;
    Status st = RadosPool::connect(o, &pool);
    CHECK(st.err() == ENOENT);
    CHECK(contains(st.message(), "'no-such-pool'"));
    CHECK(pool == nullptr);
}

}  // namespace

#define RADOS_CASE(fn)              \
    REQUIRE_CEPH_CLUSTER(cluster); \
    fn(cluster)
#else
#define RADOS_CASE(fn) SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)")
#endif

TEST_CASE("rados: objects of 0, 1 and 4 MiB + 1 bytes round trip", "[rados]") { RADOS_CASE(round_trip); }
TEST_CASE("rados: a range read returns those bytes, short past the end", "[rados]") {
    RADOS_CASE(range_read);
}
TEST_CASE("rados: stat, read and remove of a removed object are ENOENT naming it", "[rados]") {
    RADOS_CASE(missing_objects);
}
TEST_CASE("rados: listing returns the objects under a prefix", "[rados]") { RADOS_CASE(listing); }
TEST_CASE("rados: the exclusive lock, its lease, renewal and release", "[rados]") {
    RADOS_CASE(locking);
}
TEST_CASE("rados: opening a pool that does not exist names it", "[rados]") { RADOS_CASE(missing_pool); }

// Needs librados but no cluster: a mon address where nothing listens.
TEST_CASE("rados: connecting to a cluster that is not there fails within the timeout", "[rados]") {
#ifndef HIODSFS_HAVE_RADOS
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)");
#else
    // A port that was free a moment ago: the kernel picked it.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    ::close(fd);
    hiodsfs::test::TempDir dir;
    const std::string conf = dir.path() + "/ceph.conf";
    std::ofstream(conf) << "[global]\nmon host = [v2:127.0.0.1:" << ntohs(addr.sin_port)
                        << "]\nauth client required = none\n";

    hiodsfs::RadosOptions o;
    o.conf_path = conf;
    o.pool = "anything";
    o.timeout = std::chrono::seconds(3);
    std::unique_ptr<hiodsfs::RadosPool> pool;
    auto t0 = std::chrono::steady_clock::now();
    hiodsfs::Status st = hiodsfs::RadosPool::connect(o, &pool);
    auto took = std::chrono::steady_clock::now() - t0;
    INFO(st.message());
    CHECK(st.err() == ETIMEDOUT);
    CHECK(st.message().find("connecting to the Ceph cluster of " + conf) != std::string::npos);
    CHECK(took < std::chrono::seconds(8));

    o.conf_path = dir.path() + "/missing.conf";
    st = hiodsfs::RadosPool::connect(o, &pool);
    CHECK(st.err() == ENOENT);
    CHECK(st.message().find(o.conf_path) != std::string::npos);
#endif
}

// The loader of librados (store/librados_api.h): needs no cluster.
TEST_CASE("rados: librados is loaded on first use, once, and the table is complete", "[rados][librados]") {
#ifndef HIODSFS_HAVE_RADOS
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)");
#else
    const hiodsfs::LibradosApi* api = nullptr;
    hiodsfs::Status st = hiodsfs::load_librados(&api);
    INFO(st.message());
    REQUIRE(st.is_ok());
    REQUIRE(api != nullptr);
    CHECK(api->create2 != nullptr);
    CHECK(api->list_lockers != nullptr);
    const hiodsfs::LibradosApi* again = nullptr;
    REQUIRE(hiodsfs::load_librados(&again).is_ok());
    CHECK(again == api);
#endif
}

TEST_CASE("rados: a librados that cannot be loaded is one line naming the library and the package",
          "[rados][librados]") {
#ifndef HIODSFS_HAVE_RADOS
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)");
#else
    hiodsfs::LibradosApi api{};
    hiodsfs::Status st = hiodsfs::load_librados_from("libhiodsfs-no-such-library.so.9", &api);
    INFO(st.message());
    CHECK(st.err() == ENOPKG);
    CHECK(st.message().find("rados: cannot load libhiodsfs-no-such-library.so.9 (") == 0);
    CHECK(st.message().find("needs the librados2 package") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
    CHECK(api.create2 == nullptr);

    // A library that loads but is not librados: the first symbol it lacks.
    st = hiodsfs::load_librados_from("libm.so.6", &api);
    INFO(st.message());
    CHECK(st.err() == ENOPKG);
    CHECK(st.message().find("rados: cannot load libm.so.6 (it has no rados_create2)") == 0);
    CHECK(api.create2 == nullptr);
#endif
}
