// The throwaway Ceph cluster of one test_rados run: started by
// scripts/ceph-dev on first use, shared by every test case after, and
// stopped when the process exits. If it is killed instead, ceph-dev's
// --while-pid watchdog stops it.
#pragma once

#include <string>

#include "../skip.h"

namespace hiodsfs::test {

struct CephCluster {
    std::string conf;         // its ceph.conf (the keyring is beside it)
    std::string keyring;
    std::string pool;
    std::string skip_reason;  // set when it cannot run here: the cases skip
    std::string error;        // set when it should have started and did not
};

const CephCluster& ceph_cluster();

// A cluster of one test case's own, stopped when destroyed: one it may take
// down and bring up again (on bluestore, which keeps its objects across that).
class OwnCephCluster {
public:
    explicit OwnCephCluster(const std::string& objectstore);
    ~OwnCephCluster();
    OwnCephCluster(const OwnCephCluster&) = delete;
    OwnCephCluster& operator=(const OwnCephCluster&) = delete;
    const CephCluster& cluster() const { return c_; }
    // scripts/ceph-dev down / up; "" or what went wrong.
    std::string down();
    std::string up();

private:
    CephCluster c_;
    std::string dir_;
};

}  // namespace hiodsfs::test

// Skips the test case where Ceph is not installed; fails it where the
// cluster did not start. Call first in the TEST_CASE body.
#define REQUIRE_CEPH_CLUSTER(var)                                       \
    const ::hiodsfs::test::CephCluster& var = ::hiodsfs::test::ceph_cluster(); \
    if (!var.skip_reason.empty()) SKIP_TEST(var.skip_reason);           \
    INFO(var.error);                                                     \
    REQUIRE(var.error.empty())
