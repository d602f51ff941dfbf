// What tests set up beside a MountFixture (mount_fixture.h): a daemon they
// start and stop themselves, and a small ext4 on a loop device.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "mount_fixture.h"

namespace hiodsfs::mt {

using namespace std::chrono_literals;

LoopExt4::LoopExt4(std::string d, std::uint64_t bytes) : dir(std::move(d)), image(dir + ".img") {
    make_dir(dir);
    const int fd = ::open(image.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    ::close(fd);
    CmdResult mk = run({"mkfs.ext4", "-q", "-F", image});
    INFO("mkfs.ext4: " << mk.describe());
    REQUIRE(mk.ok());
    CmdResult m = run({"mount", "-o", "loop", image, dir});
    INFO("mount -o loop: " << m.describe());
    REQUIRE(m.ok());
    mounted = true;
}

LoopExt4::~LoopExt4() {
    if (mounted && !run({"umount", dir}).ok()) run({"umount", "-l", dir});
    ::unlink(image.c_str());
}

std::string run_daemon_options() {
    const char* more = std::getenv("HIODSFS_DAEMON_OPTIONS");
    return more != nullptr ? more : "";
}

std::vector<std::string> with_test_defaults(const std::vector<std::string>& opts) {
    std::vector<std::string> out;
    if (std::none_of(opts.begin(), opts.end(), [](const std::string& o) { return o.rfind("background_nice=", 0) == 0; }))
        out.push_back("background_nice=0");
    out.insert(out.end(), opts.begin(), opts.end());
    return out;
}

void ForegroundDaemon::start(const std::vector<std::string>& opts) {
    std::vector<std::string> argv = {daemon_binary(), store, mnt, "-f"};
    for (const auto& o : with_test_defaults(opts)) argv.insert(argv.end(), {"-o", o});
    if (const std::string more = run_daemon_options(); !more.empty()) argv.insert(argv.end(), {"-o", more});
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

void ForegroundDaemon::stop() {
    if (pid <= 0) return;
    for (int i = 0; i < 50 && !run({"fusermount3", "-u", mnt}).ok(); ++i)
        std::this_thread::sleep_for(200ms);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

ForegroundDaemon::~ForegroundDaemon() {
    if (pid > 0) {
        run({"fusermount3", "-uz", mnt});
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
}

}  // namespace hiodsfs::mt
