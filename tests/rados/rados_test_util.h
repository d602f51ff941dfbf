// What the RADOS tests share: a RadosPool on the run's cluster
// (ceph_cluster.h), and object names no other test case uses.
// Thread-safety: unique_name() only from the test's own thread.
#pragma once

#ifdef HIODSFS_HAVE_RADOS

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "../store/store_test_util.h"
#include "ceph_cluster.h"
#include "store/rados_pool.h"

namespace hiodsfs::test {

inline RadosOptions options_of(const CephCluster& c,
                               std::chrono::seconds timeout = std::chrono::seconds(10)) {
    RadosOptions o;
    o.conf_path = c.conf;
    o.keyring = c.keyring;
    o.pool = c.pool;
    o.timeout = timeout;
    return o;
}

inline std::unique_ptr<RadosPool> connect(const CephCluster& c,
                                          std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_ptr<RadosPool> pool;
    REQUIRE_OK(RadosPool::connect(options_of(c, timeout), &pool));
    return pool;
}

// Objects of different test cases never share a name: the pool is the run's.
inline std::string unique_name(const std::string& what) {
    static int n = 0;
    return what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

}  // namespace hiodsfs::test

#endif  // HIODSFS_HAVE_RADOS
