// Permissions as a user other than root (uid/gid 65534 and 65533), through
// a mount with -o allow_other. Each check runs on the backing file system
// first (the reference) and then in the mount.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

constexpr uid_t kOther = 65533;

int as_user(const std::function<int()>& fn) { return run_as(kUser, kGroup, fn); }

int create_as(uid_t uid, gid_t gid, const std::string& path) {
    return run_as(uid, gid, [&] {
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0) return errno;
        return ::close(fd) == 0 ? 0 : errno;
    });
}

int open_as_user(const std::string& path, int flags) {
    return as_user([&] {
        int fd = ::open(path.c_str(), flags);
        return fd >= 0 ? 0 : errno;
    });
}

void chmod_ok(const std::string& p, mode_t m) {
    INFO("chmod " << p);
    REQUIRE(::chmod(p.c_str(), m) == 0);
}

}  // namespace

TEST_CASE("permissions for a non-root user (allow_other)", "[perm]") {
    if (!is_root()) {
        SKIP_TEST("the permission tests need root (to act as uid 65534)");
    }
    MountFixture fx({"allow_other"});
    for (const auto& r : ext4_and_mount(fx, "perm")) {
        INFO(r.where);
        const std::string d = r.dir;
        chmod_ok(d, 0755);

        // A root-owned 0755 directory: no creating, but reading is fine.
        make_dir(d + "/ro");
        chmod_ok(d + "/ro", 0755);
        CHECK(create_as(kUser, kGroup, d + "/ro/x") == EACCES);
        CHECK(as_user([&] { return ::mkdir((d + "/ro/sub").c_str(), 0755) == 0 ? 0 : errno; }) ==
              EACCES);
        CHECK(open_as_user(d + "/ro", O_RDONLY | O_DIRECTORY) == 0);

        // A 0777 directory: the new file and directory belong to the user.
        make_dir(d + "/rw");
        chmod_ok(d + "/rw", 0777);
        CHECK(create_as(kUser, kGroup, d + "/rw/mine") == 0);
        struct stat st = stat_of(d + "/rw/mine");
        CHECK(st.st_uid == kUser);
        CHECK(st.st_gid == kGroup);
        CHECK((st.st_mode & 07777) == 0644);
        CHECK(as_user([&] { return ::mkdir((d + "/rw/mydir").c_str(), 0777) == 0 ? 0 : errno; }) == 0);
        CHECK(stat_of(d + "/rw/mydir").st_uid == kUser);
        CHECK((stat_of(d + "/rw/mydir").st_mode & 07777) == 0755);
        CHECK(as_user([&] { return ::symlink("mine", (d + "/rw/link").c_str()) == 0 ? 0 : errno; }) == 0);
        CHECK(stat_of(d + "/rw/link").st_uid == kUser);
        // The owner may chmod its own file.
        CHECK(as_user([&] { return ::chmod((d + "/rw/mine").c_str(), 0600) == 0 ? 0 : errno; }) == 0);
        CHECK((stat_of(d + "/rw/mine").st_mode & 07777) == 0600);

        // Root's private file.
        write_file(d + "/secret", "secret", 0600);
        chmod_ok(d + "/secret", 0600);
        CHECK(open_as_user(d + "/secret", O_RDONLY) == EACCES);
        write_file(d + "/public", "public", 0644);
        chmod_ok(d + "/public", 0644);
        CHECK(open_as_user(d + "/public", O_RDONLY) == 0);
        CHECK(open_as_user(d + "/public", O_WRONLY) == EACCES);
        CHECK(as_user([&] { return ::truncate((d + "/public").c_str(), 0) == 0 ? 0 : errno; }) == EACCES);
        // Someone else's file: no chmod, no chown, no explicit times.
        CHECK(as_user([&] { return ::chmod((d + "/public").c_str(), 0777) == 0 ? 0 : errno; }) == EPERM);
        CHECK(as_user([&] { return ::chown((d + "/rw/mine").c_str(), 0, 0) == 0 ? 0 : errno; }) == EPERM);
        const timespec t[2] = {{1, 0}, {1, 0}};
        CHECK(as_user([&] { return ::utimensat(AT_FDCWD, (d + "/public").c_str(), t, 0) == 0 ? 0 : errno; }) ==
              EPERM);
        write_file(d + "/shared", "shared", 0666);
        chmod_ok(d + "/shared", 0666);
        CHECK(as_user([&] {
                  return ::utimensat(AT_FDCWD, (d + "/shared").c_str(), nullptr, 0) == 0 ? 0 : errno;
              }) == 0);
        CHECK(open_as_user(d + "/shared", O_WRONLY | O_APPEND) == 0);
        // No search permission on a directory: nothing inside can be reached.
        make_dir(d + "/closed");
        write_file(d + "/closed/f", "f", 0644);
        chmod_ok(d + "/closed", 0700);
        CHECK(open_as_user(d + "/closed/f", O_RDONLY) == EACCES);

        // Sticky directory: only the owner of a file (or of the directory) removes it.
        make_dir(d + "/tmp");
        chmod_ok(d + "/tmp", 01777);
        write_file(d + "/tmp/rootfile", "r", 0666);
        CHECK(create_as(kUser, kGroup, d + "/tmp/userfile") == 0);
        CHECK(create_as(kOther, kOther, d + "/tmp/otherfile") == 0);
        CHECK(as_user([&] { return ::unlink((d + "/tmp/rootfile").c_str()) == 0 ? 0 : errno; }) == EPERM);
        CHECK(as_user([&] { return ::unlink((d + "/tmp/otherfile").c_str()) == 0 ? 0 : errno; }) == EPERM);
        CHECK(as_user([&] {
                  return ::rename((d + "/tmp/otherfile").c_str(), (d + "/tmp/stolen").c_str()) == 0 ? 0 : errno;
              }) == EPERM);
        CHECK(as_user([&] { return ::unlink((d + "/tmp/userfile").c_str()) == 0 ? 0 : errno; }) == 0);
        CHECK(exists(d + "/tmp/rootfile"));
        CHECK(exists(d + "/tmp/otherfile"));
        CHECK_FALSE(exists(d + "/tmp/userfile"));
        // Without the sticky bit a writable directory lets anyone remove entries.
        write_file(d + "/rw/rootfile", "r", 0644);
        CHECK(as_user([&] { return ::unlink((d + "/rw/rootfile").c_str()) == 0 ? 0 : errno; }) == 0);

        // setgid directory: new entries take its group; subdirectories keep the bit.
        make_dir(d + "/sg");
        REQUIRE(::chown((d + "/sg").c_str(), 0, 4242) == 0);
        chmod_ok(d + "/sg", 02777);
        CHECK(create_as(kUser, kGroup, d + "/sg/f") == 0);
        CHECK(stat_of(d + "/sg/f").st_gid == 4242);
        CHECK(stat_of(d + "/sg/f").st_uid == kUser);
        CHECK((stat_of(d + "/sg/f").st_mode & S_ISGID) == 0);
        CHECK(as_user([&] { return ::mkdir((d + "/sg/sub").c_str(), 0755) == 0 ? 0 : errno; }) == 0);
        CHECK(stat_of(d + "/sg/sub").st_gid == 4242);
        CHECK((stat_of(d + "/sg/sub").st_mode & S_ISGID) != 0);
        CHECK(create_as(kUser, kGroup, d + "/sg/sub/deeper") == 0);
        CHECK(stat_of(d + "/sg/sub/deeper").st_gid == 4242);
        // A user who is not in the group cannot set setgid on a file of that group.
        CHECK(as_user([&] { return ::chmod((d + "/sg/f").c_str(), 02755) == 0 ? 0 : errno; }) == 0);
        CHECK((stat_of(d + "/sg/f").st_mode & S_ISGID) == 0);
        // Writing to a setuid file as a non-owner clears the bit.
        write_file(d + "/rw/suid", "s", 0777);
        chmod_ok(d + "/rw/suid", 04777);
        CHECK(as_user([&] {
                  int fd = ::open((d + "/rw/suid").c_str(), O_WRONLY);
                  if (fd < 0) return errno;
                  return ::write(fd, "x", 1) == 1 ? 0 : errno;
              }) == 0);
        CHECK((stat_of(d + "/rw/suid").st_mode & S_ISUID) == 0);
    }
    fx.remount();
    INFO("after remount");
    CHECK(stat_of(fx.path("perm/rw/mine")).st_uid == kUser);
    CHECK(stat_of(fx.path("perm/sg/sub/deeper")).st_gid == 4242);
    CHECK(open_as_user(fx.path("perm/secret"), O_RDONLY) == EACCES);
}

TEST_CASE("without allow_other another user cannot enter the mount", "[perm]") {
    if (!is_root()) {
        SKIP_TEST("needs root (to act as uid 65534)");
    }
    MountFixture fx;
    write_file(fx.path("f"), "f", 0644);
    ::chmod(fx.mnt().c_str(), 0755);
    CHECK(open_as_user(fx.path("f"), O_RDONLY) == EACCES);
}

TEST_CASE("another user cannot read the store's segments or metadata", "[perm][private]") {
    if (!is_root()) {
        SKIP_TEST("needs root (to act as uid 65534)");
    }
    // The fixture's store directory already exists, 0755 like the temp dir.
    MountFixture fx({"chunking=fixed", "chunk_size=4096"});
    REQUIRE((stat_of(fx.store()).st_mode & 07777) == 0755);
    const std::string secret = "the-secret-" + std::string(4096, 's');
    write_file(fx.path("secret"), secret, 0600);
    {
        const int fd = ::open(fx.path("secret").c_str(), O_RDONLY);
        REQUIRE(fd >= 0);
        REQUIRE(::fsync(fd) == 0);  // into a segment file now
        ::close(fd);
    }
    // The bytes are in a segment file (root reads them there) ...
    CmdResult found = sh("grep -l the-secret- " + shq(fx.store()) + "/segments/*.seg");
    INFO("grep as root: " << found.describe());
    REQUIRE(found.ok());
    // ... and nobody else can: not the segments, not the metadata, not status.json.
    CmdResult grep = sh("setpriv --reuid=65534 --regid=65534 --clear-groups grep -l the-secret- " +
                        shq(fx.store()) + "/segments/*.seg");
    INFO("grep as uid 65534: " << grep.describe());
    CHECK(grep.status == 2);
    CHECK(grep.err.find("Permission denied") != std::string::npos);
    for (const char* p : {"/segments", "/meta", "/meta/data.mdb", "/FORMAT", "/lock"})
        CHECK(open_as_user(fx.store() + p, O_RDONLY) == EACCES);
    CHECK(open_as_user(fx.store() + "/segments/00000001.seg", O_RDONLY) == EACCES);
    for (int i = 0; i < 100 && !exists(fx.store() + "/status.json"); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(open_as_user(fx.store() + "/status.json", O_RDONLY) == EACCES);
    // hiodsfs-stat as that user says why it cannot show the store.
    CmdResult st = sh("setpriv --reuid=65534 --regid=65534 --clear-groups " + std::string(HIODSFS_STAT_BIN) +
                      " " + shq(fx.store()));
    INFO("hiodsfs-stat as uid 65534: " << st.describe());
    CHECK(st.status == 1);
    CHECK(st.err.find("Permission denied") != std::string::npos);
    CHECK(st.err.find("root") != std::string::npos);
    CHECK(std::count(st.err.begin(), st.err.end(), '\n') == 1);
    // The owner still reads the file, after a remount too.
    fx.remount();
    CHECK(read_file(fx.path("secret")) == secret);
}
