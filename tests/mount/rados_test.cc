// A store whose segments live in Ceph RADOS (rados:POOL/STORE), through
// real mounts of the daemon against the throwaway cluster of
// tests/rados/ceph_cluster.cc (started once per run, on first use): a tree
// copied in reads back byte for byte from a remount whose cache must fetch
// every segment, the store's lock refuses a second daemon, compaction
// removes objects, the command line's errors are one line each, and
// segments that cannot be uploaded stay in the cache directory, and a new
// empty cache_dir recovers the store from RADOS alone (after kill -9: the
// journal; after a clean unmount: the snapshot), and hiodsfs-fsck checks
// the objects against the metadata under the store's lock. Skipped, saying why, where
// Ceph is not installed. librados is loaded when a RADOS store is opened:
// a daemon on a local store has none of Ceph's libraries mapped, and one
// that cannot load librados.so.2 refuses a RADOS store with one line.

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../rados/ceph_cluster.h"
#include "../skip.h"
#include "../stat/schema_check.h"
#include "mount_fixture.h"
#include "rados_util.h"

namespace hiodsfs::mt {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Files that do not deduplicate, so the segments are as large as the data.
void write_random_tree(const std::string& root, std::uint64_t seed) {
    make_dir(root);
    make_dir(root + "/sub");
    write_file(root + "/a.bin", random_bytes(3 * kMiB, seed));
    write_file(root + "/sub/b.bin", random_bytes(2 * kMiB + 12345, seed + 1));
    write_file(root + "/sub/small.txt", "a small file\n");
    REQUIRE(::symlink("sub/b.bin", (root + "/link").c_str()) == 0);
}

// What /proc/PID/maps says the process has mapped.
std::string maps_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    REQUIRE(in);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_CASE("rados: a tree copied in reads back byte for byte from a remount with a tiny cache",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("tree");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    // Two mounts, two trees: each unmount seals its segment and uploads it.
    const std::string ref = fx.scratch("ref");
    make_dir(ref);
    write_random_tree(ref + "/one", 1);
    write_random_tree(ref + "/two", 20);  // seeds apart: no file shares a prefix with another
    REQUIRE(run({"cp", "-a", HIODSFS_SOURCE_DIR "/src", ref + "/one/"}).ok());
    for (const char* tree : {"one", "two"}) {
        fx.mount();
        CmdResult cp = run({"rsync", "-a", ref + "/" + tree, fx.path("")});
        if (cp.status == -1 || cp.status == 127) cp = run({"cp", "-a", ref + "/" + tree, fx.path("")});
        INFO(cp.describe());
        REQUIRE(cp.ok());
        fx.unmount();
    }
    const std::vector<std::string> segs = objects(cluster, name + ".segment.");
    INFO("objects: " << segs.size());
    REQUIRE(segs.size() == 2);

    // 1M holds no segment but the one read last: every tree's segment comes
    // back from RADOS.
    fx.set_options(rados_options(cluster, fx, "cache_size=1M"));
    fx.mount();
    for (const char* tree : {"one", "two"}) {
        CmdResult diff = run({"diff", "-r", "--no-dereference", ref + "/" + tree, fx.path(tree)});
        INFO(diff.describe());
        REQUIRE(diff.ok());
    }
    REQUIRE(wait_for(10s, [&] { return status_field(fx.store(), "cache_misses") >= 2; }));
    REQUIRE(status_field(fx.store(), "fetched_bytes") >= 5 * static_cast<long long>(kMiB));
    REQUIRE(status_field(fx.store(), "upload_failures") == 0);
    // Evicted down to the last segment read (and the empty active one).
    REQUIRE(wait_for(10s, [&] { return status_field(fx.store(), "cached_segments") == 1; }));
    // hiodsfs-stat on the cache directory: the backend, the pool's bytes
    // and the cache's hits and misses, in the documented schema.
    CmdResult stat = run({HIODSFS_STAT_BIN, "--json", fx.store()});
    INFO(stat.describe());
    REQUIRE(stat.ok());
    const nlohmann::json v = nlohmann::json::parse(stat.out);
    CHECK(test::schema_violations(v, test::read_json_file(HIODSFS_SCHEMA)) == std::vector<std::string>{});
    CHECK(v.at("backend") == "rados:" + cluster.pool + "/" + name);
    REQUIRE(v.at("tier").is_object());
    CHECK(v.at("tier").at("segments") == 2);
    CHECK(v.at("tier").at("bytes").get<long long>() >= 10 * static_cast<long long>(kMiB));
    CHECK(v.at("tier").at("cache_misses").get<long long>() >= 2);
    CHECK(v.at("tier").at("cache_hits").get<long long>() > 0);
    fx.unmount();
    // Unmounted, the backend still shows (from FORMAT).
    stat = run({HIODSFS_STAT_BIN, "--json", fx.store()});
    REQUIRE(stat.ok());
    CHECK(nlohmann::json::parse(stat.out).at("backend") == "rados:" + cluster.pool + "/" + name);
    // hiodsfs-fsck on the cache directory, whose FORMAT names the pool:
    // segments only the pool holds are there, not lost.
    CmdResult fsck = run({HIODSFS_FSCK_BIN, fx.store(), "--ceph-conf", cluster.conf});
    INFO(fsck.describe());
    CHECK(fsck.status == 0);
    CHECK(fsck.out.find("rados:" + cluster.pool + "/" + name + ": clean") != std::string::npos);
}

TEST_CASE("rados: hiodsfs-fsck checks the objects against the metadata, and is refused while the store is mounted",
          "[mount][rados][fsck]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("fsck");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    MountFixture fx({}, false);
    use_rados(fx, cluster, name, "cache_size=1M");
    auto fsck = [&](const std::string& cache_dir, std::vector<std::string> extra = {}) {
        std::vector<std::string> argv = {HIODSFS_FSCK_BIN, source, "--cache-dir", cache_dir, "--ceph-conf",
                                         cluster.conf};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run(argv, {}, 120s);
    };
    // Two mounts, two trees: a segment each (sealed and uploaded at unmount).
    const std::string ref = fx.scratch("ref");
    make_dir(ref);
    write_random_tree(ref + "/one", 31);
    write_random_tree(ref + "/two", 52);
    for (const char* tree : {"one", "two"}) {
        fx.mount();
        CmdResult cp = run({"cp", "-a", ref + "/" + tree, fx.path("")});
        INFO(cp.describe());
        REQUIRE(cp.ok());
        if (std::string(tree) == "two") {
            // Mounted: refused at once, in one line naming the daemon.
            const auto began = Clock::now();
            CmdResult r = fsck(fx.store());
            INFO(r.describe());
            CHECK(r.status == 8);
            CHECK(line_count(r.err) == 1);
            CHECK(r.err.find("is in use") != std::string::npos);
            CHECK(r.err.find(host_name_for_test() + " pid " + std::to_string(fx.daemon_pid())) != std::string::npos);
            CHECK(Clock::now() - began < 20s);
        }
        fx.unmount();
    }
    const std::vector<std::string> segs = objects(cluster, name + ".segment.");
    REQUIRE(segs.size() == 2);

    CmdResult r = fsck(fx.store());
    INFO(r.describe());
    CHECK(r.status == 0);
    CHECK(r.out.find(source + ": clean") != std::string::npos);
    r = fsck(fx.store(), {"--scrub"});
    INFO(r.describe());
    CHECK(r.status == 0);
    CHECK(r.out.find("scrubbed ") != std::string::npos);
    // From an empty cache directory, as another host would: the metadata
    // comes from the pool first.
    TempDir other;
    r = fsck(other.path() + "/cache");
    INFO(r.describe());
    CHECK(r.status == 0);
    CHECK(r.out.find("recovered the metadata of " + source) != std::string::npos);
    CHECK(r.out.find(source + ": clean") != std::string::npos);
    // Unlocked at the end: a mount takes the store at once.
    fx.mount();
    REQUIRE(read_file(fx.path("two/sub/small.txt")) == "a small file\n");
    fx.unmount();

    // The first tree's object gone, and no copy in the cache: its files are named.
    for (const auto& e : std::filesystem::directory_iterator(fx.store() + "/segments"))
        std::filesystem::remove(e.path());
    CmdResult rm = run({"rados", "-c", cluster.conf, "-p", cluster.pool, "rm", segs.front()});
    INFO(rm.describe());
    REQUIRE(rm.ok());
    for (const std::string& dir : {fx.store(), other.path() + "/fresh"}) {
        r = fsck(dir);
        INFO(r.describe());
        CHECK(r.status == 4);
        CHECK(r.out.find("which is missing; it holds /one/a.bin bytes 0-") != std::string::npos);
        // (Only the small file, whose chunk both trees share, is hit in the second.)
        CHECK(r.out.find("/two/sub/small.txt") != std::string::npos);
        CHECK(r.out.find("/two/a.bin") == std::string::npos);
    }

    // Options that do not fit the store: one line, exit 8.
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{HIODSFS_FSCK_BIN, source},
          std::vector<std::string>{HIODSFS_FSCK_BIN, fx.scratch("ref"), "--cache-dir", fx.store()},
          std::vector<std::string>{HIODSFS_FSCK_BIN, source, "--cache-dir", fx.store(), "--upgrade"}}) {
        r = run(bad);
        INFO(r.describe());
        CHECK(r.status == 8);
        CHECK(line_count(r.err) == 1);
    }
}

TEST_CASE("rados: a second daemon is refused with one line naming the holder", "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string source = "rados:" + cluster.pool + "/" + fresh_store_name("lock");
    MountFixture first({}, false);
    first.set_source(source);
    first.set_options(rados_options(cluster, first));
    first.mount();
    write_file(first.path("f"), "held\n");

    // Another cache directory and mount point, as a second host would have.
    TempDir other;
    make_dir(other.path() + "/cache");
    make_dir(other.path() + "/mnt");
    const auto began = Clock::now();
    CmdResult r = run_daemon({source, other.path() + "/mnt", "-o",
                              "ceph_conf=" + cluster.conf + ",cache_dir=" + other.path() + "/cache"});
    INFO(r.describe());
    REQUIRE(r.status != 0);
    REQUIRE(line_count(r.err) == 1);
    CHECK(r.err.find("is in use") != std::string::npos);
    CHECK(r.err.find("pid " + std::to_string(first.daemon_pid())) != std::string::npos);
    CHECK(Clock::now() - began < 20s);  // another holder is named at once, not waited for
    // And on the same cache directory, the same.
    r = run_daemon({source, other.path() + "/mnt", "-o",
                    "ceph_conf=" + cluster.conf + ",cache_dir=" + first.store()});
    INFO(r.describe());
    REQUIRE(r.status != 0);
    CHECK(r.err.find("pid " + std::to_string(first.daemon_pid())) != std::string::npos);
    REQUIRE(read_file(first.path("f")) == "held\n");
    first.unmount();
    // Released at unmount: mounts again at once.
    first.mount();
    REQUIRE(read_file(first.path("f")) == "held\n");
    first.unmount();
}

TEST_CASE("rados: after kill -9 of the daemon the next mount on this host takes the lock over at once",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("crash");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);  // a lease of 60 s, which the next mount does not wait out
    fx.mount();
    const std::string data = random_bytes(1 * kMiB + 77, 11);
    write_file(fx.path("synced"), data);
    REQUIRE(run({"sync", fx.path("synced")}).ok());
    const pid_t dead = fx.daemon_pid();
    fx.crash();
    const auto began = Clock::now();
    fx.mount();
    CHECK(Clock::now() - began < 20s);
    CHECK(fx.daemon_log().find("breaking the lock of '" + host_name_for_test() + " pid " +
                               std::to_string(dead) + " boot ") != std::string::npos);
    REQUIRE(read_file(fx.path("synced")) == data);
    fx.unmount();
}

TEST_CASE("rados: after kill -9 and the loss of the cache_dir, an empty one recovers every fsynced file",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("lost");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    const std::string a = random_bytes(3 * kMiB + 5, 31), b = random_bytes(200 * 1024, 32);
    write_file(fx.path("a.bin"), a);
    REQUIRE(run({"sync", fx.path("a.bin")}).ok());
    make_dir(fx.path("sub"));
    write_file(fx.path("sub/b.bin"), b);
    REQUIRE(run({"sync", fx.path("sub/b.bin")}).ok());
    write_file(fx.path("unsynced"), "may be lost\n");
    fx.crash();
    replace_cache_dir(fx);

    fx.mount();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("recovered the metadata of rados:" + cluster.pool + "/" + name) != std::string::npos);
    CHECK(read_file(fx.path("a.bin")) == a);
    CHECK(read_file(fx.path("sub/b.bin")) == b);
    CmdResult stat = run({HIODSFS_STAT_BIN, "--json", fx.store()});
    INFO(stat.describe());
    REQUIRE(stat.ok());
    CHECK(nlohmann::json::parse(stat.out).at("backend") == "rados:" + cluster.pool + "/" + name);
    // It goes on as a store: a write, a remount on the same cache_dir.
    const std::string c = random_bytes(1 * kMiB, 33);
    write_file(fx.path("c.bin"), c);
    REQUIRE(run({"sync", fx.path("c.bin")}).ok());
    fx.remount();
    CHECK(read_file(fx.path("a.bin")) == a);
    CHECK(read_file(fx.path("c.bin")) == c);
    fx.unmount();

    // A clean unmount left a snapshot: yet another empty cache_dir starts from it.
    CHECK(objects(cluster, name + ".manifest.").size() == 1);
    CHECK(objects(cluster, name + ".meta.").size() >= 1);  // its part
    replace_cache_dir(fx);
    fx.mount();
    CHECK(fx.daemon_log().find("snapshot of record") != std::string::npos);
    CHECK(read_file(fx.path("a.bin")) == a);
    CHECK(read_file(fx.path("sub/b.bin")) == b);
    CHECK(read_file(fx.path("c.bin")) == c);
    fx.unmount();
}

TEST_CASE("rados: a cache_dir that lost FORMAT, or FORMAT and its metadata, mounts with every file",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("format");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    const std::string a = random_bytes(3 * kMiB + 7, 41);
    write_file(fx.path("a.bin"), a);
    fx.unmount();
    const std::string format = read_file(fx.store() + "/FORMAT");

    // FORMAT alone: written again from the metadata's copy.
    REQUIRE(::unlink((fx.store() + "/FORMAT").c_str()) == 0);
    fx.mount();
    CHECK(read_file(fx.path("a.bin")) == a);
    fx.unmount();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("FORMAT was missing") != std::string::npos);
    CHECK(read_file(fx.store() + "/FORMAT") == format);

    // FORMAT and meta/, with the cached segments and a status.json (what a
    // crashed daemon leaves) still there: the metadata comes back from the pool.
    REQUIRE(::unlink((fx.store() + "/FORMAT").c_str()) == 0);
    remove_tree(fx.store() + "/meta");
    write_file(fx.store() + "/status.json", "{}\n", 0600);
    fx.mount();
    CHECK(fx.daemon_log().find("recovered the metadata of rados:" + cluster.pool + "/" + name) != std::string::npos);
    CHECK(read_file(fx.path("a.bin")) == a);
    fx.unmount();
    CHECK(read_file(fx.store() + "/FORMAT") == format);
}

TEST_CASE("rados: kill -9 in the middle of fsynced writes, then an empty cache_dir: every fsync that "
          "returned is there",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("midway");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    // The writer logs, outside the mount, each file whose fsync returned.
    const std::string log = fx.scratch("acknowledged");
    const std::string writer = R"(
import hashlib, os, random, sys
mnt, log = sys.argv[1], sys.argv[2]
rng = random.Random(41)
out = open(log, "a")
for i in range(100000):
    size = rng.choice([1, 4096, 65536, 700000, 3000000])
    data = rng.randbytes(size)
    path = "%s/d%d/f%d" % (mnt, i % 7, i)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    out.write("d%d/f%d %s\n" % (i % 7, i, hashlib.sha256(data).hexdigest()))
    out.flush()
)";
    write_file(fx.scratch("writer.py"), writer);
    std::thread bg([&] { run({"python3", fx.scratch("writer.py"), fx.path(""), log}, {}, 120s); });
    // Let it write a while: about 90 MiB in 120 files or more, past a 64 MiB
    // segment, so a sealed one is uploaded while commits push the next.
    REQUIRE(wait_for(90s, [&] { return exists(log) && read_file(log).size() > 120 * 80; }));
    // The writer stops at its first ENOTCONN; it must be gone before the
    // mount point is bare again.
    fx.crash([&] { bg.join(); });
    replace_cache_dir(fx);
    fx.mount();
    INFO(fx.daemon_log());
    std::istringstream acked(read_file(log));
    std::size_t files = 0;
    for (std::string line; std::getline(acked, line);) {
        const std::string rel = line.substr(0, line.find(' '));
        const std::string sum = line.substr(line.find(' ') + 1);
        CmdResult r = run({"sha256sum", fx.path(rel)});
        INFO(rel << ": " << r.describe());
        REQUIRE(r.ok());
        CHECK(r.out.substr(0, 64) == sum);
        ++files;
    }
    CHECK(files >= 120);
    fx.unmount();
}

TEST_CASE("rados: a lease that cannot be renewed stops the store: changes fail with EIO",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("lease");
    MountFixture fx({}, false);
    fx.set_source("rados:" + cluster.pool + "/" + name);
    // Renewed every second.
    fx.set_options({"ceph_conf=" + cluster.conf, "cache_dir=" + fx.store(), "rados_timeout=1", "rados_lease=4"});
    fx.mount();
    write_file(fx.path("before"), "kept\n");
    REQUIRE(run({"sync", fx.path("before")}).ok());
    // Another client breaks the lock, as an operator taking the store over would.
    CmdResult info = rados_cmd(cluster, {"lock", "info", name + ".lock", "hiodsfs"});
    INFO(info.describe());
    REQUIRE(info.ok());
    const nlohmann::json lockers = nlohmann::json::parse(info.out).at("lockers");
    REQUIRE(lockers.size() == 1);
    const std::string cookie = lockers[0].at("cookie");
    // The daemon's process: host name, pid, the boot and the pid namespace.
    CHECK(cookie.rfind(host_name_for_test() + " pid " + std::to_string(fx.daemon_pid()) + " boot ",
                       0) == 0);
    CHECK(cookie.find(" pidns ") != std::string::npos);
    CmdResult broke = rados_cmd(cluster, {"lock", "break", name + ".lock", "hiodsfs",
                                          lockers[0].at("name"), "--lock-cookie", cookie});
    INFO(broke.describe());
    REQUIRE(broke.ok());
    // The next renewal finds the lock gone and the daemon stops the store.
    REQUIRE(wait_for(10s, [&] { return fx.daemon_log().find("could not be renewed") != std::string::npos; }));
    CmdResult dd = sh("dd if=/dev/zero of=" + shq(fx.path("after")) + " bs=4k count=1 conv=fsync");
    INFO(dd.describe());
    CHECK(dd.status != 0);
    CHECK(dd.err.find("Input/output error") != std::string::npos);
    CHECK(fx.unmount_status() != 0);  // the close cannot commit either, and says why
    // The lock is free; what was fsynced is all there.
    fx.set_options(rados_options(cluster, fx));
    fx.mount();
    CHECK(read_file(fx.path("before")) == "kept\n");
    CHECK_FALSE(exists(fx.path("after")));
    fx.unmount();
}

TEST_CASE("rados: the command line's errors are one line and a non-zero exit", "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    TempDir t;
    make_dir(t.path() + "/cache");
    make_dir(t.path() + "/mnt");
    const std::string mnt = t.path() + "/mnt", cache = "cache_dir=" + t.path() + "/cache";
    const std::string conf = "ceph_conf=" + cluster.conf;
    const std::string source = "rados:" + cluster.pool + "/" + fresh_store_name("cli");
    struct Case {
        std::vector<std::string> args;
        std::string says;
    };
    // A cluster nobody listens for: a ceph.conf naming a port that is closed.
    const std::string dead_conf = t.path() + "/dead.conf";
    write_file(dead_conf, "[global]\nmon_host = 127.0.0.1:9\nkeyring = " + cluster.keyring + "\n");
    const std::vector<Case> cases = {
        {{source, mnt, "-o", conf}, "needs -o cache_dir=DIR"},
        {{source, mnt, "-o", conf + "," + cache + ",cache_size=12Q"}, "invalid value '12Q' for cache_size"},
        {{source, mnt, "-o", conf + "," + cache + ",cache_size=1K"}, "at least 1M"},
        {{"rados:" + cluster.pool, mnt, "-o", conf + "," + cache}, "is not rados:POOL/STORE"},
        {{t.path() + "/cache", mnt, "-o", conf}, "are for a store given as rados:POOL/STORE"},
        {{"rados:no-such-pool/x", mnt, "-o", conf + "," + cache}, "opening pool 'no-such-pool'"},
        {{source, mnt, "-o", "ceph_conf=" + t.path() + "/missing.conf," + cache}, "missing.conf"},
        {{source, mnt, "-o", "ceph_conf=" + dead_conf + "," + cache + ",rados_timeout=3"}, "connecting to"},
        {{source, mnt, "-o", conf + "," + cache + ",rados_timeout=10,rados_lease=20"}, "more than twice"},
    };
    for (const Case& c : cases) {
        const auto began = Clock::now();
        CmdResult r = run_daemon(c.args, 60s);
        const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
        INFO(c.args[0] << " " << c.args.back() << " -> " << r.describe() << " in " << seconds << " s");
        CHECK(r.status != 0);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(c.says) != std::string::npos);
        CHECK(seconds < 30);  // the unreachable cluster within its timeout and start-up
    }
    // Nothing was mounted and no store made.
    CHECK_FALSE(exists(t.path() + "/cache/FORMAT"));
}

TEST_CASE("rados: mount.fuse3, which mount -t fuse.hiodsfs and fstab run, mounts rados:POOL/STORE",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    if (which("mount.fuse3").empty()) SKIP_TEST("no mount.fuse3 (the fuse3 package) here");
    if (!is_root()) SKIP_TEST("mount.fuse3 mounts as root here");
    TempDir t;
    const std::string mnt = t.path() + "/mnt", cache = t.path() + "/cache";
    make_dir(mnt);
    make_dir(cache);
    const std::string source = "rados:" + cluster.pool + "/" + fresh_store_name("helper");
    // mount(8) runs the helper with the options of an fstab line as they are,
    // _netdev among them; the daemon is found on PATH, here the build's.
    const std::string bin_dir = daemon_binary().substr(0, daemon_binary().rfind('/'));
    CmdResult r = sh("PATH=" + shq(bin_dir) + ":\"$PATH\" mount.fuse3 " + shq(source) + " " + shq(mnt) +
                     " -t hiodsfs -o " + shq("_netdev,ceph_conf=" + cluster.conf + ",cache_dir=" + cache));
    struct Unmount {
        std::string mnt;
        ~Unmount() { run({"fusermount3", "-uz", mnt}); }
    } unmount_at_end{mnt};
    INFO(r.describe());
    REQUIRE(r.ok());
    CmdResult mounts = run({"findmnt", "-n", "-o", "SOURCE,FSTYPE", mnt});
    INFO(mounts.describe());
    CHECK(mounts.out.find(source + " fuse.hiodsfs") != std::string::npos);
    write_file(mnt + "/f", "through the helper\n");
    REQUIRE(run({"umount", mnt}).ok());
    // umount does not wait for the daemon: the upload at its exit is awaited.
    REQUIRE(wait_for(30s, [&] { return objects(cluster, source.substr(source.find('/') + 1) + ".segment.").size() == 1; }));
}

TEST_CASE("rados: compaction deletes the objects of the segments it removes", "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("reclaim");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    write_file(fx.path("gone.bin"), random_bytes(4 * kMiB, 7));
    fx.unmount();  // sealed and uploaded: segment 1
    fx.mount();
    write_file(fx.path("kept.bin"), random_bytes(1 * kMiB, 8));
    fx.unmount();  // segment 2
    const std::vector<std::string> both = objects(cluster, name + ".segment.");
    REQUIRE(both.size() == 2);
    fx.mount();
    REQUIRE(::unlink(fx.path("gone.bin").c_str()) == 0);
    // Segment 1 holds nothing live now: the reclaimer deletes it, object first.
    REQUIRE(wait_for(60s, [&] { return objects(cluster, name + ".segment.").size() == 1; }));
    CHECK(objects(cluster, name + ".segment.").front() == both.back());
    REQUIRE(read_file(fx.path("kept.bin")) == random_bytes(1 * kMiB, 8));
    fx.unmount();
}

TEST_CASE("rados: segments that cannot be uploaded stay in the cache directory", "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(shared);
    // A cluster of its own, stopped under the mounted store.
    test::OwnCephCluster own("memstore");
    const std::string conf = own.cluster().conf;
    INFO(own.cluster().error);
    REQUIRE(own.cluster().error.empty());

    MountFixture fx({}, false);
    fx.set_source("rados:" + own.cluster().pool + "/cut");
    fx.set_options({"ceph_conf=" + conf, "cache_dir=" + fx.store(), "rados_timeout=3"});
    fx.mount();
    const std::string data = random_bytes(3 * kMiB, 9);
    write_file(fx.path("f"), data);
    REQUIRE(run({"sync", fx.path("f")}).ok());
    REQUIRE(own.down().empty());
    // An fsync must reach RADOS: it fails with EIO (within rados_timeout).
    CmdResult dd = sh("dd if=/dev/urandom of=" + shq(fx.path("g")) + " bs=64k count=1 conv=fsync");
    INFO(dd.describe());
    CHECK(dd.status != 0);
    CHECK(dd.err.find("Input/output error") != std::string::npos);
    // The unmount seals the segment; its upload fails, and the daemon says so.
    const int status = fx.unmount_status();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("to be uploaded at the next mount") != std::string::npos);
    (void)status;  // the lock cannot be released either; the exit says nothing more
    // Every byte is still in the cache directory.
    std::uint64_t segment_bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(fx.store() + "/segments"))
        segment_bytes += e.file_size();
    REQUIRE(segment_bytes >= data.size());
    SpaceCounters c = fx.counters();
    REQUIRE(c.logical_bytes == data.size());
}

TEST_CASE("rados: the cluster stopped and restarted under a mounted store: EIO meanwhile, then it goes on",
          "[mount][rados]") {
    REQUIRE_CEPH_CLUSTER(shared);
    // On bluestore, which keeps the objects across the restart.
    test::OwnCephCluster own("bluestore");
    const test::CephCluster& cluster = own.cluster();
    INFO(cluster.error);
    REQUIRE(cluster.error.empty());
    MountFixture fx({}, false);
    fx.set_source("rados:" + cluster.pool + "/" + fresh_store_name("restart"));
    // A lease shorter than the outage: it lapses and must be taken again.
    fx.set_options({"ceph_conf=" + cluster.conf, "cache_dir=" + fx.store(), "rados_timeout=3", "rados_lease=8"});
    fx.mount();
    const std::string a = random_bytes(3 * kMiB + 1, 51), b = random_bytes(1 * kMiB, 52),
                      c = random_bytes(2 * kMiB + 3, 53);
    REQUIRE(write_and_fsync(fx.path("a.bin"), a) == 0);

    REQUIRE(own.down().empty());
    // What the cache holds reads on; an fsync needs the cluster: EIO, in bounded time.
    CHECK(read_file(fx.path("a.bin")) == a);
    const auto asked = Clock::now();
    CHECK(write_and_fsync(fx.path("b.bin"), b) == EIO);
    CHECK(Clock::now() - asked < 60s);
    std::this_thread::sleep_for(10s);  // past the lease
    REQUIRE(own.up().empty());

    // The daemon takes its lock again and commits what waited.
    bool resumed = false;
    for (const auto until = Clock::now() + 120s; !resumed && Clock::now() < until;) {
        resumed = write_and_fsync(fx.path("c.bin"), c) == 0;
        if (!resumed) std::this_thread::sleep_for(1s);  // each EIO is a line of the daemon's log
    }
    INFO(fx.daemon_log());
    REQUIRE(resumed);
    CHECK(fx.daemon_log().find("could not be renewed") != std::string::npos);
    CHECK(fx.daemon_log().find("is taken again; writes resume") != std::string::npos);
    CHECK(read_file(fx.path("b.bin")) == b);
    fx.unmount();

    // From the pool alone, in an empty cache_dir: every file.
    replace_cache_dir(fx);
    fx.mount();
    CHECK(read_file(fx.path("a.bin")) == a);
    CHECK(read_file(fx.path("b.bin")) == b);
    CHECK(read_file(fx.path("c.bin")) == c);
    fx.unmount();
}

TEST_CASE("librados: a daemon on a local store has no Ceph library mapped", "[mount][librados]") {
    MountFixture fx;
    write_file(fx.path("f"), "local\n");
    const std::string maps = maps_of(fx.daemon_pid());
    CHECK(maps.find("libfuse3.so") != std::string::npos);  // the maps are the daemon's, and read whole
    CHECK(maps.find("librados") == std::string::npos);
    CHECK(maps.find("libceph-common") == std::string::npos);
    fx.unmount();
}

TEST_CASE("librados: a daemon on a RADOS store loads librados when it opens the store", "[mount][rados][librados]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    MountFixture fx({}, false);
    use_rados(fx, cluster, fresh_store_name("loads"));
    fx.mount();
    CHECK(maps_of(fx.daemon_pid()).find("/librados.so.2") != std::string::npos);
    fx.unmount();
}

TEST_CASE("rados: the segment uploader and the lease renewer run as named threads", "[mount][rados][threads]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    MountFixture fx({}, false);
    use_rados(fx, cluster, fresh_store_name("threads"));
    fx.mount();
    const std::multiset<std::string> names = thread_names(fx.daemon_pid());
    std::string all;
    for (const auto& n : names) all += n + " ";
    INFO("threads: " << all);
    CHECK(names.count("seg-uploader") == 1);
    CHECK(names.count("rados-lease") == 1);
    fx.unmount();
}

TEST_CASE("librados: a RADOS store where librados.so.2 cannot be loaded is one line and a non-zero exit",
          "[mount][rados][librados]") {
#ifndef HIODSFS_HAVE_RADOS
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)");
#else
    TempDir t;
    make_dir(t.path() + "/cache");
    make_dir(t.path() + "/mnt");
    make_dir(t.path() + "/lib");
    // The dynamic loader looks in LD_LIBRARY_PATH first: there librados.so.2
    // is a file that is no library, as a broken installation would have it.
    write_file(t.path() + "/lib/librados.so.2", "");
    CmdResult r = run({daemon_binary(), "rados:pool/store", t.path() + "/mnt", "-o",
                       "ceph_conf=" + t.path() + "/ceph.conf,cache_dir=" + t.path() + "/cache"},
                      {"LD_LIBRARY_PATH=" + t.path() + "/lib"}, 60s);
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("rados: cannot load librados.so.2 (") != std::string::npos);
    CHECK(r.err.find("needs the librados2 package") != std::string::npos);
    CHECK_FALSE(exists(t.path() + "/cache/FORMAT"));
#endif
}

}  // namespace
}  // namespace hiodsfs::mt
