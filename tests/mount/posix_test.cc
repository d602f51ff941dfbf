// The POSIX surface through a real mount. Most checks run twice: first in a
// directory on the backing file system (ext4 here: the reference, which
// proves the expectation), then in the mount.
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

using namespace hiodsfs::mt;

namespace {

// RAII file descriptor for the tests.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const std::string& path, int flags, mode_t mode = 0644)
        : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = o.fd_;
            o.fd_ = -1;
        }
        return *this;
    }
    int get() const { return fd_; }
    bool ok() const { return fd_ >= 0; }
    int close() {
        int r = ::close(fd_);
        fd_ = -1;
        return r;
    }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

#define REQUIRE_FD(fd) \
    do { INFO("open: " << std::strerror(errno)); REQUIRE((fd).ok()); } while (0)

int renameat2_sys(const std::string& from, const std::string& to, unsigned flags) {
    return static_cast<int>(
        syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

std::string pread_all(int fd, std::uint64_t off, std::size_t len) {
    std::string out(len, '\0');
    std::size_t done = 0;
    while (done < len) {
        ssize_t r = ::pread(fd, out.data() + done, len - done, static_cast<off_t>(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += static_cast<std::size_t>(r);
    }
    out.resize(done);
    return out;
}

void pwrite_all(int fd, std::string_view data, std::uint64_t off) {
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t w = ::pwrite(fd, data.data() + done, data.size() - done,
                             static_cast<off_t>(off + done));
        if (w < 0 && errno == EINTR) continue;
        INFO("pwrite at " << off + done << ": " << std::strerror(errno));
        REQUIRE(w > 0);
        done += static_cast<std::size_t>(w);
    }
}

bool all_zero(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

std::set<std::string> list_dir(const std::string& dir) {
    std::set<std::string> names;
    DIR* d = opendir(dir.c_str());
    INFO("opendir " << dir << ": " << std::strerror(errno));
    REQUIRE(d != nullptr);
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.insert(n);
    }
    closedir(d);
    return names;
}

std::set<std::string> xattr_names(const std::string& path) {
    std::set<std::string> names;
    ssize_t n = llistxattr(path.c_str(), nullptr, 0);
    if (n <= 0) return names;
    std::string buf(static_cast<std::size_t>(n) + 1024, '\0');
    n = llistxattr(path.c_str(), buf.data(), buf.size());
    if (n <= 0) return names;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n);) {
        std::string name(buf.data() + i);
        names.insert(name);
        i += name.size() + 1;
    }
    return names;
}

std::string get_xattr(const std::string& path, const std::string& name) {
    ssize_t n = lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    INFO("getxattr " << path << " " << name << ": " << std::strerror(errno));
    REQUIRE(n >= 0);
    std::string v(static_cast<std::size_t>(n), '\0');
    n = lgetxattr(path.c_str(), name.c_str(), v.data(), v.size());
    REQUIRE(n == static_cast<ssize_t>(v.size()));
    return v;
}

bool ts_less(const timespec& a, const timespec& b) {
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

struct UmaskGuard {
    mode_t old;
    explicit UmaskGuard(mode_t m) : old(::umask(m)) {}
    ~UmaskGuard() { ::umask(old); }
};

}  // namespace

TEST_CASE("open flags: O_APPEND, O_TRUNC, O_EXCL, O_DIRECT", "[posix]") {
    UmaskGuard um(022);
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "open")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        write_file(f, "hello");
        {
            Fd fd(f, O_WRONLY | O_APPEND);
            REQUIRE_FD(fd);
            CHECK(::write(fd.get(), "world", 5) == 5);
            // Linux appends even with pwrite when O_APPEND is set.
            CHECK(::pwrite(fd.get(), "X", 1, 0) == 1);
            Fd fd2(f, O_WRONLY | O_APPEND);
            CHECK(::write(fd2.get(), "Y", 1) == 1);
            CHECK(::write(fd.get(), "Z", 1) == 1);
        }
        CHECK(read_file(f) == "helloworldXYZ");
        {
            Fd fd(f, O_WRONLY | O_TRUNC);
            REQUIRE_FD(fd);
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_size == 0);
            CHECK(::write(fd.get(), "ab", 2) == 2);
        }
        CHECK(read_file(f) == "ab");
        CHECK(MT_ERRNO(::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644)) == EEXIST);
        REQUIRE(::symlink("nowhere", (r.dir + "/dangling").c_str()) == 0);
        CHECK(MT_ERRNO(::open((r.dir + "/dangling").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644)) ==
              EEXIST);
        {
            Fd fd(r.dir + "/new", O_WRONLY | O_CREAT | O_EXCL, 0666);
            REQUIRE_FD(fd);
        }
        CHECK((stat_of(r.dir + "/new").st_mode & 07777) == 0644);
        CHECK(MT_ERRNO(::open((r.dir + "/missing").c_str(), O_RDONLY)) == ENOENT);
        CHECK(MT_ERRNO(::open(r.dir.c_str(), O_WRONLY)) == EISDIR);

        // O_DIRECT reads go to the file system, not the page cache.
        const std::string data = random_bytes(256 * kKiB, 7);
        write_file(r.dir + "/direct", data);
        {
            Fd fd(r.dir + "/direct", O_RDONLY | O_DIRECT);
            REQUIRE_FD(fd);
            void* buf = nullptr;
            REQUIRE(posix_memalign(&buf, 4096, data.size()) == 0);
            ssize_t got = ::pread(fd.get(), buf, data.size(), 0);
            CHECK(got == static_cast<ssize_t>(data.size()));
            CHECK(std::memcmp(buf, data.data(), data.size()) == 0);
            std::free(buf);
        }
    }
    fx.remount();
    CHECK(read_file(fx.path("open/f")) == "ab");
}

TEST_CASE("truncate and ftruncate grow and shrink", "[posix]") {
    MountFixture fx;
    const std::string rnd = random_bytes(kMiB, 11);
    auto expect_big = [&] {
        std::string e = rnd.substr(0, 300001);
        e.resize(kMiB, '\0');
        return e;
    }();
    for (const auto& r : ext4_and_mount(fx, "trunc")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        write_file(f, std::string(10000, 'A'));
        REQUIRE(::truncate(f.c_str(), 100) == 0);
        CHECK(stat_of(f).st_size == 100);
        CHECK(read_file(f) == std::string(100, 'A'));
        REQUIRE(::truncate(f.c_str(), 10000) == 0);
        CHECK(read_file(f) == std::string(100, 'A') + std::string(9900, '\0'));
        {
            Fd fd(f, O_RDWR);
            REQUIRE_FD(fd);
            REQUIRE(::ftruncate(fd.get(), 5 * kMiB) == 0);
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_size == static_cast<off_t>(5 * kMiB));
            CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 < kMiB);
            CHECK(all_zero(pread_all(fd.get(), 100, 5 * kMiB - 100)));
            REQUIRE(::ftruncate(fd.get(), 0) == 0);
            CHECK(::pwrite(fd.get(), "x", 1, 0) == 1);
        }
        CHECK(read_file(f) == "x");
        CHECK(MT_ERRNO(::truncate(r.dir.c_str(), 0)) == EISDIR);
        CHECK(MT_ERRNO(::truncate(f.c_str(), -1)) == EINVAL);

        // Shrink into the middle of a chunk, then grow: the cut-off bytes must not come back.
        const std::string g = r.dir + "/g";
        write_file(g, rnd);
        REQUIRE(::truncate(g.c_str(), 300001) == 0);
        REQUIRE(::truncate(g.c_str(), static_cast<off_t>(kMiB)) == 0);
        CHECK(read_file(g) == expect_big);
    }
    fx.remount();
    CHECK(read_file(fx.path("trunc/f")) == "x");
    CHECK(read_file(fx.path("trunc/g")) == expect_big);
}

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

TEST_CASE("chmod, chown, utimensat with nanoseconds, and ctime", "[posix]") {
    MountFixture fx;
    const timespec t_atime{1234567890, 123456789};
    const timespec t_mtime{1500000000, 987654321};
    for (const auto& r : ext4_and_mount(fx, "attrs")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        write_file(f, "data");
        REQUIRE(::chmod(f.c_str(), 0640) == 0);
        CHECK((stat_of(f).st_mode & 07777) == 0640);
        REQUIRE(::chmod(f.c_str(), 04755) == 0);
        CHECK((stat_of(f).st_mode & 07777) == 04755);
        if (is_root()) {
            REQUIRE(::chown(f.c_str(), 65534, 65534) == 0);
            CHECK(stat_of(f).st_uid == 65534);
            CHECK(stat_of(f).st_gid == 65534);
            // chown clears set-user-ID on a regular file, even for root.
            CHECK((stat_of(f).st_mode & 07777) == 0755);
            REQUIRE(::lchown(f.c_str(), static_cast<uid_t>(-1), 0) == 0);
            CHECK(stat_of(f).st_uid == 65534);
            CHECK(stat_of(f).st_gid == 0);
        }
        const timespec times[2] = {t_atime, t_mtime};
        REQUIRE(::utimensat(AT_FDCWD, f.c_str(), times, 0) == 0);
        struct stat st = stat_of(f);
        CHECK(st.st_atim.tv_sec == t_atime.tv_sec);
        CHECK(st.st_atim.tv_nsec == t_atime.tv_nsec);
        CHECK(st.st_mtim.tv_sec == t_mtime.tv_sec);
        CHECK(st.st_mtim.tv_nsec == t_mtime.tv_nsec);
        const timespec omit_now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
        REQUIRE(::utimensat(AT_FDCWD, f.c_str(), omit_now, 0) == 0);
        st = stat_of(f);
        CHECK(st.st_atim.tv_nsec == t_atime.tv_nsec);
        CHECK(st.st_mtim.tv_sec > t_mtime.tv_sec);
        // A symlink's own times.
        REQUIRE(::symlink("f", (r.dir + "/s").c_str()) == 0);
        REQUIRE(::utimensat(AT_FDCWD, (r.dir + "/s").c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
        CHECK(stat_of(r.dir + "/s").st_mtim.tv_nsec == t_mtime.tv_nsec);
        CHECK(stat_of(f).st_mtim.tv_nsec != t_mtime.tv_nsec);

        // ctime moves on chmod, link, rename, write, truncate and utimensat.
        auto ctime_moves = [&](const std::string& what, const std::string& path, auto&& op) {
            INFO("ctime after " << what);
            const timespec before = stat_of(path).st_ctim;
            tick();
            std::string after = op();
            CHECK(ts_less(before, stat_of(after.empty() ? path : after).st_ctim));
        };
        ctime_moves("chmod", f, [&] {
            REQUIRE(::chmod(f.c_str(), 0600) == 0);
            return std::string();
        });
        ctime_moves("link", f, [&] {
            REQUIRE(::link(f.c_str(), (r.dir + "/f2").c_str()) == 0);
            return std::string();
        });
        ctime_moves("unlink of another link", f, [&] {
            REQUIRE(::unlink((r.dir + "/f2").c_str()) == 0);
            return std::string();
        });
        const std::string cur = r.dir + "/g";
        ctime_moves("rename", f, [&] {
            REQUIRE(::rename(f.c_str(), cur.c_str()) == 0);
            return cur;
        });
        const timespec mtime_before_write = stat_of(cur).st_mtim;
        ctime_moves("write", cur, [&] {
            Fd fd(cur, O_WRONLY);
            REQUIRE_FD(fd);
            CHECK(::pwrite(fd.get(), "more", 4, 4) == 4);
            return std::string();
        });
        CHECK(ts_less(mtime_before_write, stat_of(cur).st_mtim));
        const timespec mtime_before = stat_of(cur).st_mtim;
        ctime_moves("truncate", cur, [&] {
            REQUIRE(::truncate(cur.c_str(), 2) == 0);
            return std::string();
        });
        CHECK(ts_less(mtime_before, stat_of(cur).st_mtim));
        ctime_moves("utimensat", cur, [&] {
            REQUIRE(::utimensat(AT_FDCWD, cur.c_str(), times, 0) == 0);
            return std::string();
        });
        ctime_moves("setxattr", cur, [&] {
            REQUIRE(::setxattr(cur.c_str(), "user.t", "1", 1, 0) == 0);
            return std::string();
        });
        // The directory's mtime and ctime move when an entry is added.
        const struct stat dir_before = stat_of(r.dir);
        tick();
        write_file(r.dir + "/new", "");
        CHECK(ts_less(dir_before.st_mtim, stat_of(r.dir).st_mtim));
        CHECK(ts_less(dir_before.st_ctim, stat_of(r.dir).st_ctim));
    }
    fx.remount();
    struct stat st = stat_of(fx.path("attrs/g"));
    CHECK(st.st_mtim.tv_sec == t_mtime.tv_sec);
    CHECK(st.st_mtim.tv_nsec == t_mtime.tv_nsec);
    CHECK(st.st_atim.tv_nsec == t_atime.tv_nsec);
    CHECK((st.st_mode & 07777) == 0600);
    if (is_root()) CHECK(st.st_uid == 65534);
}

// With the writeback cache the kernel stamps mtime and ctime when write(2)
// runs and sends them with a setattr only if they changed: a write in the
// same clock tick as an extending ftruncate sends none. The daemon must not
// restamp the file when the pages arrive, or the times stat showed move
// (forward by up to a tick) at the next mount.
TEST_CASE("mtime and ctime of a write after ftruncate survive a remount", "[posix]") {
    for (const char* mode : {"mode=inline", "mode=deferred"}) {
        INFO(mode);
        MountFixture fx({mode});
        constexpr int kFiles = 20;
        std::vector<struct stat> before;
        for (int i = 0; i < kFiles; ++i) {
            const std::string f = fx.path("t" + std::to_string(i));
            Fd fd(f, O_CREAT | O_RDWR | O_TRUNC);
            REQUIRE_FD(fd);
            REQUIRE(::ftruncate(fd.get(), 1 << 20) == 0);
            REQUIRE(::pwrite(fd.get(), "z", 1, 1 << 19) == 1);
            REQUIRE(fd.close() == 0);
            before.push_back(stat_of(f));
        }
        fx.remount();
        for (int i = 0; i < kFiles; ++i) {
            INFO("file t" << i);
            struct stat st = stat_of(fx.path("t" + std::to_string(i)));
            CHECK(st.st_size == before[i].st_size);
            CHECK(st.st_mtim.tv_sec == before[i].st_mtim.tv_sec);
            CHECK(st.st_mtim.tv_nsec == before[i].st_mtim.tv_nsec);
            CHECK(st.st_ctim.tv_sec == before[i].st_ctim.tv_sec);
            CHECK(st.st_ctim.tv_nsec == before[i].st_ctim.tv_nsec);
        }
    }
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

namespace {

using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;  // [begin, end) of data

// What POSIX promises of SEEK_DATA/SEEK_HOLE even where a file system may
// call a hole data: SEEK_DATA skips no data, SEEK_HOLE never lands in data.
void check_seek_safe(int fd, const Ranges& data, std::uint64_t size,
                     const std::vector<std::uint64_t>& probes) {
    for (std::uint64_t x : probes) {
        if (x >= size) continue;
        INFO("offset " << x);
        std::uint64_t next = size;  // first data byte at or after x
        for (const auto& [a, b] : data)
            if (b > x) next = std::min(next, std::max(a, x));
        const off_t d = ::lseek(fd, static_cast<off_t>(x), SEEK_DATA);
        if (next < size) {
            CHECK(d >= static_cast<off_t>(x));
            CHECK(d <= static_cast<off_t>(next));
        } else {
            CHECK((d == -1 ? errno == ENXIO : (d >= static_cast<off_t>(x) && d < static_cast<off_t>(size))));
        }
        const off_t h = ::lseek(fd, static_cast<off_t>(x), SEEK_HOLE);
        CHECK(h >= static_cast<off_t>(x));
        CHECK(h <= static_cast<off_t>(size));
        for (const auto& [a, b] : data) CHECK_FALSE((h >= static_cast<off_t>(a) && h < static_cast<off_t>(b)));
    }
}

// Checks the layout written by the sparse test: data at [1M, 1M+64K) and
// [3M, 3M+64K) of a 5 MiB file. exact_seek: SEEK_DATA/SEEK_HOLE must give
// what ext4 gives; otherwise only what POSIX promises.
void check_sparse(const std::string& f, const std::string& d1, const std::string& d2, bool exact_seek) {
    Fd fd(f, O_RDONLY);
    REQUIRE_FD(fd);
    struct stat st{};
    REQUIRE(fstat(fd.get(), &st) == 0);
    CHECK(st.st_size == static_cast<off_t>(5 * kMiB));
    // Holes are not stored (ext4: exactly the 128 KiB written).
    CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 <= 128 * kKiB + 4 * kKiB);
    const std::string all = pread_all(fd.get(), 0, 5 * kMiB);
    REQUIRE(all.size() == 5 * kMiB);
    CHECK(all_zero(std::string_view(all).substr(0, kMiB)));
    CHECK(all.substr(kMiB, 64 * kKiB) == d1);
    CHECK(all_zero(std::string_view(all).substr(kMiB + 64 * kKiB, 2 * kMiB - 64 * kKiB)));
    CHECK(all.substr(3 * kMiB, 64 * kKiB) == d2);
    CHECK(all_zero(std::string_view(all).substr(3 * kMiB + 64 * kKiB)));
    const int f_ = fd.get();
    check_seek_safe(f_, {{kMiB, kMiB + 64 * kKiB}, {3 * kMiB, 3 * kMiB + 64 * kKiB}}, 5 * kMiB,
                    {0, kMiB - 1, kMiB, kMiB + 100, kMiB + 64 * kKiB, 2 * kMiB, 3 * kMiB,
                     3 * kMiB + 64 * kKiB, 4 * kMiB, 5 * kMiB - 1});
    if (!exact_seek) return;
    CHECK(::lseek(f_, 0, SEEK_DATA) == static_cast<off_t>(kMiB));
    CHECK(::lseek(f_, static_cast<off_t>(kMiB), SEEK_HOLE) == static_cast<off_t>(kMiB + 64 * kKiB));
    CHECK(::lseek(f_, static_cast<off_t>(kMiB + 64 * kKiB), SEEK_DATA) == static_cast<off_t>(3 * kMiB));
    CHECK(::lseek(f_, static_cast<off_t>(3 * kMiB + 100), SEEK_DATA) == static_cast<off_t>(3 * kMiB + 100));
    CHECK(::lseek(f_, static_cast<off_t>(3 * kMiB), SEEK_HOLE) == static_cast<off_t>(3 * kMiB + 64 * kKiB));
    CHECK(::lseek(f_, 0, SEEK_HOLE) == 0);
    CHECK(MT_ERRNO(::lseek(f_, static_cast<off_t>(3 * kMiB + 64 * kKiB), SEEK_DATA)) == ENXIO);
    CHECK(::lseek(f_, static_cast<off_t>(4 * kMiB), SEEK_HOLE) == static_cast<off_t>(4 * kMiB));
    CHECK(MT_ERRNO(::lseek(f_, static_cast<off_t>(5 * kMiB), SEEK_DATA)) == ENXIO);
    CHECK(MT_ERRNO(::lseek(f_, static_cast<off_t>(5 * kMiB), SEEK_HOLE)) == ENXIO);
}

// With the writeback cache the daemon leaves SEEK_DATA/SEEK_HOLE to the
// kernel (which does not write dirty pages back before asking the daemon)
// and the kernel calls the whole file data: allowed by POSIX, so exact
// answers are required only when writing through.
bool exact_seek_for(const std::string& cache_option) { return cache_option == "no_writeback_cache"; }

}  // namespace

TEST_CASE("sparse files: holes read as zeros, SEEK_DATA and SEEK_HOLE", "[posix]") {
    const std::string cache = GENERATE(as<std::string>{}, "no_writeback_cache", "writeback_cache");
    INFO("mount option " << cache);
    const bool exact = exact_seek_for(cache);
    MountFixture fx({cache});
    const std::string d1 = random_bytes(64 * kKiB, 21);
    const std::string d2 = random_bytes(64 * kKiB, 22);
    for (const auto& r : ext4_and_mount(fx, "sparse")) {
        INFO(r.where);
        {
            // Written, then extended.
            Fd fd(r.dir + "/f", O_RDWR | O_CREAT | O_TRUNC);
            REQUIRE_FD(fd);
            pwrite_all(fd.get(), d1, kMiB);
            pwrite_all(fd.get(), d2, 3 * kMiB);
            REQUIRE(::ftruncate(fd.get(), 5 * kMiB) == 0);
        }
        {
            // Extended, then written into the hole.
            Fd fd(r.dir + "/g", O_RDWR | O_CREAT | O_TRUNC);
            REQUIRE_FD(fd);
            REQUIRE(::ftruncate(fd.get(), 5 * kMiB) == 0);
            pwrite_all(fd.get(), d2, 3 * kMiB);
            pwrite_all(fd.get(), d1, kMiB);
        }
        {
            INFO("file f: written, then extended");
            check_sparse(r.dir + "/f", d1, d2, exact || !r.in_mount);
        }
        {
            INFO("file g: extended, then written into the hole");
            check_sparse(r.dir + "/g", d1, d2, exact || !r.in_mount);
        }
    }
    fx.remount();
    INFO("after remount");
    {
        INFO("file f: written, then extended");
        check_sparse(fx.path("sparse/f"), d1, d2, exact);
    }
    {
        INFO("file g: extended, then written into the hole");
        check_sparse(fx.path("sparse/g"), d1, d2, exact);
    }
}

TEST_CASE("a sparse file larger than 4 GiB", "[posix]") {
    const std::string cache = GENERATE(as<std::string>{}, "no_writeback_cache", "writeback_cache");
    INFO("mount option " << cache);
    const bool exact = exact_seek_for(cache);
    MountFixture fx({cache});
    const std::uint64_t off = 4 * kGiB + 12345;
    const std::string data = random_bytes(kMiB + 3, 31);
    const std::uint64_t tail_off = 5 * kGiB - 10;
    auto check = [&](const std::string& f, bool exact_seek) {
        Fd fd(f, O_RDONLY);
        REQUIRE_FD(fd);
        struct stat st{};
        REQUIRE(fstat(fd.get(), &st) == 0);
        CHECK(static_cast<std::uint64_t>(st.st_size) == tail_off + 4);
        CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 < 4 * kMiB);
        CHECK(pread_all(fd.get(), 0, 4) == "head");
        CHECK(all_zero(pread_all(fd.get(), 2 * kGiB, 64 * kKiB)));
        CHECK(all_zero(pread_all(fd.get(), 4 * kGiB - 100, 200)));
        CHECK(pread_all(fd.get(), off, data.size()) == data);
        CHECK(pread_all(fd.get(), off - 10, 20) == std::string(10, '\0') + data.substr(0, 10));
        CHECK(pread_all(fd.get(), tail_off, 100) == "tail");
        check_seek_safe(fd.get(), {{0, 4}, {off, off + data.size()}, {tail_off, tail_off + 4}}, tail_off + 4,
                        {4, 2 * kGiB, 4 * kGiB, off, off + data.size(), tail_off - 1});
        if (exact_seek) {
            const off_t next = ::lseek(fd.get(), 4096, SEEK_DATA);
            CHECK(next >= static_cast<off_t>(4 * kGiB));  // ext4: the block holding `off`
            CHECK(next <= static_cast<off_t>(off));
        }
    };
    for (const auto& r : ext4_and_mount(fx, "big")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        {
            Fd fd(f, O_RDWR | O_CREAT | O_TRUNC);
            REQUIRE_FD(fd);
            pwrite_all(fd.get(), "head", 0);
            pwrite_all(fd.get(), data, off);
            pwrite_all(fd.get(), "tail", tail_off);
        }
        check(f, exact || !r.in_mount);
    }
    fx.remount();
    INFO("after remount");
    check(fx.path("big/f"), exact);
}

TEST_CASE("fallocate: mode 0, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE", "[posix]") {
    MountFixture fx;
    const std::string data = random_bytes(256 * kKiB, 41);
    std::string expect = data;
    std::fill_n(expect.begin() + 64 * kKiB, 64 * kKiB, '\0');
    std::fill_n(expect.begin() + 200001, 5003, '\0');
    bool in_mount = false;  // where try_mode runs
    auto try_mode = [&](int fd, int mode, off_t o, off_t len, const char* name) {
        int e = MT_ERRNO(::fallocate(fd, mode, o, len));
        // hiodsfs implements every mode tried here; only the reference
        // file system may lack one.
        if (e == EOPNOTSUPP && !in_mount) {
            WARN("fallocate " << name << " is not supported on the backing file system (EOPNOTSUPP)");
            return false;
        }
        INFO("fallocate " << name << ": " << std::strerror(e));
        CHECK(e == 0);
        return e == 0;
    };
    for (const auto& r : ext4_and_mount(fx, "falloc")) {
        INFO(r.where);
        in_mount = r.in_mount;
        const std::string f = r.dir + "/f";
        Fd fd(f, O_RDWR | O_CREAT | O_TRUNC);
        REQUIRE_FD(fd);
        if (try_mode(fd.get(), 0, 0, static_cast<off_t>(kMiB), "mode 0")) {
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_size == static_cast<off_t>(kMiB));
            CHECK(all_zero(pread_all(fd.get(), 0, kMiB)));
        }
        REQUIRE(::ftruncate(fd.get(), 0) == 0);
        pwrite_all(fd.get(), data, 0);
        if (try_mode(fd.get(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(kMiB), static_cast<off_t>(kMiB),
                     "KEEP_SIZE")) {
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_size == static_cast<off_t>(data.size()));
        }
        bool punched = try_mode(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                static_cast<off_t>(64 * kKiB), static_cast<off_t>(64 * kKiB),
                                "PUNCH_HOLE");
        punched = punched && try_mode(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 200001, 5003,
                                      "PUNCH_HOLE (unaligned)");
        if (punched) {
            struct stat st{};
            REQUIRE(fstat(fd.get(), &st) == 0);
            CHECK(st.st_size == static_cast<off_t>(data.size()));
            CHECK(pread_all(fd.get(), 0, data.size()) == expect);
        }
        if (try_mode(fd.get(), FALLOC_FL_ZERO_RANGE, 10, 20, "ZERO_RANGE")) {
            CHECK(all_zero(pread_all(fd.get(), 10, 20)));
            CHECK(pread_all(fd.get(), 30, 10) == data.substr(30, 10));
            // Restore so the file matches `expect` again.
            pwrite_all(fd.get(), data.substr(10, 20), 10);
        }
    }
    fx.remount();
    INFO("after remount");
    CHECK(read_file(fx.path("falloc/f")) == expect);
}

TEST_CASE("flock and fcntl locks conflict across processes", "[posix]") {
    MountFixture fx;
    for (const auto& r : ext4_and_mount(fx, "locks")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        write_file(f, std::string(200, 'l'));
        Fd fd(f, O_RDWR);
        REQUIRE_FD(fd);
        REQUIRE(::flock(fd.get(), LOCK_EX) == 0);
        auto in_child = [&](auto&& fn) {
            pid_t pid = fork();
            REQUIRE(pid >= 0);
            if (pid == 0) _exit(fn() & 0xff);
            int ws = 0;
            REQUIRE(waitpid(pid, &ws, 0) == pid);
            REQUIRE(WIFEXITED(ws));
            return WEXITSTATUS(ws);
        };
        auto try_flock = [&] {
            int c = ::open(f.c_str(), O_RDWR);
            if (c < 0) return 200;
            return MT_ERRNO(::flock(c, LOCK_EX | LOCK_NB));
        };
        CHECK(in_child(try_flock) == EWOULDBLOCK);
        REQUIRE(::flock(fd.get(), LOCK_UN) == 0);
        CHECK(in_child(try_flock) == 0);
        REQUIRE(::flock(fd.get(), LOCK_SH) == 0);
        CHECK(in_child([&] {
                  int c = ::open(f.c_str(), O_RDONLY);
                  return MT_ERRNO(::flock(c, LOCK_SH | LOCK_NB));
              }) == 0);
        REQUIRE(::flock(fd.get(), LOCK_UN) == 0);

        struct flock lk{};
        lk.l_type = F_WRLCK;
        lk.l_whence = SEEK_SET;
        lk.l_start = 0;
        lk.l_len = 100;
        REQUIRE(::fcntl(fd.get(), F_SETLK, &lk) == 0);
        const pid_t me = getpid();
        CHECK(in_child([&] {
                  int c = ::open(f.c_str(), O_RDWR);
                  struct flock l{};
                  l.l_type = F_WRLCK;
                  l.l_whence = SEEK_SET;
                  l.l_start = 50;
                  l.l_len = 10;
                  int e = MT_ERRNO(::fcntl(c, F_SETLK, &l));
                  return e == EAGAIN || e == EACCES ? 0 : (e == 0 ? 100 : e);
              }) == 0);
        CHECK(in_child([&] {
                  int c = ::open(f.c_str(), O_RDWR);
                  struct flock l{};
                  l.l_type = F_WRLCK;
                  l.l_whence = SEEK_SET;
                  l.l_start = 50;
                  l.l_len = 10;
                  if (::fcntl(c, F_GETLK, &l) != 0) return 101;
                  if (l.l_type != F_WRLCK) return 102;
                  if (l.l_pid != me) return 103;
                  if (l.l_start != 0 || l.l_len != 100) return 104;
                  return 0;
              }) == 0);
        CHECK(in_child([&] {
                  int c = ::open(f.c_str(), O_RDWR);
                  struct flock l{};
                  l.l_type = F_WRLCK;
                  l.l_whence = SEEK_SET;
                  l.l_start = 100;
                  l.l_len = 10;
                  return MT_ERRNO(::fcntl(c, F_SETLK, &l));
              }) == 0);
        lk.l_type = F_UNLCK;
        REQUIRE(::fcntl(fd.get(), F_SETLK, &lk) == 0);
        CHECK(in_child([&] {
                  int c = ::open(f.c_str(), O_RDWR);
                  struct flock l{};
                  l.l_type = F_WRLCK;
                  l.l_whence = SEEK_SET;
                  l.l_start = 50;
                  l.l_len = 10;
                  return MT_ERRNO(::fcntl(c, F_SETLK, &l));
              }) == 0);
    }
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

TEST_CASE("extended attributes: user.* and trusted.*", "[posix]") {
    MountFixture fx;
    std::string bin;
    for (int i = 0; i < 256; ++i) bin += static_cast<char>(i);
    const std::string big = random_bytes(2000, 51);
    auto check_persisted = [&](const std::string& f, bool root) {
        CHECK(get_xattr(f, "user.a") == "alpha2");
        CHECK(get_xattr(f, "user.bin") == bin);
        CHECK(get_xattr(f, "user.big") == big);
        CHECK(get_xattr(f, "user.empty").empty());
        std::set<std::string> want = {"user.a", "user.bin", "user.big", "user.empty"};
        if (root) want.insert("trusted.t");
        auto names = xattr_names(f);
        std::erase_if(names, [](const std::string& n) { return n.starts_with("security."); });
        CHECK(names == want);
    };
    for (const auto& r : ext4_and_mount(fx, "xattr")) {
        INFO(r.where);
        const std::string f = r.dir + "/f";
        write_file(f, "x");
        CHECK(::setxattr(f.c_str(), "user.a", "alpha", 5, 0) == 0);
        CHECK(get_xattr(f, "user.a") == "alpha");
        CHECK(::getxattr(f.c_str(), "user.a", nullptr, 0) == 5);
        char small[2];
        CHECK(MT_ERRNO(::getxattr(f.c_str(), "user.a", small, sizeof small)) == ERANGE);
        CHECK(MT_ERRNO(::setxattr(f.c_str(), "user.a", "x", 1, XATTR_CREATE)) == EEXIST);
        CHECK(MT_ERRNO(::setxattr(f.c_str(), "user.none", "x", 1, XATTR_REPLACE)) == ENODATA);
        CHECK(::setxattr(f.c_str(), "user.a", "alpha2", 6, XATTR_REPLACE) == 0);
        CHECK(::setxattr(f.c_str(), "user.new", "n", 1, XATTR_CREATE) == 0);
        CHECK(::setxattr(f.c_str(), "user.bin", bin.data(), bin.size(), 0) == 0);
        CHECK(::setxattr(f.c_str(), "user.big", big.data(), big.size(), 0) == 0);
        CHECK(::setxattr(f.c_str(), "user.empty", "", 0, 0) == 0);
        CHECK(MT_ERRNO(::getxattr(f.c_str(), "user.none", nullptr, 0)) == ENODATA);
        CHECK(MT_ERRNO(::removexattr(f.c_str(), "user.none")) == ENODATA);
        CHECK(::removexattr(f.c_str(), "user.new") == 0);
        CHECK(MT_ERRNO(::getxattr(f.c_str(), "user.new", nullptr, 0)) == ENODATA);
        CHECK(xattr_names(f).count("user.new") == 0);
        // The list's size query matches the list.
        ssize_t need = ::listxattr(f.c_str(), nullptr, 0);
        std::string lbuf(static_cast<std::size_t>(std::max<ssize_t>(need, 0)), '\0');
        CHECK(::listxattr(f.c_str(), lbuf.data(), lbuf.size()) == need);
        if (need > 1) {
            CHECK(MT_ERRNO(::listxattr(f.c_str(), lbuf.data(), 1)) == ERANGE);
        }
        if (is_root()) {
            CHECK(::setxattr(f.c_str(), "trusted.t", "T", 1, 0) == 0);
            CHECK(get_xattr(f, "trusted.t") == "T");
            CHECK(::setxattr(f.c_str(), "trusted.gone", "G", 1, 0) == 0);
            CHECK(::removexattr(f.c_str(), "trusted.gone") == 0);
        }
        check_persisted(f, is_root());
        // Directories take user.* too; symlinks do not (EPERM, as on ext4).
        CHECK(::setxattr(r.dir.c_str(), "user.d", "dir", 3, 0) == 0);
        CHECK(get_xattr(r.dir, "user.d") == "dir");
        REQUIRE(::symlink("f", (r.dir + "/s").c_str()) == 0);
        CHECK(MT_ERRNO(::lsetxattr((r.dir + "/s").c_str(), "user.x", "1", 1, 0)) == EPERM);
        CHECK(MT_ERRNO(::setxattr(f.c_str(), "bogus.ns", "1", 1, 0)) == EOPNOTSUPP);
    }
    fx.remount();
    INFO("after remount");
    check_persisted(fx.path("xattr/f"), is_root());
    CHECK(get_xattr(fx.path("xattr"), "user.d") == "dir");
}

TEST_CASE("POSIX ACLs with setfacl and getfacl", "[posix][acl]") {
    UmaskGuard um(022);
    MountFixture fx({"allow_other"});
    std::map<bool, std::vector<std::string>> seen;
    std::string inherit_acl;
    for (const auto& r : ext4_and_mount(fx, "acl")) {
        INFO(r.where);
        const std::string d = r.dir;
        write_file(d + "/f", "secret", 0600);
        REQUIRE(::chmod((d + "/f").c_str(), 0600) == 0);
        auto getfacl = [&](const std::string& rel) {
            CmdResult g = run({"getfacl", "--omit-header", "--numeric", d + "/" + rel});
            INFO("getfacl " << rel << ": " << g.describe());
            CHECK(g.ok());
            seen[r.in_mount].push_back(rel + ":\n" + g.out);
            return g.out;
        };
        CmdResult s = run({"setfacl", "-m", "u:65534:r,g:65534:rw", d + "/f"});
        INFO("setfacl: " << s.describe());
        REQUIRE(s.ok());
        getfacl("f");
        CHECK((stat_of(d + "/f").st_mode & 0777) == 0660);  // the group bits show the mask
        CHECK(exists(d + "/f"));
        CHECK(xattr_names(d + "/f").count("system.posix_acl_access") == 1);

        make_dir(d + "/dd");
        s = run({"setfacl", "-d", "-m", "u:65534:rwx,g::r-x,o::---", d + "/dd"});
        INFO("setfacl -d: " << s.describe());
        REQUIRE(s.ok());
        getfacl("dd");
        write_file(d + "/dd/inherit", "i", 0666);
        make_dir(d + "/dd/subdir", 0777);
        const std::string acl_of_inherit = getfacl("dd/inherit");
        if (!r.in_mount) inherit_acl = acl_of_inherit;
        getfacl("dd/subdir");
        CHECK((stat_of(d + "/dd/inherit").st_mode & 0777) == 0660);

        if (is_root()) {
            // The ACL grants 65534 read access the mode bits alone deny.
            CHECK(run_as(65534, 65534, [&] {
                      int fd = ::open((d + "/f").c_str(), O_RDONLY);
                      return fd >= 0 ? 0 : errno;
                  }) == 0);
            CHECK(run_as(65533, 65533, [&] {
                      int fd = ::open((d + "/f").c_str(), O_RDONLY);
                      return fd >= 0 ? 0 : errno;
                  }) == EACCES);
        }
        s = run({"setfacl", "-b", d + "/f"});
        REQUIRE(s.ok());
        getfacl("f");
        CHECK(xattr_names(d + "/f").count("system.posix_acl_access") == 0);
    }
    REQUIRE(seen[false].size() == seen[true].size());
    for (std::size_t i = 0; i < seen[false].size(); ++i) {
        INFO("ext4:\n" << seen[false][i] << "hiodsfs:\n" << seen[true][i]);
        CHECK(seen[false][i] == seen[true][i]);
    }
    fx.remount();
    CmdResult g = run({"getfacl", "--omit-header", "--numeric", fx.path("acl/dd/inherit")});
    INFO("after remount");
    CHECK(g.out == inherit_acl);
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

TEST_CASE("statfs and df match the store's backing file system", "[posix]") {
    MountFixture fx;
    struct statvfs m{}, s{};
    REQUIRE(::statvfs(fx.mnt().c_str(), &m) == 0);
    REQUIRE(::statvfs(fx.store().c_str(), &s) == 0);
    const double m_total = static_cast<double>(m.f_blocks) * static_cast<double>(m.f_frsize);
    const double s_total = static_cast<double>(s.f_blocks) * static_cast<double>(s.f_frsize);
    const double m_avail = static_cast<double>(m.f_bavail) * static_cast<double>(m.f_frsize);
    const double s_avail = static_cast<double>(s.f_bavail) * static_cast<double>(s.f_frsize);
    const double m_free = static_cast<double>(m.f_bfree) * static_cast<double>(m.f_frsize);
    const double s_free = static_cast<double>(s.f_bfree) * static_cast<double>(s.f_frsize);
    const double tol = std::max(0.01 * s_total, 256.0 * kMiB);
    // hiodsfs keeps 2 % (16 MiB to 512 MiB) back from file data for
    // metadata and reclaim on a full disk, and does not count it as free.
    const double reserve = std::clamp(s_total / 50, 16.0 * kMiB, 512.0 * kMiB);
    INFO("mount: total " << m_total << " avail " << m_avail << " free " << m_free << "; store: total "
                         << s_total << " avail " << s_avail << " free " << s_free);
    CHECK(std::abs(m_total - s_total) <= tol);
    CHECK(std::abs(m_avail - (s_avail - reserve)) <= tol);
    CHECK(std::abs(m_free - (s_free - reserve)) <= tol);
    CHECK(m.f_namemax == 255);
    CHECK(m.f_bsize > 0);
    CmdResult dm = run({"df", "-B1", "--output=size,avail", fx.mnt()});
    CmdResult ds = run({"df", "-B1", "--output=size,avail", fx.store()});
    REQUIRE(dm.ok());
    REQUIRE(ds.ok());
    auto last_line = [](const std::string& o) {
        std::string t = o;
        while (!t.empty() && t.back() == '\n') t.pop_back();
        return t.substr(t.rfind('\n') + 1);
    };
    double dm_size = 0, dm_avail = 0, ds_size = 0, ds_avail = 0;
    std::sscanf(last_line(dm.out).c_str(), "%lf %lf", &dm_size, &dm_avail);
    std::sscanf(last_line(ds.out).c_str(), "%lf %lf", &ds_size, &ds_avail);
    INFO("df mount: " << dm.out << "df store: " << ds.out);
    CHECK(dm_size > 0);
    CHECK(std::abs(dm_size - ds_size) <= tol);
    CHECK(std::abs(dm_avail - (ds_avail - reserve)) <= tol);
}

TEST_CASE("fsync, fdatasync and syncfs return 0", "[posix]") {
    MountFixture fx;
    const std::string f = fx.path("f");
    Fd fd(f, O_RDWR | O_CREAT);
    REQUIRE_FD(fd);
    pwrite_all(fd.get(), random_bytes(300 * kKiB, 61), 0);
    CHECK(::fsync(fd.get()) == 0);
    pwrite_all(fd.get(), "more", 300 * kKiB);
    CHECK(::fdatasync(fd.get()) == 0);
    CHECK(::syncfs(fd.get()) == 0);
    {
        Fd dir(fx.mnt(), O_RDONLY | O_DIRECTORY);
        REQUIRE_FD(dir);
        CHECK(::fsync(dir.get()) == 0);
    }
    fd.close();
    ::sync();
    fx.remount();
    CHECK(stat_of(f).st_size == static_cast<off_t>(300 * kKiB + 4));
}
