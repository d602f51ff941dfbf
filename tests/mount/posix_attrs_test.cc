// The POSIX surface through a real mount: attributes. Modes, owners and
// timestamps (and that they survive a remount), extended attributes,
// POSIX ACLs, and statfs. Most checks run twice: first in a directory on
// the backing file system (ext4 here: the reference, which proves the
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
