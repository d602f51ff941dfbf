// ENOSPC at write(2): on a store whose disk is nearly full, files opened for
// writing bypass the kernel's writeback cache, so the write call itself fails
// with ENOSPC (not only a later fsync or close), `echo x > f` reports it, and
// after a remount no file claims bytes the store did not take.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {

// One file written in `piece`-sized write(2) calls until done or a call
// fails, then fsynced and closed whatever happened.
struct Written {
    std::string data;          // what was to be written
    std::size_t acked = 0;     // bytes write(2) said it took
    int err = 0;               // the first failure's errno
    std::string failed_in;     // "write", "fsync", "close" or ""
    int fsync_err = 0;         // fsync's errno (after a failed write too)
};

Written write_pieces(const std::string& path, std::string data, std::size_t piece) {
    Written w;
    w.data = std::move(data);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    while (w.acked < w.data.size()) {
        const ssize_t n = ::write(fd, w.data.data() + w.acked, std::min(piece, w.data.size() - w.acked));
        if (n < 0) {
            w.err = errno;
            w.failed_in = "write";
            break;
        }
        w.acked += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) {
        w.fsync_err = errno;
        if (w.err == 0) {
            w.err = errno;
            w.failed_in = "fsync";
        }
    }
    if (::close(fd) != 0 && w.err == 0) {
        w.err = errno;
        w.failed_in = "close";
    }
    return w;
}

// A write is refused when its own length does not fit above the reserve,
// so after a 4 KiB refusal a write of a few bytes may still fit. Takes that
// room up: single bytes appended to path, each fsynced so that it reaches
// a segment, until one is refused.
void use_up_room(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    REQUIRE(fd >= 0);
    for (int i = 0; i < 100000 && ::write(fd, "z", 1) == 1; ++i) (void)::fsync(fd);
    ::close(fd);
}

}  // namespace

TEST_CASE("a full store: write(2) fails with ENOSPC, echo says so, nothing claims missing bytes",
          "[mount][fulldisk][enospc]") {
    if (!is_root() || which("mkfs.ext4").empty()) {
        SKIP_TEST("needs root and mkfs.ext4 (a loop-mounted ext4)");
    }
    TempDir t;
    LoopExt4 fs(t.path() + "/ext4", 300 * kMiB);
    ForegroundDaemon d{fs.dir + "/store", t.path() + "/mnt"};
    make_dir(d.mnt);
    // Fixed chunks make every byte unique data; the writeback cache is on
    // (the default), which is what hid ENOSPC until fsync.
    d.start({"chunking=fixed"});

    // 8 MiB files in 1 MiB writes, each fsynced, until something fails.
    std::vector<Written> files;
    for (int i = 0; i < 100 && (files.empty() || files.back().err == 0); ++i)
        files.push_back(write_pieces(d.mnt + "/fill" + std::to_string(i), random_bytes(8 * kMiB, 100 + i), kMiB));
    const Written& last = files.back();
    INFO(files.size() << " files; the last failed in " << last.failed_in << " with " << std::strerror(last.err)
                      << " after " << last.acked << " bytes");
    REQUIRE(last.err == ENOSPC);
    // The write call itself said so, and what it took is durable.
    CHECK(last.failed_in == "write");
    CHECK(last.fsync_err == 0);

    // The last bytes, in 4 KiB writes: the refusal again comes from write(2).
    const Written tail = write_pieces(d.mnt + "/tail", random_bytes(8 * kMiB, 7), 4096);
    INFO("tail: " << tail.acked << " bytes, then " << tail.failed_in << ": " << std::strerror(tail.err));
    CHECK(tail.err == ENOSPC);
    CHECK(tail.failed_in == "write");
    CHECK(tail.fsync_err == 0);

    // Written through: no shared mapping of a file opened for writing now.
    {
        const int fd = ::open((d.mnt + "/tail").c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(p == MAP_FAILED);
        CHECK(errno == ENODEV);
        if (p != MAP_FAILED) ::munmap(p, 4096);
        ::close(fd);
    }

    // The shell's own echo (dash says only "I/O error") and bash's name it,
    // once the few bytes of room a 4 KiB refusal may leave are taken up (the
    // file system may free a block of its own meanwhile: then once more).
    std::string f, g;
    CmdResult e, b;
    for (int attempt = 0; attempt < 3; ++attempt) {
        use_up_room(d.mnt + "/room");
        f = d.mnt + "/f" + std::to_string(attempt);
        g = d.mnt + "/g" + std::to_string(attempt);
        e = sh("echo x > " + shq(f));
        b = run({"bash", "-c", "echo x > " + shq(g)});
        if (e.status != 0 && b.status != 0) break;
    }
    INFO("sh -c 'echo x > f': " << e.describe());
    CHECK(e.status != 0);
    INFO("bash -c 'echo x > g': " << b.describe());
    CHECK(b.status != 0);
    CHECK(b.err.find("No space left on device") != std::string::npos);

    // After a remount every file holds exactly what write(2) took.
    d.stop();
    d.start({});
    for (std::size_t i = 0; i < files.size(); ++i) {
        INFO("fill" << i);
        const std::string got = read_file(d.mnt + "/fill" + std::to_string(i));
        CHECK(got.size() == files[i].acked);
        CHECK(got == files[i].data.substr(0, files[i].acked));
    }
    const std::string got_tail = read_file(d.mnt + "/tail");
    CHECK(got_tail.size() == tail.acked);
    CHECK(got_tail == tail.data.substr(0, tail.acked));
    CHECK(stat_of(f).st_size == 0);
    CHECK(stat_of(g).st_size == 0);
    d.stop();
    CmdResult r = run({HIODSFS_FSCK_BIN, d.store}, {}, std::chrono::seconds(120));
    INFO("hiodsfs-fsck: " << r.describe() << "\n" << r.out);
    CHECK(r.status == 0);
}

TEST_CASE("far from full, files opened for writing keep the page cache (shared mmap works)", "[mount][enospc]") {
    // A file written through (FOPEN_DIRECT_IO) cannot be mapped shared
    // (ENODEV): that is what a nearly full store costs, and only then.
    MountFixture fx({"chunking=fixed", "chunk_size=4096"});
    const std::string data = random_bytes(64 * kKiB, 3);
    const int fd = ::open(fx.path("f").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(data.size())) == 0);
    void* p = ::mmap(nullptr, data.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    INFO("mmap: " << (p == MAP_FAILED ? std::strerror(errno) : "ok"));
    REQUIRE(p != MAP_FAILED);
    std::memcpy(p, data.data(), data.size());
    CHECK(::msync(p, data.size(), MS_SYNC) == 0);
    ::munmap(p, data.size());
    REQUIRE(::close(fd) == 0);
    fx.remount();
    CHECK(read_file(fx.path("f")) == data);
}
