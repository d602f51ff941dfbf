// Helpers of the mount tests of RADOS stores (rados_test.cc,
// rados_fence_test.cc): store names of their own, the daemon's options and
// the pool's objects, waiting for a condition, and the daemon run by hand.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../rados/ceph_cluster.h"
#include "mount_fixture.h"

namespace hiodsfs::mt {

// A store name of its own for each test, so tests share the pool safely.
inline std::string fresh_store_name(const std::string& what) {
    static std::atomic<int> counter{0};
    return what + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

inline std::vector<std::string> rados_options(const test::CephCluster& c, const MountFixture& fx,
                                              const std::string& extra = "") {
    std::vector<std::string> o = {"ceph_conf=" + c.conf, "cache_dir=" + fx.store(),
                                  "rados_timeout=10"};
    if (!extra.empty()) o.push_back(extra);
    return o;
}

// Makes fx (not yet mounted) mount the store `name` of the cluster's pool,
// with fx's store directory as its cache_dir.
inline void use_rados(MountFixture& fx, const test::CephCluster& c, const std::string& name,
                      const std::string& extra = "") {
    fx.set_source("rados:" + c.pool + "/" + name);
    fx.set_options(rados_options(c, fx, extra));
}

// The rados tool against the cluster's pool.
// The rados tool gives up after 60 s (a call once hung for the whole
// test's timeout with a paused client about): a caller that polls asks again.
inline CmdResult rados_cmd(const test::CephCluster& c, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"rados", "-c", c.conf, "-p", c.pool};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {}, std::chrono::seconds(60));
}

// The pool's objects whose names start with prefix, by the rados tool.
inline std::vector<std::string> objects(const test::CephCluster& c, const std::string& prefix) {
    CmdResult r = rados_cmd(c, {"ls"});
    INFO(r.describe());
    REQUIRE(r.ok());
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0) out.push_back(line);
    std::sort(out.begin(), out.end());
    return out;
}

template <typename Pred>
bool wait_for(std::chrono::seconds limit, Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pred();
}

// The daemon run by hand, as a user would (it forks into the background
// unless -f): its exit status and one-line error.
inline CmdResult run_daemon(const std::vector<std::string>& args,
                            std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::vector<std::string> argv = {daemon_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {}, timeout);
}

inline std::string host_name_for_test() {
    char name[256] = {};
    REQUIRE(::gethostname(name, sizeof name - 1) == 0);
    return name;
}

// Deletes the cache directory and makes it again, empty: the machine's
// disk is gone, and another host mounts the store.
inline void replace_cache_dir(const MountFixture& fx) {
    remove_tree(fx.store());
    REQUIRE_FALSE(exists(fx.store()));
    make_dir(fx.store(), 0700);
}

// Writes data to path (created or truncated) and fsyncs it: 0, or the errno
// of the step that failed. Close-on-exec: a command the test runs from
// another thread meanwhile must not inherit the descriptor, or its exit
// waits for a daemon the test has paused (its close flushes the file).
inline int write_and_fsync(const std::string& path, const std::string& data) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int err = 0;
    if (::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        err = errno != 0 ? errno : EIO;
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    ::close(fd);
    return err;
}

// hiodsfs-fsck of a RADOS store through its cache directory.
inline CmdResult fsck_rados(const test::CephCluster& c, const std::string& name,
                            const std::string& cache_dir,
                            const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {HIODSFS_FSCK_BIN, "rados:" + c.pool + "/" + name,
                                     "--cache-dir",    cache_dir,
                                     "--ceph-conf",    c.conf};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv, {}, std::chrono::seconds(120));
}

}  // namespace hiodsfs::mt
