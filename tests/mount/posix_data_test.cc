// The POSIX surface through a real mount: file contents. Open flags,
// truncate, sparse files and SEEK_DATA/SEEK_HOLE, fallocate, locks and
// the sync calls. Most checks run twice: first in a directory on the
// backing file system (ext4 here: the reference, which proves the
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
