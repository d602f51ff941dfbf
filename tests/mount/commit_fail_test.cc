// A metadata commit that fails for real, through a mount: the store's
// meta/ on a small tmpfs fills up while the data disk has room. The store
// must stop (every later change and fsync EIO, the reason in the daemon's
// log and in status.json) rather than go on acknowledging operations on top
// of the ones the failed commit lost; after a remount everything that an
// fsync acknowledged before the failure is there and fsck finds it clean.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <map>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {
// Unmounts the tmpfs however the test ends.
struct TmpfsGuard {
    std::string dir;
    bool mounted = false;
    ~TmpfsGuard() {
        if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
    }
};
}  // namespace

TEST_CASE("a metadata commit that fails stops the store until it is mounted again", "[mount][trust]") {
    if (!is_root()) {
        SKIP_TEST("mounting a tmpfs needs root");
    }
    MountFixture fx({"chunking=fixed", "chunk_size=4096", "commit_interval=100",
                     "control_interval=100"});
    write_file(fx.path("before"), random_bytes(256 * kKiB, 1));
    fx.unmount();
    const std::string meta = fx.store() + "/meta";
    const std::string saved = fx.scratch("data.mdb");
    REQUIRE(run({"cp", meta + "/data.mdb", saved}).ok());
    const auto mdb_size = stat_of(saved).st_size;
    TmpfsGuard guard{meta};
    // Room for the metadata as it is and 256 KiB more.
    const std::string size = "size=" + std::to_string(mdb_size + 256 * 1024);
    REQUIRE(::mount("tmpfs", meta.c_str(), "tmpfs", 0, (size + ",mode=0700").c_str()) == 0);
    guard.mounted = true;
    REQUIRE(run({"cp", saved, meta + "/data.mdb"}).ok());
    fx.mount();

    // Small files, fsynced in batches, until a commit can no longer be written.
    std::map<std::string, std::string> acknowledged, pending;
    int failed_errno = 0;
    for (int i = 0; i < 20000 && failed_errno == 0; ++i) {
        const std::string name = "f" + std::to_string(i);
        const std::string data = random_bytes(4096, 100 + static_cast<std::uint64_t>(i));
        int fd = ::open(fx.path(name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            failed_errno = errno;
            break;
        }
        const bool wrote = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
        int err = wrote ? 0 : errno;
        if (wrote && i % 20 == 19 && ::fsync(fd) != 0) err = errno;
        ::close(fd);
        pending[name] = data;
        if (err != 0) {
            failed_errno = err;
        } else if (i % 20 == 19) {
            acknowledged.insert(pending.begin(), pending.end());
            pending.clear();
        }
    }
    INFO("daemon output:\n" << fx.daemon_log());
    REQUIRE(failed_errno == EIO);
    REQUIRE(acknowledged.size() > 20);
    // Stopped: nothing more is taken, and the reason is said.
    CHECK(MT_ERRNO(::open(fx.path("after").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) == EIO);
    CHECK(run({"mkdir", fx.path("dir-after")}).status != 0);
    CHECK(fx.daemon_log().find("accepts nothing more until it is mounted again") != std::string::npos);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_file_or_empty(fx.store() + "/status.json").find("\"store_error\": \"") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(read_file_or_empty(fx.store() + "/status.json").find("\"store_error\": \"metadata commit") != std::string::npos);
    CmdResult stat = run({HIODSFS_STAT_BIN, fx.mnt()});
    INFO(stat.describe() << stat.out);
    CHECK(stat.out.find("STOPPED") != std::string::npos);
    CHECK(fx.unmount_status() != 0);  // the unmount's flush could not commit either

    // The metadata as LMDB left it, back on the store's own disk.
    REQUIRE(run({"cp", meta + "/data.mdb", saved}).ok());
    REQUIRE(::umount2(meta.c_str(), 0) == 0);
    guard.mounted = false;
    REQUIRE(run({"cp", saved, meta + "/data.mdb"}).ok());
    CmdResult r = run({HIODSFS_FSCK_BIN, fx.store()});
    INFO(r.describe() << r.out);
    CHECK(r.status == 0);
    fx.mount();
    for (const auto& [name, data] : acknowledged) {
        INFO(name);
        CHECK(read_file(fx.path(name)) == data);
    }
    CHECK(exists(fx.path("before")));
    CHECK_FALSE(exists(fx.path("after")));
}
