// The POSIX surface through a real mount: names. Directories, rename and
// its flags, hard and symbolic links, name lengths, special files, and a
// directory of 100k entries. Most checks run twice: first in a directory
// on the backing file system (ext4 here: the reference, which proves the
// expectation), then in the mount.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "../skip.h"
#include "mount_fixture.h"
#include "posix_util.h"

using namespace hiodsfs::mt;

TEST_CASE("directories: mkdir, rmdir, ENOTEMPTY, EISDIR, ENOTDIR, st_nlink", "[posix]") {
    UmaskGuard um(022);
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "dirs")) {
        INFO(r.where);
        const std::string a = r.dir + "/a";
        make_dir(a);
        CHECK(stat_of(a).st_nlink == 2);
        make_dir(a + "/b");
        make_dir(a + "/c", 0700);
        CHECK((stat_of(a + "/c").st_mode & 07777) == 0700);
        CHECK(S_ISDIR(stat_of(a + "/c").st_mode));
        CHECK(stat_of(a).st_nlink == 4);
        CHECK(MT_ERRNO(::mkdir(a.c_str(), 0755)) == EEXIST);
        CHECK(MT_ERRNO(::rmdir(a.c_str())) == ENOTEMPTY);
        write_file(a + "/b/f", "data");
        CHECK(MT_ERRNO(::unlink((a + "/b").c_str())) == EISDIR);
        CHECK(MT_ERRNO(::rmdir((a + "/b/f").c_str())) == ENOTDIR);
        CHECK(MT_ERRNO(::open((a + "/b/f/x").c_str(), O_RDONLY)) == ENOTDIR);
        CHECK(MT_ERRNO(::mkdir((a + "/b/f/x").c_str(), 0755)) == ENOTDIR);
        CHECK(MT_ERRNO(::open((a + "/b/f").c_str(), O_RDONLY | O_DIRECTORY)) == ENOTDIR);
        CHECK(MT_ERRNO(::rmdir((a + "/nope").c_str())) == ENOENT);
        CHECK(MT_ERRNO(::unlink((a + "/nope").c_str())) == ENOENT);
        CHECK(list_dir(a) == std::set<std::string>{"b", "c"});
        REQUIRE(::rmdir((a + "/c").c_str()) == 0);
        CHECK(stat_of(a).st_nlink == 3);
        CHECK(MT_ERRNO(::rmdir((a + "/b").c_str())) == ENOTEMPTY);
        REQUIRE(::unlink((a + "/b/f").c_str()) == 0);
        CHECK(list_dir(a + "/b").empty());
        REQUIRE(::rmdir((a + "/b").c_str()) == 0);
        CHECK(stat_of(a).st_nlink == 2);
        REQUIRE(::rmdir(a.c_str()) == 0);
        CHECK_FALSE(exists(a));
    }
}

TEST_CASE("rename: replace, RENAME_NOREPLACE, RENAME_EXCHANGE, into its own subdir", "[posix]") {
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "ren")) {
        INFO(r.where);
        const std::string d = r.dir;
        write_file(d + "/x", "X");
        write_file(d + "/y", "Y");
        REQUIRE(::link((d + "/y").c_str(), (d + "/y2").c_str()) == 0);
        const ino_t x_ino = stat_of(d + "/x").st_ino;
        REQUIRE(::rename((d + "/x").c_str(), (d + "/y").c_str()) == 0);
        CHECK_FALSE(exists(d + "/x"));
        CHECK(read_file(d + "/y") == "X");
        CHECK(stat_of(d + "/y").st_ino == x_ino);
        CHECK(read_file(d + "/y2") == "Y");
        CHECK(stat_of(d + "/y2").st_nlink == 1);
        // Renaming one link of an inode onto another link of it does nothing.
        REQUIRE(::link((d + "/y2").c_str(), (d + "/y3").c_str()) == 0);
        CHECK(::rename((d + "/y2").c_str(), (d + "/y3").c_str()) == 0);
        CHECK(exists(d + "/y2"));
        CHECK(exists(d + "/y3"));

        CHECK(MT_ERRNO(renameat2_sys(d + "/y", d + "/y2", RENAME_NOREPLACE)) == EEXIST);
        CHECK(read_file(d + "/y2") == "Y");
        REQUIRE(renameat2_sys(d + "/y", d + "/fresh", RENAME_NOREPLACE) == 0);
        CHECK(read_file(d + "/fresh") == "X");

        write_file(d + "/p", "P");
        write_file(d + "/q", "Q");
        const ino_t p_ino = stat_of(d + "/p").st_ino;
        const ino_t q_ino = stat_of(d + "/q").st_ino;
        REQUIRE(renameat2_sys(d + "/p", d + "/q", RENAME_EXCHANGE) == 0);
        CHECK(read_file(d + "/p") == "Q");
        CHECK(read_file(d + "/q") == "P");
        CHECK(stat_of(d + "/p").st_ino == q_ino);
        CHECK(stat_of(d + "/q").st_ino == p_ino);
        CHECK(MT_ERRNO(renameat2_sys(d + "/p", d + "/none", RENAME_EXCHANGE)) == ENOENT);
        make_dir(d + "/xd");
        write_file(d + "/xd/inside", "in");
        REQUIRE(renameat2_sys(d + "/xd", d + "/q", RENAME_EXCHANGE) == 0);
        CHECK(S_ISDIR(stat_of(d + "/q").st_mode));
        CHECK(read_file(d + "/q/inside") == "in");
        CHECK(read_file(d + "/xd") == "P");

        make_dir(d + "/top");
        make_dir(d + "/top/sub");
        CHECK(MT_ERRNO(::rename((d + "/top").c_str(), (d + "/top/sub/top").c_str())) == EINVAL);
        CHECK(MT_ERRNO(::rename((d + "/top").c_str(), (d + "/top/x").c_str())) == EINVAL);
        make_dir(d + "/full");
        write_file(d + "/full/f", "f");
        make_dir(d + "/empty");
        CHECK(MT_ERRNO(::rename((d + "/empty").c_str(), (d + "/full").c_str())) == ENOTEMPTY);
        CHECK(MT_ERRNO(::rename((d + "/fresh").c_str(), (d + "/empty").c_str())) == EISDIR);
        CHECK(MT_ERRNO(::rename((d + "/empty").c_str(), (d + "/fresh").c_str())) == ENOTDIR);
        REQUIRE(::rename((d + "/full").c_str(), (d + "/empty").c_str()) == 0);
        CHECK(read_file(d + "/empty/f") == "f");
        CHECK_FALSE(exists(d + "/full"));
        // Across directories, and a directory's ".." follows it.
        REQUIRE(::rename((d + "/empty").c_str(), (d + "/top/sub/moved").c_str()) == 0);
        CHECK(read_file(d + "/top/sub/moved/f") == "f");
        CHECK(stat_of(d + "/top/sub/moved/..").st_ino == stat_of(d + "/top/sub").st_ino);
        CHECK(stat_of(d + "/top/sub").st_nlink == 3);
        CHECK(MT_ERRNO(::rename((d + "/missing").c_str(), (d + "/m2").c_str())) == ENOENT);
        CHECK(list_dir(d) ==
              std::set<std::string>{"fresh", "p", "q", "top", "xd", "y2", "y3"});
    }
    fx.remount();
    CHECK(read_file(fx.path("ren/top/sub/moved/f")) == "f");
    CHECK(read_file(fx.path("ren/p")) == "Q");
    CHECK(read_file(fx.path("ren/q/inside")) == "in");
    CHECK(list_dir(fx.path("ren")) ==
          std::set<std::string>{"fresh", "p", "q", "top", "xd", "y2", "y3"});
}

TEST_CASE("hard links, st_nlink, symlinks and readlink", "[posix]") {
    MountFixture fx;
    std::string long_target;
    while (long_target.size() < 3990) long_target += "abcdefgh/";
    long_target += "end";
    for (const auto& r : ext4_and_mount(fx, "links")) {
        INFO(r.where);
        const std::string d = r.dir;
        write_file(d + "/f", "one");
        REQUIRE(::link((d + "/f").c_str(), (d + "/g").c_str()) == 0);
        make_dir(d + "/sub");
        REQUIRE(::link((d + "/f").c_str(), (d + "/sub/h").c_str()) == 0);
        CHECK(stat_of(d + "/f").st_nlink == 3);
        CHECK(stat_of(d + "/g").st_ino == stat_of(d + "/f").st_ino);
        {
            Fd fd(d + "/g", O_WRONLY | O_APPEND);
            REQUIRE_FD(fd);
            CHECK(::write(fd.get(), "+two", 4) == 4);
        }
        CHECK(read_file(d + "/f") == "one+two");
        CHECK(read_file(d + "/sub/h") == "one+two");
        REQUIRE(::unlink((d + "/f").c_str()) == 0);
        CHECK(stat_of(d + "/g").st_nlink == 2);
        CHECK(MT_ERRNO(::link((d + "/g").c_str(), (d + "/sub/h").c_str())) == EEXIST);
        CHECK(MT_ERRNO(::link((d + "/sub").c_str(), (d + "/sublink").c_str())) == EPERM);
        CHECK(MT_ERRNO(::link((d + "/nope").c_str(), (d + "/x").c_str())) == ENOENT);
        // An open, unlinked file stays readable.
        {
            Fd fd(d + "/g", O_RDONLY);
            REQUIRE_FD(fd);
            REQUIRE(::unlink((d + "/g").c_str()) == 0);
            REQUIRE(::unlink((d + "/sub/h").c_str()) == 0);
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_nlink == 0);
            CHECK(pread_all(fd.get(), 0, 100) == "one+two");
        }

        write_file(d + "/target", "via link");
        REQUIRE(::symlink("target", (d + "/s").c_str()) == 0);
        REQUIRE(::symlink("sub/../target", (d + "/s2").c_str()) == 0);
        REQUIRE(::symlink(long_target.c_str(), (d + "/long").c_str()) == 0);
        REQUIRE(::symlink("/", (d + "/root").c_str()) == 0);
        char buf[8192];
        ssize_t n = ::readlink((d + "/s").c_str(), buf, sizeof buf);
        CHECK(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))) == "target");
        n = ::readlink((d + "/long").c_str(), buf, sizeof buf);
        CHECK(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))) == long_target);
        CHECK(S_ISLNK(stat_of(d + "/s").st_mode));
        CHECK(stat_of(d + "/long").st_size == static_cast<off_t>(long_target.size()));
        CHECK(read_file(d + "/s") == "via link");
        CHECK(read_file(d + "/s2") == "via link");
        struct stat st{};
        REQUIRE(::stat((d + "/s").c_str(), &st) == 0);
        CHECK(st.st_ino == stat_of(d + "/target").st_ino);
        CHECK(MT_ERRNO(::symlink("x", (d + "/s").c_str())) == EEXIST);
        CHECK(MT_ERRNO(::readlink((d + "/target").c_str(), buf, sizeof buf)) == EINVAL);
        CHECK(MT_ERRNO(::stat((d + "/long").c_str(), &st)) == ENOENT);
        // A hard link to a symlink links the symlink itself.
        REQUIRE(::linkat(AT_FDCWD, (d + "/s").c_str(), AT_FDCWD, (d + "/s-hard").c_str(), 0) == 0);
        CHECK(S_ISLNK(stat_of(d + "/s-hard").st_mode));
        CHECK(stat_of(d + "/s").st_nlink == 2);
    }
    fx.remount();
    char buf[8192];
    ssize_t n = ::readlink(fx.path("links/long").c_str(), buf, sizeof buf);
    CHECK(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))) == long_target);
    CHECK(read_file(fx.path("links/s2")) == "via link");
    CHECK(stat_of(fx.path("links/s")).st_nlink == 2);
}

TEST_CASE("names: 255 bytes work, 256 bytes give ENAMETOOLONG", "[posix]") {
    MountFixture fx;
    std::string utf8_255;
    for (int i = 0; i < 127; ++i) utf8_255 += "\xc3\xa9";  // é
    utf8_255 += "x";
    REQUIRE(utf8_255.size() == 255);
    const std::string n255(255, 'n');
    const std::string n256(256, 'n');
    for (const auto& r : ext4_and_mount(fx, "names")) {
        INFO(r.where);
        const std::string d = r.dir;
        write_file(d + "/" + n255, "255");
        write_file(d + "/" + utf8_255, "utf8");
        make_dir(d + "/" + std::string(254, 'd') + "X");
        CHECK(read_file(d + "/" + n255) == "255");
        CHECK(list_dir(d).count(utf8_255) == 1);
        CHECK(MT_ERRNO(::open((d + "/" + n256).c_str(), O_WRONLY | O_CREAT, 0644)) == ENAMETOOLONG);
        CHECK(MT_ERRNO(::mkdir((d + "/" + n256).c_str(), 0755)) == ENAMETOOLONG);
        struct stat st{};
        CHECK(MT_ERRNO(::lstat((d + "/" + n256).c_str(), &st)) == ENAMETOOLONG);
        CHECK(MT_ERRNO(::symlink("x", (d + "/" + n256).c_str())) == ENAMETOOLONG);
        CHECK(MT_ERRNO(::link((d + "/" + n255).c_str(), (d + "/" + n256).c_str())) == ENAMETOOLONG);
        CHECK(MT_ERRNO(::rename((d + "/" + n255).c_str(), (d + "/" + n256).c_str())) == ENAMETOOLONG);
        CHECK(MT_ERRNO(::mknod((d + "/" + n256).c_str(), S_IFIFO | 0644, 0)) == ENAMETOOLONG);
        CHECK(list_dir(d).size() == 3);
    }
    fx.remount();
    CHECK(read_file(fx.path("names/" + utf8_255)) == "utf8");
    CHECK(list_dir(fx.path("names")).size() == 3);
}

TEST_CASE("mknod: FIFO and regular file", "[posix]") {
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "nodes")) {
        INFO(r.where);
        const std::string fifo = r.dir + "/fifo";
        REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
        CHECK(S_ISFIFO(stat_of(fifo).st_mode));
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int w = ::open(fifo.c_str(), O_WRONLY);
            _exit(w >= 0 && ::write(w, "ping", 4) == 4 ? 0 : 1);
        }
        {
            Fd rd(fifo, O_RDONLY);
            REQUIRE_FD(rd);
            char buf[8] = {};
            std::size_t got = 0;
            while (got < 4) {
                ssize_t n = ::read(rd.get(), buf + got, sizeof buf - got);
                if (n <= 0) break;
                got += static_cast<std::size_t>(n);
            }
            CHECK(std::string(buf, got) == "ping");
        }
        int ws = 0;
        REQUIRE(waitpid(pid, &ws, 0) == pid);
        CHECK((WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
        REQUIRE(::mknod((r.dir + "/plain").c_str(), S_IFREG | 0600, 0) == 0);
        CHECK(S_ISREG(stat_of(r.dir + "/plain").st_mode));
        CHECK(stat_of(r.dir + "/plain").st_size == 0);
    }
    fx.remount();
    CHECK(S_ISFIFO(stat_of(fx.path("nodes/fifo")).st_mode));
    CHECK(S_ISREG(stat_of(fx.path("nodes/plain")).st_mode));
}

TEST_CASE("mknod: character and block devices", "[posix]") {
    if (!is_root()) SKIP_TEST("mknod of a device needs root (CAP_MKNOD)");
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "devs")) {
        INFO(r.where);
        REQUIRE(::mknod((r.dir + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
        struct stat st = stat_of(r.dir + "/null");
        CHECK(S_ISCHR(st.st_mode));
        CHECK(st.st_rdev == makedev(1, 3));
        REQUIRE(::mknod((r.dir + "/blk").c_str(), S_IFBLK | 0600, makedev(7, 200)) == 0);
        CHECK(S_ISBLK(stat_of(r.dir + "/blk").st_mode));
        CHECK(stat_of(r.dir + "/blk").st_rdev == makedev(7, 200));
    }
    fx.remount();
    struct stat st = stat_of(fx.path("devs/null"));
    CHECK(S_ISCHR(st.st_mode));
    CHECK(st.st_rdev == makedev(1, 3));
    CHECK(S_ISBLK(stat_of(fx.path("devs/blk")).st_mode));
    CHECK(stat_of(fx.path("devs/blk")).st_rdev == makedev(7, 200));
}

TEST_CASE("a directory with 100k entries lists each exactly once", "[posix][bigdir][slow]") {
    const long n = env_long("HIODSFS_BIG_DIR_ENTRIES", 100000);
    MountFixture fx;
    const std::string d = fx.path("big");
    make_dir(d);
    char name[64];
    for (long i = 0; i < n; ++i) {
        std::snprintf(name, sizeof name, "/entry-%07ld", i);
        int r = ::mknod((d + name).c_str(), S_IFREG | 0644, 0);
        if (r != 0) {
            FAIL("mknod of entry " << i << " failed: " << std::strerror(errno));
        }
    }
    auto scan = [&](const char* when) {
        INFO(when);
        std::map<std::string, int> count;
        DIR* dir = opendir(d.c_str());
        REQUIRE(dir != nullptr);
        long seen = 0;
        long pos_index = n / 3;
        long at_pos = -1;
        std::string name_at_pos;
        errno = 0;
        while (dirent* e = readdir(dir)) {
            if (seen == pos_index) {
                at_pos = telldir(dir);
                name_at_pos.clear();
            }
            if (seen == pos_index + 1) name_at_pos = e->d_name;
            ++count[e->d_name];
            ++seen;
        }
        CHECK(errno == 0);
        CHECK(count.size() == static_cast<std::size_t>(n + 2));
        CHECK(count["."] == 1);
        CHECK(count[".."] == 1);
        long dup = 0, missing = 0;
        for (long i = 0; i < n; ++i) {
            std::snprintf(name, sizeof name, "entry-%07ld", i);
            auto it = count.find(name);
            if (it == count.end())
                ++missing;
            else if (it->second != 1)
                ++dup;
        }
        CHECK(missing == 0);
        CHECK(dup == 0);
        // seekdir to a telldir position resumes at the same entry.
        if (at_pos >= 0 && !name_at_pos.empty()) {
            seekdir(dir, at_pos);
            dirent* e = readdir(dir);
            REQUIRE(e != nullptr);
            CHECK(std::string(e->d_name) == name_at_pos);
        }
        closedir(dir);
    };
    scan("while mounted");
    fx.remount();
    scan("after remount");
    CHECK(stat_of(d + "/entry-0000000").st_size == 0);
}
