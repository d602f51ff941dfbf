// request_poll= (fuse/reader_gate.h) through a real mount: one request
// thread at a time waits for the kernel's next request. A copy that sends
// one request at a time, writers in parallel beside a reader, and the
// unmount (every thread waiting at the gate must see the end) all work as
// without it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

// What rsync does for each file: a temporary name, written, its mode and
// times set, then renamed over the name.
void copy_like_rsync(const std::string& dir, const std::string& name, const std::string& data) {
    const std::string tmp = dir + "/." + name + ".tmp";
    const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::fchmod(fd, 0600) == 0);
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    REQUIRE(::close(fd) == 0);
    const timespec times[2] = {{1700000000, 0}, {1700000000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, tmp.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
    REQUIRE(::chmod(tmp.c_str(), 0644) == 0);
    REQUIRE(::rename(tmp.c_str(), (dir + "/" + name).c_str()) == 0);
}

std::string content(int i) { return random_bytes(100 + static_cast<std::size_t>(i) * 131 % 20000, 7000 + i); }

}  // namespace

TEST_CASE("with request_poll a serial copy and parallel writers come out whole, and the mount ends",
          "[mount][request-poll]") {
    MountFixture fx({"request_poll=50", "threads=4"});
    make_dir(fx.path("tree"));
    for (int i = 0; i < 300; ++i) copy_like_rsync(fx.path("tree"), "f" + std::to_string(i), content(i));

    // Four writers syncing files of their own while a reader goes through
    // the copied tree: requests in parallel, some of them waiting long.
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < 4; ++w)
        threads.emplace_back([&, w] {
            for (int i = 0; i < 20; ++i) {
                const std::string p = fx.path("w" + std::to_string(w) + "-" + std::to_string(i));
                const std::string data = random_bytes(64 * 1024, 100 * w + i);
                const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()) ||
                    ::fsync(fd) != 0 || ::close(fd) != 0)
                    mismatches.fetch_add(1);
            }
        });
    threads.emplace_back([&] {
        for (int i = 0; i < 300; ++i)
            if (read_file(fx.path("tree/f" + std::to_string(i))) != content(i)) mismatches.fetch_add(1);
    });
    for (auto& t : threads) t.join();
    CHECK(mismatches.load() == 0);

    fx.remount();  // the unmount REQUIREs the daemon's exit status 0
    for (int i = 0; i < 300; ++i) {
        const std::string p = fx.path("tree/f" + std::to_string(i));
        CHECK(read_file(p) == content(i));
        struct stat st {};
        REQUIRE(::stat(p.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0644);
        CHECK(st.st_mtime == 1700000000);
    }
    for (int w = 0; w < 4; ++w)
        for (int i = 0; i < 20; ++i)
            CHECK(read_file(fx.path("w" + std::to_string(w) + "-" + std::to_string(i))) ==
                  random_bytes(64 * 1024, 100 * w + i));
}
