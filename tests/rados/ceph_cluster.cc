#include "ceph_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <cstdio>
#include <cstdlib>

namespace hiodsfs::test {
namespace {

constexpr const char* kPool = "hiodsfs-test";

std::string cluster_dir;  // non-empty while a cluster may be running

std::string shell_quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

// Runs a shell command; its exit status, and what it printed (both streams).
int run(const std::string& command, std::string* output) {
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (p == nullptr) return -1;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
    int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void stop() {
    if (cluster_dir.empty()) return;
    std::string output;
    if (run(shell_quoted(HIODSFS_CEPH_DEV) + " stop " + shell_quoted(cluster_dir), &output) != 0) {
        std::fprintf(stderr, "scripts/ceph-dev stop %s failed: %s\n", cluster_dir.c_str(), output.c_str());
    }
    cluster_dir.clear();
}

// Starts a cluster in a new temporary directory (*dir, "" if none was made).
CephCluster start_in_new_dir(const std::string& env, std::string* dir) {
    CephCluster c;
    dir->clear();
#ifndef HIODSFS_HAVE_RADOS
    c.skip_reason = "built without librados (librados-dev; scripts/install-deps installs it)";
    return c;
#endif
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/hiodsfs-ceph-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
        c.error = "mkdtemp " + tmpl + " failed";
        return c;
    }
    *dir = tmpl;
    std::string output;
    int rc = run("HIODSFS_CEPH_POOL=" + std::string(kPool) + " " + env + " " + shell_quoted(HIODSFS_CEPH_DEV) +
                     " start " + shell_quoted(*dir) + " --while-pid " + std::to_string(::getpid()),
                 &output);
    while (!output.empty() && output.back() == '\n') output.pop_back();
    if (rc == 3) {  // ceph-dev: the Ceph packages are not installed
        c.skip_reason = output;
    } else if (rc != 0) {
        c.error = "scripts/ceph-dev start failed (exit " + std::to_string(rc) + "):\n" + output;
    } else {
        c.conf = output.substr(output.rfind('\n') + 1);
        c.keyring = *dir + "/keyring";
        c.pool = kPool;
    }
    return c;
}

CephCluster start() {
    std::string dir;
    // Stopped at exit, whichever way the cases went (a failed REQUIRE ends
    // only its test case); a process killed instead is ceph-dev's watchdog's.
    std::atexit(stop);
    CephCluster c = start_in_new_dir("", &dir);
    cluster_dir = dir;
    return c;
}

std::string ceph_dev(const std::string& action, const std::string& dir) {
    std::string output;
    if (run(shell_quoted(HIODSFS_CEPH_DEV) + " " + action + " " + shell_quoted(dir), &output) == 0) return "";
    return "scripts/ceph-dev " + action + " " + dir + " failed: " + output;
}

}  // namespace

const CephCluster& ceph_cluster() {
    static const CephCluster cluster = start();
    return cluster;
}

OwnCephCluster::OwnCephCluster(const std::string& objectstore) {
    c_ = start_in_new_dir("HIODSFS_CEPH_OBJECTSTORE=" + shell_quoted(objectstore), &dir_);
}

OwnCephCluster::~OwnCephCluster() {
    if (dir_.empty()) return;
    const std::string failed = ceph_dev("stop", dir_);
    if (!failed.empty()) std::fprintf(stderr, "%s\n", failed.c_str());
}

std::string OwnCephCluster::down() { return ceph_dev("down", dir_); }
std::string OwnCephCluster::up() { return ceph_dev("up", dir_); }

}  // namespace hiodsfs::test
