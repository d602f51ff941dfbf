// common/mountinfo.h: the mounts /proc/self/mountinfo lists, with its octal
// escapes undone, so a mount point or source with a space or a backslash is
// found by its real name. The mount is made in a mount namespace of a
// child of its own, so nothing outside the test sees it.
#include "common/mountinfo.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "../skip.h"

using namespace hiodsfs;

TEST_CASE("the root mount is listed", "[common][mountinfo]") {
    const auto mounts = read_mountinfo();
    REQUIRE_FALSE(mounts.empty());
    CHECK(std::any_of(mounts.begin(), mounts.end(), [](const MountInfo& m) { return m.mountpoint == "/"; }));
    CHECK_FALSE(fuse_source_mounted("/no/such/hiodsfs/store"));
    CHECK_FALSE(hiodsfs_store_mounted("/"));
    CHECK_FALSE(hiodsfs_store_mounted("/no/such/dir"));
}

TEST_CASE("a mount point and source with a space and a backslash are unescaped", "[common][mountinfo]") {
    if (::geteuid() != 0) SKIP_TEST("needs root (a mount namespace and a tmpfs mount)");
    char tmpl[] = "/tmp/hiodsfs-mountinfo-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string base = tmpl, point = base + "/a b\\c";
    REQUIRE(::mkdir(point.c_str(), 0700) == 0);
    const std::string source = "hiodsfs test\tsource";

    // The child's exit code says what it found: 0 all, 10 + step otherwise
    // (1 no namespace: skipped, as on a machine that refuses unshare).
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::unshare(CLONE_NEWNS) != 0) ::_exit(1);
        if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(11);
        if (::mount(source.c_str(), point.c_str(), "tmpfs", 0, "size=1m") != 0) ::_exit(12);
        const auto mounts = read_mountinfo();
        const auto it = std::find_if(mounts.begin(), mounts.end(),
                                     [&](const MountInfo& m) { return m.mountpoint == point; });
        if (it == mounts.end()) ::_exit(13);
        if (it->fstype != "tmpfs") ::_exit(14);
        if (it->source != source) ::_exit(15);
        if (fuse_source_mounted(source)) ::_exit(16);  // tmpfs is not a FUSE mount
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::rmdir(point.c_str());
    ::rmdir(base.c_str());
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 1) SKIP_TEST("unshare(CLONE_NEWNS) refused here");
    CHECK(WEXITSTATUS(status) == 0);
}
