// An encrypted store whose segments live in Ceph RADOS, through real
// mounts against the test cluster (tests/rados/ceph_cluster.cc): nothing
// written through the mount, file names included, is in any of the pool's
// objects (the metadata's journal and snapshot are sealed like the
// chunks); an empty cache_dir recovers every fsynced file with the key,
// after kill -9 (the journal) and after an unmount (the snapshot);
// without the key, or with another, a mount and hiodsfs-fsck are refused
// with one line; with it fsck checks the store clean. A store made with
// key=ask keeps its key slot in the pool: an empty cache_dir opens with the
// passphrase, and hiodsfs-fsck --change-key changes it there. Skipped,
// saying why, where Ceph is not installed.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>

#include <string>
#include <vector>

#include "../rados/ceph_cluster.h"
#include "../skip.h"
#include "mount_fixture.h"
#include "rados_util.h"
#include "stat_util.h"

namespace hiodsfs::mt {
namespace {

using namespace std::chrono_literals;

const std::string kPoolMarker = "RADOS-MARKER-7e2c94";

std::string pool_marked(std::size_t n, std::uint64_t seed) {
    std::string s = text_like(n, seed);
    for (std::size_t at = 0; at + kPoolMarker.size() < s.size(); at += 1013) s.replace(at, kPoolMarker.size(), kPoolMarker);
    return s;
}

// The pool's objects of store `name` that hold s, read with the rados tool.
std::vector<std::string> pool_objects_holding(const test::CephCluster& c, const MountFixture& fx,
                                              const std::string& name, const std::string& s) {
    std::vector<std::string> found;
    const std::string tmp = fx.scratch("object");
    for (const std::string& o : objects(c, name + ".")) {
        const CmdResult got = rados_cmd(c, {"get", o, tmp});
        INFO(got.describe());
        REQUIRE(got.ok());
        if (read_file(tmp).find(s) != std::string::npos) found.push_back(o);
    }
    return found;
}

std::string pool_key_file(const std::string& dir, const std::string& name, std::uint64_t seed) {
    const std::string path = dir + "/" + name;
    write_file(path, random_bytes(32, seed), 0600);
    REQUIRE(::chmod(path.c_str(), 0600) == 0);
    return path;
}

// The daemon for fx's RADOS store, in the foreground, with `options` and
// standard input from `input`: how a refused mount is seen.
CmdResult run_daemon_with_input(const test::CephCluster& c, const MountFixture& fx, const std::string& source,
                                const std::string& options, const std::string& input) {
    std::string opts;
    for (const std::string& o : rados_options(c, fx, options)) opts += (opts.empty() ? "" : ",") + o;
    return sh(shq(daemon_binary()) + " " + shq(source) + " " + shq(fx.mnt()) + " -f -o " + shq(opts) + " < " +
                  shq(input),
              60s);
}

}  // namespace

TEST_CASE("rados, key=ask: the key slot is in the pool; an empty cache_dir opens with the passphrase; "
          "--change-key changes it there",
          "[mount][rados][encryption]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    TempDir answers;
    auto answer = [&](const std::string& name, const std::string& lines) {
        const std::string path = answers.path() + "/" + name;
        write_file(path, lines, 0600);
        return path;
    };
    const std::string name = fresh_store_name("phrase");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    MountFixture fx({}, false);
    use_rados(fx, cluster, name, "key=ask");
    const std::string first = answer("first", "first words\n");
    fx.set_stdin(first);
    fx.mount();
    const std::string a = pool_marked(2 * kMiB, 3);
    write_file(fx.path(kPoolMarker + "-a"), a);
    fx.unmount();
    CHECK(objects(cluster, name + ".keyslot").size() == 1);
    CHECK_FALSE(std::filesystem::exists(fx.store() + "/KEYSLOT"));
    CHECK(pool_objects_holding(cluster, fx, name, kPoolMarker).empty());
    const CmdResult fsck = sh(shq(HIODSFS_FSCK_BIN) + " " + shq(fx.store()) + " --ceph-conf " + shq(cluster.conf) +
                              " --scrub --key ask < " + shq(answer("check", "first words\n")));
    INFO(fsck.describe());
    CHECK(fsck.status == 0);

    // Another host: an empty cache_dir, the passphrase alone.
    replace_cache_dir(fx);
    fx.mount();
    CHECK(read_file(fx.path(kPoolMarker + "-a")) == a);
    fx.unmount();
    // While it is mounted, the change is refused (the store's lock), and
    // nothing changes.
    fx.mount();
    const std::string change = answer("change", "first words\nsecond words\n");
    const CmdResult busy = sh(shq(HIODSFS_FSCK_BIN) + " --change-key " + shq(source) + " --ceph-conf " +
                              shq(cluster.conf) + " --key ask < " + shq(change));
    INFO(busy.describe());
    CHECK(busy.status != 0);
    CHECK(line_count(busy.err) == 1);
    fx.unmount();
    const CmdResult changed = sh(shq(HIODSFS_FSCK_BIN) + " --change-key " + shq(source) + " --ceph-conf " +
                                 shq(cluster.conf) + " --key ask < " + shq(change));
    INFO(changed.describe());
    CHECK(changed.status == 0);

    replace_cache_dir(fx);
    {
        AbortGuard guard{fx.mnt()};
        const CmdResult old = run_daemon_with_input(cluster, fx, source, "key=ask", first);
        INFO(old.describe());
        CHECK(old.status == 1);
        CHECK(line_count(old.err) == 1);
        CHECK(old.err.find("passphrase is not this store's") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(fx.store() + "/meta"));
    }
    fx.set_stdin(answer("second", "second words\n"));
    fx.mount();
    CHECK(read_file(fx.path(kPoolMarker + "-a")) == a);
    fx.unmount();
}

TEST_CASE("rados, encrypted: nothing written is in the pool; an empty cache_dir recovers the store with the key "
          "only; fsck checks it",
          "[mount][rados][encryption]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    TempDir keys;
    const std::string key = pool_key_file(keys.path(), "store.key", 71), wrong = pool_key_file(keys.path(), "wrong.key", 72);
    const std::string name = fresh_store_name("sealed");
    MountFixture fx({}, false);
    use_rados(fx, cluster, name, "key_file=" + key);
    fx.mount();
    const std::string a = pool_marked(3 * kMiB, 1), b = pool_marked(100 * 1024, 2);
    const std::string file_a = kPoolMarker + "-a", file_b = kPoolMarker + "-b";
    write_file(fx.path(file_a), a);
    REQUIRE(run({"sync", fx.path(file_a)}).ok());
    write_file(fx.path(file_b), b);
    REQUIRE(run({"sync", fx.path(file_b)}).ok());
    fx.crash();  // the pool's journal holds the fsynced files
    CHECK_FALSE(objects(cluster, name + ".journal.").empty());
    CHECK(pool_objects_holding(cluster, fx, name, kPoolMarker).empty());
    replace_cache_dir(fx);

    fx.mount();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("recovered the metadata of rados:" + cluster.pool + "/" + name) != std::string::npos);
    CHECK(read_file(fx.path(file_a)) == a);
    CHECK(read_file(fx.path(file_b)) == b);
    fx.unmount();

    // An unmount leaves a snapshot, sealed as well; another empty
    // cache_dir starts from it.
    CHECK(objects(cluster, name + ".meta.").size() >= 1);
    CHECK(pool_objects_holding(cluster, fx, name, kPoolMarker).empty());
    const CmdResult keyless = run({HIODSFS_FSCK_BIN, fx.store(), "--ceph-conf", cluster.conf});
    CHECK(keyless.status == 8);
    CHECK(line_count(keyless.err) == 1);
    CHECK(keyless.err.find("is encrypted") != std::string::npos);
    const CmdResult fsck = run({HIODSFS_FSCK_BIN, fx.store(), "--ceph-conf", cluster.conf, "--scrub", "--key-file", key});
    INFO(fsck.describe());
    CHECK(fsck.status == 0);
    replace_cache_dir(fx);
    // Without the key, or with another: one line, exit 1, nothing recovered.
    for (const std::string& option : {std::string(), "key_file=" + wrong}) {
        INFO("option: " << option);
        std::vector<std::string> args = {"rados:" + cluster.pool + "/" + name, fx.mnt(), "-f", "-o"};
        std::string opts;
        for (const std::string& o : rados_options(cluster, fx, option)) opts += (opts.empty() ? "" : ",") + o;
        args.push_back(opts);
        const CmdResult r = run_daemon(args, 60s);
        INFO(r.describe());
        CHECK(r.status == 1);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(option.empty() ? "is encrypted" : "not this store's key") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(fx.store() + "/meta"));
    }
    fx.mount();
    CHECK(fx.daemon_log().find("snapshot of record") != std::string::npos);
    CHECK(read_file(fx.path(file_a)) == a);
    CHECK(read_file(fx.path(file_b)) == b);
    fx.unmount();
}

}  // namespace hiodsfs::mt
