// Writes without a GETXATTR round trip each (FUSE_HANDLE_KILLPRIV_V2, which
// src/fuse/kernel_channel.h asks for), and the duties that come with it:
// the file system itself drops S_ISUID/S_ISGID on write, truncate and chown
// the way the VFS would (each case is checked on the backing file system
// first), and the kernel still drops file capabilities.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

mode_t mode_of(const std::string& p) { return stat_of(p).st_mode & 07777; }

// Writes one byte at offset 0 as uid/gid (0: as root, in this process).
int write_as(uid_t uid, const std::string& path) {
    auto w = [&] {
        const int fd = ::open(path.c_str(), O_WRONLY);
        if (fd < 0) return errno;
        const int err = ::pwrite(fd, "x", 1, 0) == 1 ? 0 : errno;
        ::close(fd);
        return err;
    };
    return uid == 0 ? w() : run_as(uid, kGroup, w);
}

// fallocate(mode, 0, 4096) of path, opened for writing as uid (0: as root).
int fallocate_as(uid_t uid, const std::string& path, int mode) {
    auto f = [&] {
        const int fd = ::open(path.c_str(), O_WRONLY);
        if (fd < 0) return errno;
        const int err = ::fallocate(fd, mode, 0, 4096) == 0 ? 0 : errno;
        ::close(fd);
        return err;
    };
    return uid == 0 ? f() : run_as(uid, kGroup, f);
}

// copy_file_range of 4 bytes from `from` to the start of `to`, as uid.
int copy_range_as(uid_t uid, const std::string& from, const std::string& to) {
    auto c = [&] {
        const int in = ::open(from.c_str(), O_RDONLY);
        const int out = ::open(to.c_str(), O_WRONLY);
        int err = in < 0 || out < 0 ? errno : 0;
        if (err == 0) {
            loff_t in_off = 0, out_off = 0;
            err = ::copy_file_range(in, &in_off, out, &out_off, 4, 0) == 4 ? 0 : errno;
        }
        if (in >= 0) ::close(in);
        if (out >= 0) ::close(out);
        return err == 0 ? 0 : err;
    };
    return uid == 0 ? c() : run_as(uid, kGroup, c);
}

void make_file(const std::string& path, mode_t mode) {
    write_file(path, "data", 0644);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    REQUIRE(mode_of(path) == mode);
}

// Waits until status.json counts at least `writes` write requests and
// returns its count of getxattr requests.
long long getxattr_requests_after(const std::string& store, long long writes) {
    for (int i = 0; i < 100 && status_field(store, "write") < writes; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(status_field(store, "write") >= writes);
    const long long n = status_field(store, "getxattr");
    return n < 0 ? 0 : n;
}

}  // namespace

TEST_CASE("write requests come without a getxattr each", "[mount][killpriv]") {
    const std::string cache = GENERATE(as<std::string>{}, "writeback_cache", "no_writeback_cache");
    INFO(cache);
    MountFixture fx({cache});
    const std::string f = fx.path("f");
    write_file(f, std::string(1 << 20, 'a'));
    const long long before = getxattr_requests_after(fx.store(), 1);
    // 2000 write(2) calls of 4 KiB: without FUSE_HANDLE_KILLPRIV_V2 the
    // kernel asks GETXATTR "security.capability" before each one.
    const int fd = ::open(f.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const std::string block(4096, 'b');
    for (int i = 0; i < 2000; ++i)
        REQUIRE(::pwrite(fd, block.data(), block.size(), (i * 7919 % 256) * 4096) == 4096);
    REQUIRE(::fsync(fd) == 0);
    REQUIRE(::close(fd) == 0);
    // With the writeback cache the kernel may send fewer, larger requests.
    const long long writes = cache == "no_writeback_cache" ? 2000 : 1;
    const long long asked = getxattr_requests_after(fx.store(), writes) - before;
    INFO("getxattr requests during 2000 writes: " << asked);
    CHECK(asked < 20);
}

TEST_CASE("setuid and setgid go on write, truncate and chown as on a local file system",
          "[mount][killpriv]") {
    if (!is_root()) SKIP_TEST("needs root (to write as uid 65534 and to chown)");
    const std::string cache = GENERATE(as<std::string>{}, "writeback_cache", "no_writeback_cache");
    INFO(cache);
    MountFixture fx({cache, "allow_other"});
    for (const auto& r : ext4_and_mount(fx, "kill")) {
        INFO(r.where);
        const std::string k = r.dir;
        REQUIRE(::chmod(k.c_str(), 0777) == 0);
        // A writer without CAP_FSETID drops setuid, and setgid when the
        // group may execute...
        make_file(k + "/both", 06777);
        CHECK(write_as(kUser, k + "/both") == 0);
        CHECK(mode_of(k + "/both") == 0777);
        // A setgid without group execute stays when the writer is in the
        // file's group, and goes when it is not.
        write_file(k + "/sgid-member", "data", 0644);
        REQUIRE(::chown((k + "/sgid-member").c_str(), 0, kGroup) == 0);
        REQUIRE(::chmod((k + "/sgid-member").c_str(), 02767) == 0);
        CHECK(write_as(kUser, k + "/sgid-member") == 0);
        CHECK(mode_of(k + "/sgid-member") == 02767);
        make_file(k + "/sgid-other", 02767);
        CHECK(write_as(kUser, k + "/sgid-other") == 0);
        CHECK(mode_of(k + "/sgid-other") == 0767);
        // root keeps both.
        make_file(k + "/root", 06777);
        CHECK(write_as(0, k + "/root") == 0);
        CHECK(mode_of(k + "/root") == 06777);
        // Truncation by the user: ftruncate, and open with O_TRUNC.
        make_file(k + "/ftrunc", 06777);
        CHECK(run_as(kUser, kGroup, [&] {
                  const int fd = ::open((k + "/ftrunc").c_str(), O_WRONLY);
                  if (fd < 0) return errno;
                  const int err = ::ftruncate(fd, 1) == 0 ? 0 : errno;
                  ::close(fd);
                  return err;
              }) == 0);
        CHECK(mode_of(k + "/ftrunc") == 0777);
        make_file(k + "/otrunc", 06777);
        CHECK(run_as(kUser, kGroup, [&] {
                  const int fd = ::open((k + "/otrunc").c_str(), O_WRONLY | O_TRUNC);
                  if (fd < 0) return errno;
                  return ::close(fd) == 0 ? 0 : errno;
              }) == 0);
        CHECK(mode_of(k + "/otrunc") == 0777);
        // chown, even by root, drops both from a file (not a directory).
        make_file(k + "/chown", 06755);
        REQUIRE(::chown((k + "/chown").c_str(), 1, 1) == 0);
        CHECK(mode_of(k + "/chown") == 0755);
        make_file(k + "/chown-sgid-nox", 02745);
        REQUIRE(::chown((k + "/chown-sgid-nox").c_str(), 1, 1) == 0);
        CHECK(mode_of(k + "/chown-sgid-nox") == 02745);
        make_dir(k + "/dir");
        REQUIRE(::chmod((k + "/dir").c_str(), 06755) == 0);
        REQUIRE(::chown((k + "/dir").c_str(), 1, 1) == 0);
        CHECK(mode_of(k + "/dir") == 06755);
    }
    fx.remount();
    for (const char* name : {"both", "ftrunc", "otrunc"}) {
        INFO(name << " after remount");
        CHECK(mode_of(fx.path(std::string("kill/") + name)) == 0777);
    }
    CHECK(mode_of(fx.path("kill/root")) == 06777);
}

// The kernel flags no FALLOCATE or COPY_FILE_RANGE request to kill the
// set-id bits (FUSE_HANDLE_KILLPRIV_V2 leaves it to the file system), yet
// both change the content as a write does.
TEST_CASE("setuid and setgid go on fallocate and copy_file_range as on a local file system",
          "[mount][killpriv]") {
    if (!is_root()) SKIP_TEST("needs root (to act as uid 65534)");
    const std::string cache = GENERATE(as<std::string>{}, "writeback_cache", "no_writeback_cache");
    INFO(cache);
    MountFixture fx({cache, "allow_other"});
    const struct {
        const char* name;
        int mode;
    } modes[] = {{"allocate", 0},
                 {"keep-size", FALLOC_FL_KEEP_SIZE},
                 {"punch-hole", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE},
                 {"zero-range", FALLOC_FL_ZERO_RANGE}};
    for (const auto& r : ext4_and_mount(fx, "kill")) {
        INFO(r.where);
        const std::string k = r.dir;
        REQUIRE(::chmod(k.c_str(), 0777) == 0);
        for (const auto& m : modes) {
            INFO("fallocate " << m.name);
            const std::string f = k + "/" + m.name;
            make_file(f, 06777);
            CHECK(fallocate_as(kUser, f, m.mode) == 0);
            CHECK(mode_of(f) == 0777);
            // root (CAP_FSETID) keeps both.
            make_file(f + "-root", 06777);
            CHECK(fallocate_as(0, f + "-root", m.mode) == 0);
            CHECK(mode_of(f + "-root") == 06777);
        }
        // A setgid without group execute stays when the caller is in the group.
        write_file(k + "/sgid-member", "data", 0644);
        REQUIRE(::chown((k + "/sgid-member").c_str(), 0, kGroup) == 0);
        REQUIRE(::chmod((k + "/sgid-member").c_str(), 02767) == 0);
        CHECK(fallocate_as(kUser, k + "/sgid-member", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) ==
              0);
        CHECK(mode_of(k + "/sgid-member") == 02767);
        write_file(k + "/source", "abcd", 0644);
        make_file(k + "/copy", 06777);
        CHECK(copy_range_as(kUser, k + "/source", k + "/copy") == 0);
        CHECK(read_file(k + "/copy") == "abcd");
        CHECK(mode_of(k + "/copy") == 0777);
        make_file(k + "/copy-root", 06777);
        CHECK(copy_range_as(0, k + "/source", k + "/copy-root") == 0);
        CHECK(mode_of(k + "/copy-root") == 06777);
    }
    fx.remount();
    for (const char* name : {"allocate", "keep-size", "punch-hole", "zero-range", "copy"}) {
        INFO(name << " after remount");
        CHECK(mode_of(fx.path(std::string("kill/") + name)) == 0777);
    }
}

TEST_CASE("a write drops the file's capabilities", "[mount][killpriv]") {
    if (!is_root()) SKIP_TEST("needs root (to set security.capability)");
    MountFixture fx;
    const std::string f = fx.path("cap");
    write_file(f, "data", 0755);
    // struct vfs_cap_data, revision 2: cap_net_bind_service (10) permitted.
    const std::uint32_t cap[5] = {0x02000000u, 1u << 10, 0, 0, 0};
    REQUIRE(::setxattr(f.c_str(), "security.capability", cap, sizeof cap, 0) == 0);
    char buf[64];
    REQUIRE(::getxattr(f.c_str(), "security.capability", buf, sizeof buf) == sizeof cap);
    CHECK(write_as(0, f) == 0);
    CHECK(::getxattr(f.c_str(), "security.capability", buf, sizeof buf) == -1);
    CHECK(errno == ENODATA);
    fx.remount();
    CHECK(::getxattr(f.c_str(), "security.capability", buf, sizeof buf) == -1);
}
