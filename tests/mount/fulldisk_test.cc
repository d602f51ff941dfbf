// A full disk: the store on a small file system made for the test (a
// size-limited tmpfs). Writes fail with ENOSPC, data written before stays
// intact, deleting files and waiting for space reclaim makes writes work
// again, and hiodsfs-fsck finds the store clean.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>

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

// The daemon in the foreground, as the fixture runs it, but with the store
// and mount point on the small file system's side.
struct Daemon {
    std::string store, mnt;
    pid_t pid = -1;
    void start(const std::vector<std::string>& opts) {
        std::vector<std::string> argv = {daemon_binary(), store, mnt, "-f"};
        for (const auto& o : opts) argv.insert(argv.end(), {"-o", o});
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            std::vector<char*> a;
            for (auto& s : argv) a.push_back(s.data());
            a.push_back(nullptr);
            ::execv(a[0], a.data());
            ::_exit(127);
        }
        for (int i = 0; i < 300; ++i) {
            if (sh("mountpoint -q " + shq(mnt)).ok()) return;
            std::this_thread::sleep_for(100ms);
        }
        FAIL("the daemon did not mount " << mnt);
    }
    void stop() {
        if (pid <= 0) return;
        for (int i = 0; i < 50 && !run({"fusermount3", "-u", mnt}).ok(); ++i)
            std::this_thread::sleep_for(200ms);
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    ~Daemon() {
        if (pid > 0) {
            run({"fusermount3", "-uz", mnt});
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
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
    TempDir t;
    // Several 64 MiB segments' worth: deleted files then free whole segments,
    // which go without copying anything (a store that is one segment, all
    // of it needed to hold what lives, cannot make room to compact itself).
    SmallFs fs(t.path() + "/small", "320m");
    Daemon d{fs.dir + "/store", t.path() + "/mnt"};
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
