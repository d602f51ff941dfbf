// The store directory under a root daemon (docs/architecture.md, "Who may
// steer what the daemon opens"): a store that another user owns, or that
// group or others may write, is refused; no symbolic or hard link planted
// in a store is followed by the daemon, hiodsfs-fsck or hiodsfs-stat; a
// store inside its own mount point is refused before anything is mounted,
// however it is spelled; the daemon reaches its store through the
// descriptor it opened before the mount; a second daemon on a mounted store
// is refused at once, however the store is spelled.
//
// A daemon whose store lies inside its own mount waits on itself, and so
// does everything that walks that path: every mount point here is under an
// AbortGuard (the FUSE connection is aborted through fusectl before the
// unmount), and every daemon command has a timeout.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {

// The daemon in the background (no -f): it exits 0 once the mount is live,
// or 1 when start-up failed, so a refusal is an exit status and no test
// waits on a mount.
CmdResult start(const std::string& store, const std::string& mnt,
                const std::vector<std::string>& opts = {}) {
    std::vector<std::string> argv = {daemon_binary(), store, mnt};
    for (const auto& o : opts) argv.insert(argv.end(), {"-o", o});
    return run(argv, {}, 60s);
}

const std::string kPrecious = "precious, not the daemon's\n";

// A start that must have failed at once with one line saying `says`,
// leaving nothing mounted at mnt (Catch2-asserting).
void check_refused(const CmdResult& r, const std::string& says, const std::string& mnt) {
    INFO(r.describe());
    CHECK_FALSE(r.timed_out);
    CHECK(r.status == 1);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK_FALSE(mounted_at(mnt));
}

std::string listing(const std::string& dir) { return sh("cd " + shq(dir) + " && ls -A").out; }

bool is_symlink(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// A bind mount of from at to, taken down however the test ends.
struct BindMount {
    AbortGuard guard;
    BindMount(const std::string& from, const std::string& to) : guard{to} {
        make_dir(to);
        CmdResult r = run({"mount", "--bind", from, to}, {}, 60s);
        INFO("mount --bind: " << r.describe());
        REQUIRE(r.ok());
    }
};

long long now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace

TEST_CASE("a store directory another user owns or others may write is refused with one line",
          "[mount][store-dir]") {
    if (!is_root()) SKIP_TEST("chown needs root");
    TempDir t;
    const std::string mnt = t.path() + "/mnt", store = t.path() + "/store";
    make_dir(mnt);
    struct Case {
        const char* what;
        uid_t uid;
        mode_t mode;
        const char* says;
    };
    for (const Case& c :
         {Case{"owned by nobody", kUser, 0700, "owned by uid 65534"},
          Case{"mode 0777", 0, 0777, "writable by group and others"},
          Case{"mode 0775", 0, 0775, "writable by group"},
          Case{"mode 1777, sticky as /tmp is", 0, 01777, "writable by group and others"}}) {
        INFO(c.what);
        remove_tree(store);
        make_dir(store);
        REQUIRE(::chown(store.c_str(), c.uid, c.uid) == 0);
        REQUIRE(::chmod(store.c_str(), c.mode) == 0);
        AbortGuard guard{mnt};
        CmdResult r = start(store, mnt);
        check_refused(r, c.says, mnt);
        CHECK(r.err.find("unsafe_store_dir") != std::string::npos);
        CHECK(listing(store).empty());
        CHECK((stat_of(store).st_mode & 07777) == c.mode);
    }
    // Its owner's word: -o unsafe_store_dir takes it (and leaves its mode).
    ForegroundDaemon d{store, mnt};
    d.start({"unsafe_store_dir"});
    write_file(mnt + "/f", "data");
    d.stop();
    CHECK((stat_of(store).st_mode & 07777) == 01777);
    CHECK(stat_of(store + "/FORMAT").st_uid == 0);
}

TEST_CASE("links planted in a store are followed by neither the daemon nor fsck nor stat",
          "[mount][store-dir]") {
    MountFixture fx({"control_interval=200"});
    write_file(fx.path("f"), "data");
    fx.unmount();
    const std::string victim = fx.scratch("victim"), elsewhere = fx.scratch("elsewhere");
    write_file(victim, kPrecious, 0644);
    const std::string store = fx.store();
    auto plant = [&](const std::string& name, const std::string& target, bool hard = false) {
        const std::string at = store + "/" + name;
        ::unlink(at.c_str());
        INFO("planting " << at);
        REQUIRE((hard ? ::link(target.c_str(), at.c_str())
                      : ::symlink(target.c_str(), at.c_str())) == 0);
    };
    auto refused = [&](const std::string& names) {
        AbortGuard guard{fx.mnt()};
        check_refused(start(store, fx.mnt()), names, fx.mnt());
        CHECK(read_file(victim) == kPrecious);
    };

    SECTION(
        "lock, as a symbolic and as a hard link: refused by the daemon, fsck --repair and "
        "hiodsfs-stat") {
        for (bool hard : {false, true}) {
            INFO((hard ? "a hard link" : "a symbolic link"));
            plant("lock", victim, hard);
            refused(store + "/lock");
            CmdResult r = run({HIODSFS_FSCK_BIN, "--repair", store}, {}, 120s);
            INFO(r.describe());
            CHECK(r.status == 8);
            CHECK(line_count(r.err) == 1);
            CHECK(read_file(victim) == kPrecious);
            r = run({HIODSFS_STAT_BIN, store}, {}, 120s);
            INFO(r.describe());
            CHECK(r.status == 1);
            CHECK(read_file(victim) == kPrecious);
            REQUIRE(::unlink((store + "/lock").c_str()) == 0);
        }
    }
    SECTION(
        "status.json.tmp and FORMAT.tmp, symbolic or hard links: replaced, never written through") {
        for (bool hard : {false, true}) {
            INFO((hard ? "hard links" : "symbolic links"));
            plant("status.json.tmp", victim, hard);
            plant("FORMAT.tmp", victim, hard);
            const long long since = now_ns();
            fx.mount();
            // A status published by this daemon, after the plant.
            bool published = false;
            for (int i = 0; i < 600 && !published; ++i) {
                published = status_field(store, "unix_time_ns") > since;
                if (!published) std::this_thread::sleep_for(100ms);
            }
            CHECK(published);
            CHECK(read_file(fx.path("f")) == "data");
            fx.unmount();
            CHECK(read_file(victim) == kPrecious);
            CHECK_FALSE(is_symlink(store + "/FORMAT"));
            CHECK_FALSE(is_symlink(store + "/status.json"));
            CHECK(stat_of(victim).st_nlink == 1);
        }
    }
    SECTION(
        "FORMAT, segments, meta and meta/data.mdb as symbolic links: refused, nothing written "
        "there") {
        make_dir(elsewhere);
        struct Case {
            const char* name;
            bool dir;
        };
        for (const Case& c : {Case{"FORMAT", false}, Case{"segments", true}, Case{"meta", true},
                              Case{"meta/data.mdb", false}}) {
            INFO(c.name);
            const std::string at = store + "/" + c.name,
                              moved = elsewhere + "/" + std::string(c.dir ? "d" : "f");
            REQUIRE(::rename(at.c_str(), moved.c_str()) == 0);
            REQUIRE(::symlink(moved.c_str(), at.c_str()) == 0);
            const std::string before =
                sh("cd " + shq(elsewhere) + " && find . -printf '%p %s %T@\\n' | sort").out;
            refused(at);
            CmdResult r = run({HIODSFS_FSCK_BIN, "--repair", store}, {}, 120s);
            INFO(r.describe());
            CHECK(r.status == 8);
            CHECK(line_count(r.err) == 1);
            CHECK(sh("cd " + shq(elsewhere) + " && find . -printf '%p %s %T@\\n' | sort").out ==
                  before);
            REQUIRE(::unlink(at.c_str()) == 0);
            REQUIRE(::rename(moved.c_str(), at.c_str()) == 0);
        }
        fx.mount();
        CHECK(read_file(fx.path("f")) == "data");
    }
    SECTION("status.json as a symbolic link: hiodsfs-stat does not read through it") {
        write_file(
            victim,
            R"({"events":[{"kind":"switch","reason":"SECRET-OF-THE-VICTIM"}],"now_ns":1,"unix_time_ns":1})");
        plant("status.json", victim);
        CmdResult r = run({HIODSFS_STAT_BIN, "--json", store}, {}, 120s);
        INFO(r.describe());
        CHECK(r.ok());
        CHECK(r.out.find("SECRET-OF-THE-VICTIM") == std::string::npos);
    }
}

TEST_CASE("links nobody plants in a 0777 store: refused; with unsafe_store_dir never followed",
          "[mount][store-dir]") {
    if (!is_root()) SKIP_TEST("acting as nobody needs root");
    TempDir t;
    const std::string mnt = t.path() + "/mnt", store = t.path() + "/store";
    const std::string victim = t.path() + "/victim", victim2 = t.path() + "/victim2";
    make_dir(mnt);
    write_file(victim, kPrecious, 0644);
    write_file(victim2, kPrecious, 0644);
    // A store left 0777 (its owner said unsafe_store_dir once).
    make_dir(store);
    REQUIRE(::chmod(store.c_str(), 0777) == 0);
    {
        ForegroundDaemon d{store, mnt};
        d.start({"unsafe_store_dir"});
        write_file(mnt + "/f", "data");
        d.stop();
    }
    // Anyone may replace the names in it: nobody plants two links.
    REQUIRE(run_as(kUser, kGroup, [&] {
                return ::unlink((store + "/lock").c_str()) == 0 &&
                               ::symlink(victim.c_str(), (store + "/lock").c_str()) == 0 &&
                               ::symlink(victim2.c_str(), (store + "/status.json.tmp").c_str()) == 0
                           ? 0
                           : errno;
            }) == 0);
    {
        AbortGuard guard{mnt};
        check_refused(start(store, mnt), "writable by group and others", mnt);
    }
    {
        AbortGuard guard{mnt};
        check_refused(start(store, mnt, {"unsafe_store_dir"}), store + "/lock", mnt);
    }
    CHECK(read_file(victim) == kPrecious);
    REQUIRE(run_as(kUser, kGroup,
                   [&] { return ::unlink((store + "/lock").c_str()) == 0 ? 0 : errno; }) == 0);
    ForegroundDaemon d{store, mnt};
    d.start({"unsafe_store_dir", "control_interval=200"});
    CHECK(read_file(mnt + "/f") == "data");
    bool published = false;
    for (int i = 0; i < 600 && !published; ++i) {
        published = status_field(store, "pid") == d.pid;
        if (!published) std::this_thread::sleep_for(100ms);
    }
    CHECK(published);
    d.stop();
    CHECK(read_file(victim) == kPrecious);
    CHECK(read_file(victim2) == kPrecious);
    CHECK_FALSE(is_symlink(store + "/status.json.tmp"));
}

TEST_CASE("a store or cache_dir in its own mount point is refused however it is spelled",
          "[mount][store-dir]") {
    if (!is_root()) SKIP_TEST("bind mounts need root");
    TempDir t;
    const std::string bin = daemon_binary();
    const std::string mnt = t.path() + "/mnt";
    make_dir(mnt);
    REQUIRE(::symlink(mnt.c_str(), (t.path() + "/link").c_str()) == 0);
    BindMount bind(mnt, t.path() + "/bind");
    struct Case {
        const char* what;
        std::vector<std::string> argv;
        std::string store;  // must not be made
    };
    const std::vector<Case> cases = {
        {"below it", {bin, mnt + "/inner", mnt}, mnt + "/inner"},
        {"the mount point itself", {bin, mnt, mnt}, mnt + "/FORMAT"},
        {"relative paths",
         {"/bin/sh", "-c", "cd " + shq(t.path()) + " && exec " + shq(bin) + " mnt/inner mnt"},
         mnt + "/inner"},
        {"through a symbolic link", {bin, t.path() + "/link/inner", mnt}, mnt + "/inner"},
        {"through a bind mount", {bin, t.path() + "/bind/inner", mnt}, mnt + "/inner"},
        {"a cache_dir below it",
         {bin, "rados:pool/store", mnt, "-o", "cache_dir=" + mnt + "/cache"},
         mnt + "/cache"},
    };
    for (const Case& c : cases) {
        INFO("hiodsfs with a store " << c.what);
        AbortGuard guard{mnt};
        CmdResult r = run(c.argv, {}, 60s);
        check_refused(r, "mount point " + mnt, mnt);
        CHECK(r.err.find("wait on itself") != std::string::npos);
        if (mounted_at(mnt)) continue;  // the guard takes it down
        CHECK_FALSE(exists(c.store));
        // What a wrong start made there, out of the next case's way.
        sh("find " + shq(mnt) + " -mindepth 1 -delete");
    }
    // Beside the mount point, and with the mount point's name as a prefix: mounted.
    ForegroundDaemon d{mnt + "-store", mnt};
    d.start({});
    write_file(mnt + "/f", "data");
    d.stop();
}

TEST_CASE("the daemon reaches its store through its descriptor: a renamed parent changes nothing",
          "[mount][store-dir]") {
    TempDir t;
    make_dir(t.path() + "/a");
    const std::string mnt = t.path() + "/mnt";
    make_dir(mnt);
    ForegroundDaemon d{t.path() + "/a/store", mnt};
    d.start({"control_interval=200"});
    write_file(mnt + "/one", "before the rename");
    REQUIRE(::rename((t.path() + "/a").c_str(), (t.path() + "/b").c_str()) == 0);
    const std::string store = t.path() + "/b/store";
    const long long renamed = now_ns();

    // df: the figures of the store's file system, wherever its path went.
    struct statvfs through {
    }, backing{};
    CHECK(::statvfs(mnt.c_str(), &through) == 0);
    REQUIRE(::statvfs(store.c_str(), &backing) == 0);
    CHECK(through.f_blocks * through.f_frsize == backing.f_blocks * backing.f_frsize);
    // Writes, an fsync and the status the daemon publishes go on.
    const std::string data = random_bytes(4 * kMiB, 7);
    write_file(mnt + "/two", data);
    const int fd = ::open((mnt + "/two").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    CHECK(::fsync(fd) == 0);  // a commit, or a record in the fsync log
    ::close(fd);
    bool published = false;
    for (int i = 0; i < 600 && !published; ++i) {
        published = status_field(store, "unix_time_ns") > renamed;
        if (!published) std::this_thread::sleep_for(100ms);
    }
    CHECK(published);
    d.stop();
    CHECK_FALSE(exists(t.path() + "/a"));

    ForegroundDaemon again{store, mnt};
    again.start({});
    CHECK(read_file(mnt + "/one") == "before the rename");
    CHECK(read_file(mnt + "/two") == data);
    again.stop();
}

TEST_CASE("a second daemon on a mounted store is refused at once however it is spelled",
          "[mount][store-dir]") {
    if (!is_root()) SKIP_TEST("bind mounts need root");
    MountFixture fx;
    write_file(fx.path("f"), "data");
    TempDir t;
    const std::string mnt2 = t.path() + "/mnt2";
    make_dir(mnt2);
    REQUIRE(::symlink(fx.store().c_str(), (t.path() + "/link").c_str()) == 0);
    BindMount bind(fx.store(), t.path() + "/bind");
    for (const std::string& spelled :
         {fx.store(), t.path() + "/link", t.path() + "/bind", fx.store() + "/."}) {
        INFO("a second daemon on " << spelled);
        AbortGuard guard{mnt2};
        // Well under the 30 s a daemon waits for one that was just unmounted.
        check_refused(run({daemon_binary(), spelled, mnt2, "-f"}, {}, 20s), "in use", mnt2);
    }
    CHECK(read_file(fx.path("f")) == "data");
}
