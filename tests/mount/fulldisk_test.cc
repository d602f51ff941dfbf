// A full disk: the store on a small file system made for the test (a
// size-limited tmpfs, a loop-mounted ext4). Writes fail with ENOSPC, data
// written before stays intact, deleting files and waiting for space
// reclaim makes writes work again, and hiodsfs-fsck finds the store clean.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {


// A tmpfs of `size` at `dir`, unmounted on destruction however the test ends.
struct SmallFs {
    std::string dir;
    SmallFs(std::string d, const std::string& size) : dir(std::move(d)) {
        make_dir(dir);
        REQUIRE(::mount("hiodsfs-test", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0);
    }
    ~SmallFs() {
        if (::umount2(dir.c_str(), 0) != 0) ::umount2(dir.c_str(), MNT_DETACH);
    }
};

// Writes `n` bytes of unique data to path and fsyncs it; 0 or the errno of
// the first failure (write, fsync or close).
int write_unique(const std::string& path, std::size_t n, std::uint64_t seed) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errno;
    const std::string data = random_bytes(n, seed);
    int err = 0;
    for (std::size_t done = 0; done < n && err == 0;) {
        const ssize_t w = ::write(fd, data.data() + done, std::min<std::size_t>(kMiB, n - done));
        if (w < 0) err = errno;
        else done += static_cast<std::size_t>(w);
    }
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}

}  // namespace

TEST_CASE("a full disk: ENOSPC, earlier data intact, space back after deletes, fsck clean",
          "[mount][fulldisk]") {
    if (!is_root()) SKIP_TEST("mounting a tmpfs needs root");
    TempDir t;
    // Deleting every fill file leaves whole dead segments, which go without
    // copying anything.
    SmallFs fs(t.path() + "/small", "320m");
    ForegroundDaemon d{fs.dir + "/store", t.path() + "/mnt"};
    make_dir(d.mnt);
    // Fixed chunks make every byte unique data; a short control interval
    // paces compaction promptly.
    d.start({"chunking=fixed", "control_interval=100"});

    const std::string keep = random_bytes(8 * kMiB, 7);
    write_file(d.mnt + "/keep", keep);
    REQUIRE(write_unique(d.mnt + "/keep-synced", kMiB, 8) == 0);

    // Fill the disk with unique data until something fails.
    int err = 0, files = 0;
    for (; files < 100 && err == 0; ++files)
        err = write_unique(d.mnt + "/fill" + std::to_string(files), 4 * kMiB, 100 + files);
    INFO(files << " fill files; the last failed with " << std::strerror(err));
    REQUIRE(err == ENOSPC);

    // What was there before is intact (read back through the daemon).
    CHECK(read_file(d.mnt + "/keep") == keep);
    CHECK(read_file(d.mnt + "/keep-synced") == random_bytes(kMiB, 8));

    // Deleting the fill files frees space: within a bounded time new writes
    // succeed again.
    for (int i = 0; i < files; ++i) ::unlink((d.mnt + "/fill" + std::to_string(i)).c_str());
    int again = -1;
    for (int i = 0; i < 120 && again != 0; ++i) {
        again = write_unique(d.mnt + "/after", 4 * kMiB, 999);
        if (again != 0) std::this_thread::sleep_for(500ms);
    }
    INFO("writing after the deletes: " << std::strerror(again));
    CHECK(again == 0);

    d.stop();
    CmdResult r = run({HIODSFS_FSCK_BIN, d.store}, {}, std::chrono::seconds(120));
    INFO("hiodsfs-fsck: " << r.describe() << "\n" << r.out);
    CHECK(r.status == 0);
    d.start({});
    CHECK(read_file(d.mnt + "/keep") == keep);
    CHECK(read_file(d.mnt + "/after") == random_bytes(4 * kMiB, 999));
    d.stop();
}

namespace {

std::uint64_t avail_bytes(const std::string& path) {
    struct statvfs v {};
    REQUIRE(::statvfs(path.c_str(), &v) == 0);
    return std::uint64_t{v.f_bavail} * v.f_frsize;
}

}  // namespace

// A store that filled its disk gives back what deletes free: after deleting
// files holding X bytes of unique data, df of the mount shows at least
// 0.9·X free within 30 s and that much can really be written, fsynced and
// read back, in every mode.
TEST_CASE("a full ext4: deleting files makes 0.9 of their bytes writable again", "[mount][fulldisk][slow]") {
    if (!is_root() || which("mkfs.ext4").empty() || which("losetup").empty()) {
        SKIP_TEST("needs root, mkfs.ext4 and losetup (a loop-mounted ext4)");
    }
    const std::string mode = GENERATE(as<std::string>{}, "inline", "deferred", "hybrid");
    INFO("mode=" << mode);
    constexpr std::uint64_t kFile = 8 * kMiB;
    TempDir t;
    LoopExt4 fs(t.path() + "/ext4", 300 * kMiB);
    ForegroundDaemon d{fs.dir + "/store", t.path() + "/mnt"};
    make_dir(d.mnt);
    d.start({"mode=" + mode});

    int err = 0, files = 0;
    for (; files < 100 && err == 0; ++files)
        err = write_unique(d.mnt + "/fill" + std::to_string(files), kFile, 1000 + files);
    --files;  // the one that failed
    INFO(files << " files of 8 MiB written, then " << std::strerror(err));
    REQUIRE(err == ENOSPC);
    REQUIRE(files >= 14);

    // The oldest quarter of the files (7 of 29 in inline mode).
    const int del = files / 4;
    const std::uint64_t x = static_cast<std::uint64_t>(del) * kFile;
    const std::uint64_t want = x / 10 * 9;
    const std::uint64_t before = avail_bytes(d.mnt);
    for (int i = 0; i < del; ++i)
        REQUIRE(::unlink((d.mnt + "/fill" + std::to_string(i)).c_str()) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t avail = 0;
    while ((avail = avail_bytes(d.mnt)) < want && std::chrono::steady_clock::now() - t0 < 30s)
        std::this_thread::sleep_for(200ms);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO("deleted " << del << " files (" << (x >> 20) << " MiB): df said " << (before >> 20)
                    << " MiB free before, " << (avail >> 20) << " MiB after " << took << " s");
    std::fprintf(stderr, "fulldisk %s: %d files, deleted %d (%llu MiB), %llu MiB free before, "
                 "%llu MiB after %.1f s\n", mode.c_str(), files, del,
                 static_cast<unsigned long long>(x >> 20), static_cast<unsigned long long>(before >> 20),
                 static_cast<unsigned long long>(avail >> 20), took);
    REQUIRE(avail >= want);

    // ... and that much really goes in, survives fsync and reads back.
    int n = 0;
    for (std::uint64_t done = 0; done < want; ++n) {
        const std::uint64_t len = std::min(kFile, want - done);
        const int e = write_unique(d.mnt + "/new" + std::to_string(n), len, 5000 + n);
        INFO("new file " << n << " (" << (done >> 20) << " MiB written before it)");
        REQUIRE(e == 0);
        done += len;
    }
    for (int i = 0; i < n; ++i) {
        const std::uint64_t len = std::min(kFile, want - static_cast<std::uint64_t>(i) * kFile);
        CHECK(read_file(d.mnt + "/new" + std::to_string(i)) == random_bytes(len, 5000 + i));
    }
    for (int i = del; i < files; ++i)
        CHECK(read_file(d.mnt + "/fill" + std::to_string(i)) == random_bytes(kFile, 1000 + i));
    d.stop();
    CmdResult r = run({HIODSFS_FSCK_BIN, d.store}, {}, std::chrono::seconds(120));
    INFO("hiodsfs-fsck: " << r.describe() << "\n" << r.out);
    CHECK(r.status == 0);
}
