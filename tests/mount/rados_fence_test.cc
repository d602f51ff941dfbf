// The RADOS store's lock as a fence the cluster enforces (issue 43), through
// real mounts against the once-per-run cluster of tests/rados/ceph_cluster.cc:
// a daemon paused (SIGSTOP) past its lease while another takes the store
// over is refused by the cluster when it wakes, and the other's data stays
// intact; a stale cache_dir mounted again after another host went on with
// the store does not shadow that host's segment, nor uploads its own dead
// one; a segment's object removed while the cache holds it is reported by
// hiodsfs-fsck, uploaded by --repair and by the next mount (which says so);
// a daemon of another pid namespace with this host name keeps its lock; a
// pool written before holder epochs is read as it is. hiodsfs-fsck finds
// the store clean after each. Skipped, saying why, where Ceph is not
// installed.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../rados/ceph_cluster.h"
#include "../skip.h"
#include "mount_fixture.h"
#include "rados_util.h"

namespace hiodsfs::mt {
namespace {

using namespace std::chrono_literals;

// The store's lock holders now (an expired lease has none, nor a lock object
// not made yet): `field` of each ("cookie", "addr").
std::vector<std::string> lockers(const test::CephCluster& c, const std::string& name,
                                 const std::string& field = "cookie") {
    CmdResult info = rados_cmd(c, {"lock", "info", name + ".lock", "hiodsfs"});
    INFO(info.describe());
    if (!info.ok() && info.err.find("No such file or directory") != std::string::npos)
        return {};  // not made yet
    if (info.timed_out) return {"(the rados tool did not answer)"};  // asked again by wait_for
    REQUIRE(info.ok());
    const nlohmann::json lock = nlohmann::json::parse(info.out);
    std::vector<std::string> out;
    for (const auto& l : lock.at("lockers")) out.push_back(l.at(field));
    return out;
}

// Whether every thread of pid is stopped (SIGSTOP has taken effect).
bool all_threads_stopped(pid_t pid) {
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
        const std::string stat = read_file_or_empty(t.path().string() + "/stat");
        const std::size_t paren = stat.rfind(')');
        if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'T') return false;
    }
    return !ec;
}

// A field of the store's holder record (the content of STORE.lock).
std::string holder_field(const test::CephCluster& c, const std::string& name,
                         const std::string& key) {
    CmdResult got = rados_cmd(c, {"get", name + ".lock", "/dev/stdout"});
    INFO(got.describe());
    REQUIRE(got.ok());
    std::istringstream in(got.out);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
    return "";
}

// "v1:127.0.0.1:0/123" -> "127.0.0.1:0/123", as `ceph osd blocklist ls` lists it.
std::string bare_address(const std::string& address) {
    const auto colon = address.find(':');
    return address.rfind("v", 0) == 0 && colon != std::string::npos ? address.substr(colon + 1)
                                                                    : address;
}

// hiodsfs-fsck finds the store clean through this cache directory.
void check_fsck_clean(const test::CephCluster& c, const std::string& name,
                      const std::string& cache_dir) {
    CmdResult r = fsck_rados(c, name, cache_dir);
    INFO(r.describe());
    CHECK(r.status == 0);
    CHECK(r.out.find("rados:" + c.pool + "/" + name + ": clean") != std::string::npos);
}

std::vector<std::string> fence_options(const test::CephCluster& c, const MountFixture& fx) {
    // A write may start until 2 s before the lease ends; renewed every 1.25 s.
    return {"ceph_conf=" + c.conf, "cache_dir=" + fx.store(), "rados_timeout=2", "rados_lease=5"};
}

TEST_CASE(
    "rados fence: a daemon paused past its lease while another takes the store over is "
    "refused by the cluster when it wakes; the other's data is intact",
    "[mount][rados][fence]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("paused");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    MountFixture first({}, false);
    first.set_source(source);
    first.set_options(fence_options(cluster, first));
    first.mount();
    const std::string a = random_bytes(300000, 61), b = random_bytes(200000, 62),
                      late = random_bytes(100000, 63);
    REQUIRE(write_and_fsync(first.path("a"), a) == 0);
    // Its client's address, as the lock lists it, and as its holder record
    // names it for the next holder.
    const std::vector<std::string> addresses = lockers(cluster, name, "addr");
    REQUIRE(addresses.size() == 1);
    const std::string address = holder_field(cluster, name, "address");
    CHECK(bare_address(address) == addresses.front());

    // Paused; a writer's requests wait in the kernel's queue meanwhile.
    struct Paused {
        pid_t pid;
        std::thread writer;
        int err = -1;
        ~Paused() {
            ::kill(pid, SIGCONT);
            if (writer.joinable()) writer.join();
        }
    } paused{first.daemon_pid(), {}};
    REQUIRE(::kill(paused.pid, SIGSTOP) == 0);
    // Stopped: each of its threads stops as it next runs, and one that is
    // running (the request thread polling for the next request) could
    // still answer a request sent at once.
    REQUIRE(wait_for(30s, [&] { return all_threads_stopped(paused.pid); }));
    paused.writer = std::thread([&] { paused.err = write_and_fsync(first.path("late"), late); });

    // Its lease runs out; another host takes the store over.
    REQUIRE(wait_for(60s, [&] { return lockers(cluster, name).empty(); }));
    MountFixture second({}, false);
    second.set_source(source);
    second.set_options(fence_options(cluster, second));
    second.mount();
    INFO(second.daemon_log());
    CHECK(second.daemon_log().find("fenced the last holder of " + source + " (epoch 1") !=
          std::string::npos);
    CHECK(second.daemon_log().find("blocklisted " + address) != std::string::npos);
    CmdResult listed = run({"ceph", "-c", cluster.conf, "osd", "blocklist", "ls"});
    INFO(listed.describe());
    CHECK(listed.out.find(addresses.front()) != std::string::npos);
    REQUIRE(write_and_fsync(second.path("b"), b) == 0);

    // The first wakes up: what it had queued, and anything after, fails.
    REQUIRE(::kill(paused.pid, SIGCONT) == 0);
    paused.writer.join();
    CHECK(paused.err == EIO);
    REQUIRE(wait_for(30s, [&] {
        return first.daemon_log().find("was taken over by another client, which fenced this one") !=
               std::string::npos;
    }));
    INFO(first.daemon_log());
    CHECK(first.daemon_log().find("Cannot send after transport endpoint shutdown") !=
          std::string::npos);
    CHECK(write_and_fsync(first.path("later"), late) == EIO);
    CHECK(read_file(second.path("b")) == b);
    CHECK(read_file(second.path("a")) == a);
    (void)first.unmount_status();  // its close cannot commit: it says why, and exits non-zero
    second.unmount();

    // From the pool alone: everything the second daemon had, nothing of the first's late writes.
    MountFixture third({}, false);
    use_rados(third, cluster, name);
    third.mount();
    CHECK(read_file(third.path("a")) == a);
    CHECK(read_file(third.path("b")) == b);
    CHECK_FALSE(exists(third.path("late")));
    CHECK_FALSE(exists(third.path("later")));
    third.unmount();
    check_fsck_clean(cluster, name, third.store());
}

TEST_CASE(
    "rados fence: a stale cache_dir mounted again after another host went on does not "
    "shadow that host's segment, nor upload its own dead one",
    "[mount][rados][fence]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("stale");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    // Nothing is committed but what is fsynced.
    const std::string quiet = "commit_interval=3600000,commit_writes=0";
    MountFixture host_a({}, false);
    use_rados(host_a, cluster, name, quiet);
    host_a.mount();
    const std::string a = random_bytes(100000, 71), unsynced = random_bytes(4 * kMiB, 72),
                      b = random_bytes(1 * kMiB, 73);
    REQUIRE(write_and_fsync(host_a.path("a"), a) == 0);
    host_a.unmount();  // its segment sealed and uploaded: the next mount writes a new one
    host_a.mount();
    write_file(host_a.path("unsynced"), unsynced);  // in the active segment's file, never committed
    const auto local_segments = [](const MountFixture& fx) {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(fx.store() + "/segments"))
            if (e.path().extension() == ".seg") out.push_back(e.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    };
    std::string active;
    REQUIRE(wait_for(30s, [&] {
        for (const std::string& f : local_segments(host_a))
            if (std::filesystem::file_size(host_a.store() + "/segments/" + f) >= 2 * kMiB)
                active = f;
        return !active.empty();
    }));
    host_a.crash();
    const std::string active_object = name + ".segment." + active.substr(0, 8);
    CHECK(objects(cluster, active_object).empty());  // in host A's directory only

    // Host B: an empty cache_dir; it fsyncs "b" and is killed before any snapshot.
    MountFixture host_b({}, false);
    use_rados(host_b, cluster, name, quiet);
    host_b.mount();
    CHECK(read_file(host_b.path("a")) == a);
    REQUIRE(write_and_fsync(host_b.path("b"), b) == 0);
    host_b.crash();

    // Host A mounts its old cache_dir again.
    host_a.mount();
    INFO(host_a.daemon_log());
    CHECK(read_file(host_a.path("a")) == a);
    CHECK(read_file(host_a.path("b")) == b);
    CHECK_FALSE(exists(host_a.path("unsynced")));
    host_a.unmount();
    // Its dead segment is gone, and was never uploaded.
    const std::vector<std::string> after = local_segments(host_a);
    CHECK(std::find(after.begin(), after.end(), active) == after.end());
    CHECK(objects(cluster, active_object).empty());
    check_fsck_clean(cluster, name, host_a.store());
}

TEST_CASE(
    "rados fence: a segment's object removed while the cache holds it: fsck reports it, "
    "--repair and the next mount upload it again",
    "[mount][rados][fence][fsck]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("lostobj");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    const std::string data = random_bytes(3 * kMiB, 81);
    write_file(fx.path("f"), data);
    fx.unmount();
    const std::vector<std::string> segs = objects(cluster, name + ".segment.");
    REQUIRE(segs.size() == 1);
    REQUIRE(rados_cmd(cluster, {"rm", segs.front()}).ok());

    CmdResult r = fsck_rados(cluster, name, fx.store());
    INFO(r.describe());
    CHECK(r.status == 4);
    CHECK(r.out.find("ERROR: segment 1 holds bytes the metadata refers to (up to byte ") !=
          std::string::npos);
    CHECK(r.out.find("but " + source + " has no object of it") != std::string::npos);
    r = fsck_rados(cluster, name, fx.store(), {"--repair"});
    INFO(r.describe());
    CHECK(r.status == 1);
    CHECK(objects(cluster, name + ".segment.") == segs);
    r = fsck_rados(cluster, name, fx.store());
    CHECK(r.status == 0);

    // Gone again: the next mount uploads it from the cache, and says so.
    REQUIRE(rados_cmd(cluster, {"rm", segs.front()}).ok());
    fx.mount();
    CHECK(read_file(fx.path("f")) == data);
    fx.unmount();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("hiodsfs: segment 1 holds bytes the metadata refers to, but " +
                               source + " has no object of it: uploading it again from " +
                               fx.store() + "/segments") != std::string::npos);
    CHECK(objects(cluster, name + ".segment.") == segs);
    check_fsck_clean(cluster, name, fx.store());
}

TEST_CASE("rados fence: a daemon of another pid namespace with this host name keeps its lock",
          "[mount][rados][fence]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    if (which("unshare").empty()) SKIP_TEST("no unshare (util-linux) here");
    if (!is_root()) SKIP_TEST("a pid namespace of its own needs root");
    const std::string name = fresh_store_name("pidns");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    TempDir t;
    for (const char* d : {"/cache-a", "/mnt-a", "/cache-b", "/mnt-b"}) make_dir(t.path() + d);
    // A container's daemon: its own pid namespace (its pid there is one this
    // namespace has none of) and mount namespace, the same host name.
    const std::string log = t.path() + "/a.log";
    const pid_t a = ::fork();
    REQUIRE(a >= 0);
    if (a == 0) {
        ::setsid();
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        const std::string bin = daemon_binary();
        const std::string opts =
            "ceph_conf=" + cluster.conf + ",cache_dir=" + t.path() + "/cache-a";
        ::execlp("unshare", "unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                 "echo 300000 > /proc/sys/kernel/ns_last_pid && \"$0\" \"$@\"", bin.c_str(),
                 source.c_str(), (t.path() + "/mnt-a").c_str(), "-f", "-o", opts.c_str(),
                 static_cast<char*>(nullptr));
        _exit(127);
    }
    struct Stop {
        pid_t pid;
        ~Stop() {
            ::kill(-pid, SIGTERM);  // the daemon unmounts and lets the store go
            int status = 0;
            ::waitpid(pid, &status, 0);
        }
    } stop{a};
    std::string holder;
    REQUIRE(wait_for(60s, [&] {
        const std::vector<std::string> cookies = lockers(cluster, name);
        if (!cookies.empty()) holder = cookies.front();
        return !holder.empty();
    }));
    INFO("holder " << holder << "\n" << read_file(log));
    CHECK(holder.rfind(host_name_for_test() + " pid 300", 0) == 0);

    // A daemon of this namespace: the holder's pid means nothing here, and
    // its lock is never broken.
    CmdResult r = run_daemon({source, t.path() + "/mnt-b", "-o",
                              "ceph_conf=" + cluster.conf + ",cache_dir=" + t.path() + "/cache-b"});
    if (r.status == 0)
        run({"fusermount3", "-u", t.path() + "/mnt-b"});  // it should not have mounted
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("is in use") != std::string::npos);
    CHECK(r.err.find(holder) != std::string::npos);
    CHECK(lockers(cluster, name) == std::vector<std::string>{holder});
}

TEST_CASE(
    "rados fence: a pool written before holder epochs is read as it is, and goes on with "
    "them",
    "[mount][rados][fence]") {
    REQUIRE_CEPH_CLUSTER(cluster);
    const std::string name = fresh_store_name("epochless");
    const std::string source = "rados:" + cluster.pool + "/" + name;
    MountFixture fx({}, false);
    use_rados(fx, cluster, name);
    fx.mount();
    const std::string a = random_bytes(500000, 91), b = random_bytes(300000, 92);
    REQUIRE(write_and_fsync(fx.path("a"), a) == 0);
    fx.unmount();  // a snapshot
    fx.mount();
    REQUIRE(write_and_fsync(fx.path("b"), b) == 0);
    fx.crash();  // b in the journal only

    // The names an older hiodsfs gave its objects: no epoch, the manifest
    // "meta", and an empty lock object.
    const std::string prefix = name + ".";
    const std::string tmp = fx.scratch("object");
    const auto rename_object = [&](const std::string& from, const std::string& to) {
        REQUIRE(rados_cmd(cluster, {"get", from, tmp}).ok());
        REQUIRE(rados_cmd(cluster, {"put", to, tmp}).ok());
        REQUIRE(rados_cmd(cluster, {"rm", from}).ok());
    };
    std::size_t renamed = 0;
    for (const std::string& o : objects(cluster, prefix)) {
        const std::string rest = o.substr(prefix.size());
        if (rest.rfind("journal.", 0) == 0 && rest.size() == 8 + 16 + 9) {
            rename_object(o, o.substr(0, o.size() - 9));  // journal.S.E -> journal.S
        } else if (rest.rfind("meta.", 0) == 0 && rest.size() == 5 + 16 + 9 + 5) {
            rename_object(o, prefix + rest.substr(0, 5 + 16) +
                                 rest.substr(5 + 16 + 9));  // meta.S.E.P -> meta.S.P
        } else if (rest.rfind("manifest.", 0) == 0) {
            rename_object(o, prefix + "meta");
        } else {
            continue;
        }
        ++renamed;
    }
    CHECK(renamed >= 3);  // a manifest, a part, a journal object
    write_file(tmp, "");
    REQUIRE(rados_cmd(cluster, {"put", name + ".lock", tmp}).ok());

    // A new host recovers it from those objects.
    replace_cache_dir(fx);
    fx.mount();
    INFO(fx.daemon_log());
    CHECK(fx.daemon_log().find("recovered the metadata of " + source) != std::string::npos);
    CHECK(read_file(fx.path("a")) == a);
    CHECK(read_file(fx.path("b")) == b);
    fx.unmount();
    // Its snapshot at unmount superseded every object of the old names.
    for (const std::string& o : objects(cluster, prefix)) {
        INFO(o);
        CHECK(o != prefix + "meta");
        if (o.rfind(prefix + "journal.", 0) == 0) CHECK(o.size() == prefix.size() + 8 + 16 + 9);
        if (o.rfind(prefix + "meta.", 0) == 0) CHECK(o.size() == prefix.size() + 5 + 16 + 9 + 5);
    }
    CHECK(holder_field(cluster, name, "epoch") == "1");
    check_fsck_clean(cluster, name, fx.store());
}

}  // namespace
}  // namespace hiodsfs::mt
