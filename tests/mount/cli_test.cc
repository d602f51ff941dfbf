// The daemon's command line: bad invocations fail with one clear line, and
// `mount -t fuse.hiodsfs` works once hiodsfs is installed (scripts/test
// installs the Debian package before running this binary).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {

// Unmounts whatever is left at mnt when a test ends, however it ends.
struct UnmountGuard {
    std::string mnt;
    ~UnmountGuard() {
        for (int i = 0; i < 20 && mounted_at(mnt); ++i) {
            if (run({"fusermount3", "-u", mnt}).ok()) break;
            std::this_thread::sleep_for(200ms);
        }
        if (mounted_at(mnt)) run({"fusermount3", "-uz", mnt});
    }
};

}  // namespace

TEST_CASE("bad invocations give one line on stderr and a non-zero exit", "[cli]") {
    TempDir t;
    const std::string bin = daemon_binary();
    REQUIRE(access(bin.c_str(), X_OK) == 0);
    make_dir(t.path() + "/mnt");
    make_dir(t.path() + "/store");
    struct Case {
        const char* what;
        std::vector<std::string> args;
    };
    const std::vector<Case> cases = {
        {"an unknown option", {t.path() + "/store", t.path() + "/mnt", "-f", "-o", "no_such_option=1"}},
        {"a bad chunking kind", {t.path() + "/store", t.path() + "/mnt", "-f", "-o", "chunking=bogus"}},
        {"a chunk size that is not a power of two",
         {t.path() + "/store", t.path() + "/mnt", "-f", "-o", "chunking=fixed,chunk_size=3000"}},
        {"a missing store parent directory", {t.path() + "/no/such/dir/store", t.path() + "/mnt", "-f"}},
        {"a missing mount point", {t.path() + "/store", t.path() + "/no-mnt", "-f"}},
        {"no mount point at all", {t.path() + "/store"}},
    };
    for (const auto& c : cases) {
        INFO("hiodsfs with " << c.what);
        UnmountGuard guard{t.path() + "/mnt"};
        std::vector<std::string> argv = {bin};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        CmdResult r = run(argv, {}, 20s);
        INFO(r.describe());
        CHECK_FALSE(r.timed_out);
        CHECK(r.status != 0);
        CHECK(r.status < 128);  // an exit, not a crash
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.size() > 10);
        CHECK_FALSE(mounted_at(t.path() + "/mnt"));
    }
    CHECK_FALSE(exists(t.path() + "/no"));
    // A store made with one chunking refuses another.
    {
        MountFixture fx({"chunking=fixed", "chunk_size=4096"});
        write_file(fx.path("f"), "x");
        fx.unmount();
        {
            CmdResult r = run({bin, fx.store(), fx.mnt(), "-f", "-o", "chunking=cdc"}, {}, 20s);
            UnmountGuard guard{fx.mnt()};
            INFO("mounting a fixed-chunking store with chunking=cdc: " << r.describe());
            CHECK(r.status != 0);
            CHECK(line_count(r.err) == 1);
        }
        // The same store with no chunking option mounts and still has its file.
        fx.set_options({});
        fx.mount();
        CHECK(read_file(fx.path("f")) == "x");
    }
}

// A directory tree's names and contents, to show a refused start touched nothing.
std::string snapshot(const std::string& dir) {
    return sh("cd " + shq(dir) + " && find . -printf '%p %s %m\\n' | sort && cat FORMAT 2>/dev/null")
        .out;
}

TEST_CASE("bad stores and mount points are refused with one line, nothing touched", "[cli]") {
    TempDir t;
    const std::string bin = daemon_binary();
    make_dir(t.path() + "/mnt");
    make_dir(t.path() + "/mnt2");
    make_dir(t.path() + "/busy-mnt");
    write_file(t.path() + "/busy-mnt/keep", "mine");
    write_file(t.path() + "/a-file", "not a store");
    write_file(t.path() + "/a-file-mnt", "not a directory");
    // A real store with a file in it, then made "newer" and locked.
    MountFixture fx;
    write_file(fx.path("f"), "data");
    fx.unmount();
    const std::string newer = t.path() + "/newer";
    REQUIRE(sh("cp -a " + shq(fx.store()) + " " + shq(newer) + " && sed -i 's/^format .*/format 99/' " +
               shq(newer + "/FORMAT"))
                .ok());
    make_dir(t.path() + "/locked");
    REQUIRE(::chmod((t.path() + "/locked").c_str(), 0700) == 0);
    REQUIRE(::chown((t.path() + "/mnt2").c_str(), 65534, 65534) == 0);

    struct Case {
        const char* what;
        std::vector<std::string> argv;
        std::string expect;  // in the message
        std::string watched;  // a directory that must be unchanged
    };
    const std::string setpriv = "setpriv";
    const std::vector<Case> cases = {
        {"a store path that is a file", {bin, t.path() + "/a-file", t.path() + "/mnt", "-f"},
         "not a directory", ""},
        {"a store of a newer format", {bin, newer, t.path() + "/mnt", "-f"}, "format", newer},
        {"a store without permissions (as nobody)",
         {setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, t.path() + "/locked",
          t.path() + "/mnt2", "-f"},
         "ermission", t.path() + "/locked"},
        {"a mount point that is not empty", {bin, fx.store(), t.path() + "/busy-mnt", "-f"},
         "not empty", t.path() + "/busy-mnt"},
        {"a mount point that is not a directory", {bin, fx.store(), t.path() + "/a-file-mnt", "-f"},
         "not a directory", fx.store()},
    };
    for (const auto& c : cases) {
        INFO("hiodsfs with " << c.what);
        const std::string before = c.watched.empty() ? "" : snapshot(c.watched);
        UnmountGuard guard{t.path() + "/mnt"};
        UnmountGuard guard2{t.path() + "/mnt2"};
        UnmountGuard guard3{t.path() + "/busy-mnt"};
        CmdResult r = run(c.argv, {}, 20s);
        INFO(r.describe());
        CHECK_FALSE(r.timed_out);
        CHECK(r.status != 0);
        CHECK(r.status < 128);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(c.expect) != std::string::npos);
        CHECK_FALSE(mounted_at(t.path() + "/mnt"));
        CHECK_FALSE(mounted_at(t.path() + "/mnt2"));
        CHECK_FALSE(mounted_at(t.path() + "/busy-mnt"));
        if (!c.watched.empty()) CHECK(snapshot(c.watched) == before);
    }
    CHECK(read_file(t.path() + "/busy-mnt/keep") == "mine");
    // -o nonempty mounts over the directory; its file is back afterwards.
    {
        UnmountGuard guard{t.path() + "/busy-mnt"};
        CmdResult r = run({bin, fx.store(), t.path() + "/busy-mnt", "-o", "nonempty"}, {}, 20s);
        INFO(r.describe());
        REQUIRE(r.ok());
        CHECK(read_file(t.path() + "/busy-mnt/f") == "data");
    }
    CHECK(read_file(t.path() + "/busy-mnt/keep") == "mine");
    // A second daemon on a mounted store: refused through the lock, and the
    // first mount keeps working.
    fx.mount();
    {
        UnmountGuard guard{t.path() + "/mnt"};
        CmdResult r = run({bin, fx.store(), t.path() + "/mnt", "-f"}, {}, 20s);
        INFO(r.describe());
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find("in use") != std::string::npos);
        CHECK_FALSE(mounted_at(t.path() + "/mnt"));
    }
    CHECK(read_file(fx.path("f")) == "data");
}

TEST_CASE("--version and --help", "[cli]") {
    const std::string bin = daemon_binary();
    CmdResult v = run({bin, "--version"}, {}, 20s);
    INFO("--version: " << v.describe());
    CHECK(v.ok());
    CHECK_FALSE((v.out + v.err).empty());
    CmdResult h = run({bin, "--help"}, {}, 20s);
    INFO("--help: " << h.describe());
    CHECK(h.ok());
    CHECK((h.out + h.err).find("chunking") != std::string::npos);
}

TEST_CASE("mount -t fuse.hiodsfs works once installed", "[cli][install]") {
    const std::string installed = which("hiodsfs");
    if (installed.empty()) {
        SKIP_TEST("hiodsfs is not on PATH, so `mount -t fuse.hiodsfs` cannot find it; "
                  "install the package first (scripts/test does) or run scripts/install");
    }
    if (!is_root()) {
        SKIP_TEST("mount(8) needs root");
    }
    TempDir t;
    const std::string store = t.path() + "/store", mnt = t.path() + "/mnt";
    make_dir(mnt);
    UnmountGuard guard{mnt};
    CmdResult r = run({"mount", "-t", "fuse.hiodsfs", store, mnt, "-o",
                       "chunking=fixed,chunk_size=4096,allow_other"},
                      {}, 60s);
    INFO("mount -t fuse.hiodsfs (hiodsfs at " << installed << "): " << r.describe());
    REQUIRE(r.ok());
    std::string fstype;
    REQUIRE(mounted_at(mnt, &fstype));
    CHECK(fstype == "fuse.hiodsfs");
    const std::string data = random_bytes(kMiB, 91);
    write_file(mnt + "/f", data);
    CHECK(read_file(mnt + "/f") == data);
    r = run({"umount", mnt}, {}, 60s);
    INFO("umount: " << r.describe());
    REQUIRE(r.ok());
    CHECK_FALSE(mounted_at(mnt));
    // The daemon exits after the unmount and lets go of the store.
    hiodsfs::SpaceCounters c;
    hiodsfs::Status st = read_counters(store, &c, 60s);
    INFO("reading the store after umount: " << st.to_string());
    REQUIRE(st.is_ok());
    CHECK(c.logical_bytes == kMiB);
    CHECK(c.stored_bytes == kMiB);

    // mount(8) passes a wrong option on; it fails and nothing is mounted.
    r = run({"mount", "-t", "fuse.hiodsfs", store, mnt, "-o", "no_such_option=1"}, {}, 60s);
    INFO("mount -t fuse.hiodsfs -o no_such_option=1: " << r.describe());
    CHECK(r.status != 0);
    CHECK_FALSE(mounted_at(mnt));
}

TEST_CASE("every refusal names its reason", "[cli]") {
    TempDir t;
    const std::string bin = daemon_binary();
    struct Case {
        const char* what;
        std::vector<std::string> argv;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {"hiodsfs-stat of a path that does not exist", {HIODSFS_STAT_BIN, t.path() + "/nonexistent"},
         t.path() + "/nonexistent: No such file or directory"},
        {"hiodsfs-fsck of a path that does not exist", {HIODSFS_FSCK_BIN, t.path() + "/nonexistent"},
         "store " + t.path() + "/nonexistent: No such file or directory"},
        {"a chunk size that is not a power of two",
         {bin, t.path() + "/store", t.path() + "/mnt", "-f", "-o", "cdc_avg=3K"},
         "invalid value '3K' for cdc_avg: 3K is 3072 bytes, not a power of two"},
    };
    make_dir(t.path() + "/mnt");
    for (const auto& c : cases) {
        INFO(c.what);
        UnmountGuard guard{t.path() + "/mnt"};
        CmdResult r = run(c.argv, {}, 20s);
        INFO(r.describe());
        CHECK(r.status != 0);
        CHECK(r.status < 128);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(c.expect) != std::string::npos);
    }
    CHECK_FALSE(exists(t.path() + "/store"));
}

// A path holds any byte its maker chose; the daemon's lines (its refusals
// and its log) escape what could end a line or drive a terminal.
TEST_CASE("the daemon's lines hold any path on one line", "[cli][escape]") {
    TempDir t;
    const std::string bin = daemon_binary();
    const std::string file = t.path() + "/a\nhiodsfs: forged \x1b[2K";
    write_file(file, "not a store");
    make_dir(t.path() + "/mnt");
    UnmountGuard guard{t.path() + "/mnt"};
    CmdResult r = run({bin, file, t.path() + "/mnt", "-f"}, {}, 20s);
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("/a\\012hiodsfs: forged \\033[2K") != std::string::npos);
    CHECK(r.err.find('\033') == std::string::npos);
    CHECK_FALSE(mounted_at(t.path() + "/mnt"));
}

TEST_CASE("a mount point that is already mounted is named as such", "[cli]") {
    MountFixture fx;
    write_file(fx.path("f"), "data");  // not empty either: the mount is what matters
    const std::string bin = daemon_binary();
    TempDir t;
    for (const std::string& store : {t.path() + "/other", fx.store()}) {
        INFO("mounting " << store << " over the mount of " << fx.store());
        CmdResult r = run({bin, store, fx.mnt(), "-f"}, {}, 20s);
        INFO(r.describe());
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find("mount point " + fx.mnt() + " is already a mount point (fuse.hiodsfs " + fx.store() +
                         " is mounted there)") != std::string::npos);
        CHECK(r.err.find("not empty") == std::string::npos);
    }
    CHECK_FALSE(exists(t.path() + "/other"));
    CHECK(read_file(fx.path("f")) == "data");
}

TEST_CASE("background_threads=0 with mode=deferred mounts with a one-line warning", "[cli]") {
    MountFixture fx({"mode=deferred", "background_threads=0"});
    write_file(fx.path("f"), "data");
    fx.unmount();
    const std::string log = fx.daemon_log();
    INFO(log);
    CHECK(log.find("hiodsfs: warning: background_threads=0 with mode=deferred: what is written deferred is "
                   "not deduplicated during this mount") != std::string::npos);
    // Written raw and queued for a later mount with workers.
    CHECK(fx.counters().backlog_records >= 1);
}

TEST_CASE("the daemon's threads are named for what they do", "[cli][threads]") {
    MountFixture m({"mode=deferred"});
    write_file(m.path("f"), std::string(4 << 20, 'x'));  // requests, a commit, the pass
    ::sync();
    const std::multiset<std::string> names = thread_names(m.daemon_pid());
    std::string all;
    for (const auto& n : names) all += n + " ";
    INFO("threads: " << all);
    // Every thread the daemon starts itself has a name; only the main
    // thread keeps the program's, and the dedup pass's TBB workers theirs.
    for (const char* want : {"fuse-req", "committer", "mode-control", "seg-flusher", "dedup-pass",
                             "reclaim", "dict-train", "signals"})
        CHECK(names.count(want) >= 1);
    if (std::thread::hardware_concurrency() > 1) CHECK(names.count("digest") >= 1);
    m.unmount();
}
