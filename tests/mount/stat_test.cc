// hiodsfs-stat against a real mount: every figure of --json checked against
// the truth (file sizes, the segment files, du of the store, the stored
// bytes the data must take) through unique, duplicated, deferred-then-
// drained and deleted data; the same figures mounted and unmounted; the
// output valid against the documented schema; and --estimate against what
// copying a tree into a fresh store really stores.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "mount_fixture.h"
#include "stat/json.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {

json::Value stat_json(const std::string& target, bool check_schema = true) {
    std::vector<std::string> argv = {HIODSFS_STAT_BIN, "--json", "--history", target};
    CmdResult r = run(argv, {}, std::chrono::seconds(60));
    INFO("hiodsfs-stat " << target << ": " << r.describe());
    REQUIRE(r.ok());
    json::Value v;
    Status st = json::parse(r.out, &v);
    INFO(r.out);
    REQUIRE(st);
    if (!check_schema) return v;
    // And it follows the documented schema.
    TempDir t("hiodsfs-stat-json-");
    write_file(t.path() + "/doc.json", r.out);
    CmdResult check = sh("python3 " + shq(HIODSFS_SCHEMA_CHECK) + " " + shq(HIODSFS_SCHEMA) + " <" +
                         shq(t.path() + "/doc.json"));
    INFO("schema check: " << check.out << check.err);
    CHECK(check.ok());
    return v;
}

std::uint64_t field(const json::Value& v, const char* group, const char* name) {
    const json::Value* g = v.get(group);
    REQUIRE(g != nullptr);
    const json::Value* f = g->get(name);
    INFO(group << "." << name);
    REQUIRE(f != nullptr);
    return f->u64();
}

// Polls the mounted figures until pred holds (the daemon publishes every
// control interval); returns the last figures.
json::Value wait_for(const MountFixture& m, const std::function<bool(const json::Value&)>& pred) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
        json::Value v = stat_json(m.mnt(), false);
        if (pred(v) || std::chrono::steady_clock::now() > deadline) return stat_json(m.mnt());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

void fsync_path(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::fsync(fd) == 0);  // commits the whole store
    ::close(fd);
}

std::uint64_t segment_file_bytes(const std::string& store) {
    std::uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(store + "/segments"))
        if (e.is_regular_file()) n += e.file_size();
    return n;
}

std::uint64_t du_bytes(const std::string& dir) {
    CmdResult r = run({"du", "-sB1", dir});
    REQUIRE(r.ok());
    return std::strtoull(r.out.c_str(), nullptr, 10);
}

struct Truth {
    std::uint64_t logical, stored, chunks, files, dead;
};

void check_figures(const json::Value& v, const Truth& t, const std::string& store) {
    CHECK(field(v, "space", "logical_bytes") == t.logical);
    CHECK(field(v, "space", "stored_bytes") == t.stored);
    CHECK(field(v, "chunks", "count") == t.chunks);
    CHECK(field(v, "files", "count") == t.files);
    CHECK(field(v, "space", "dead_bytes") == t.dead);
    CHECK(field(v, "space", "saved_bytes") == t.logical - t.stored);
    CHECK(v.get("space")->get("ratio")->num() ==
          Approx(static_cast<double>(t.logical) / static_cast<double>(t.stored)).epsilon(1e-5));
    CHECK(v.get("chunks")->get("mean_bytes")->num() ==
          Approx(static_cast<double>(t.stored) / static_cast<double>(t.chunks)).epsilon(1e-5));
    const std::uint64_t disk = field(v, "space", "disk_bytes");
    CHECK(disk == segment_file_bytes(store));
    CHECK(field(v, "space", "reclaimable_bytes") == disk - t.stored - 24 * t.chunks);
    CHECK(field(v, "space", "segment_count") == 1);
    const std::uint64_t du = du_bytes(store);
    const std::uint64_t dir = field(v, "space", "store_dir_bytes");
    INFO("du " << du << ", store_dir_bytes " << dir);
    CHECK(dir + 256 * kKiB >= du);
    CHECK(du + 256 * kKiB >= dir);
}

}  // namespace

TEST_CASE("hiodsfs-stat: every figure against the truth, mounted and unmounted", "[mount][stat]") {
    MountFixture m({"chunking=fixed,chunk_size=4K", "mode=inline"});
    const std::string unique = random_bytes(256 * kKiB, 11);
    std::string repeated;
    const std::string block = random_bytes(4 * kKiB, 12);
    for (int i = 0; i < 8; ++i) repeated += block;

    // Unique and duplicated data, written inline.
    write_file(m.path("unique"), unique);
    write_file(m.path("copy"), unique);
    write_file(m.path("repeated"), repeated);
    make_dir(m.path("dir"));
    fsync_path(m.path("unique"));
    Truth t{2 * unique.size() + repeated.size(), unique.size() + block.size(), 64 + 1, 3, 0};
    json::Value v = wait_for(m, [&](const json::Value& x) { return field(x, "space", "logical_bytes") == t.logical; });
    CHECK(v.get("mounted")->boolean);
    CHECK(v.get("mountpoint")->str() == m.mnt());
    CHECK(v.get("store")->str() == m.store());
    CHECK(v.get("activity")->get("mode")->str() == "inline");
    CHECK(v.get("activity")->get("setting")->str() == "inline");
    CHECK(field(v, "files", "inodes") == 5);  // root, dir and three files
    CHECK(field(v, "backlog", "records") == 0);
    check_figures(v, t, m.store());
    // The store path and the mount point give the same figures.
    json::Value by_store = stat_json(m.store());
    CHECK(field(by_store, "space", "logical_bytes") == t.logical);
    CHECK(by_store.get("mountpoint")->str() == m.mnt());

    // Deferred: written raw and queued; nothing drains it (no workers).
    m.unmount();
    m.set_options({"chunking=fixed,chunk_size=4K", "mode=deferred", "background_threads=0"});
    m.mount();
    write_file(m.path("deferred"), unique);
    fsync_path(m.path("deferred"));
    v = wait_for(m, [&](const json::Value& x) { return field(x, "files", "count") == 4; });
    CHECK(v.get("activity")->get("mode")->str() == "deferred");
    CHECK(field(v, "backlog", "records") >= 1);
    CHECK(field(v, "backlog", "bytes") == unique.size());
    CHECK(field(v, "space", "raw_bytes") == unique.size());
    CHECK(field(v, "space", "stored_bytes") == t.stored + unique.size());
    CHECK(field(v, "space", "logical_bytes") == t.logical + unique.size());
    CHECK(v.get("backlog")->get("eta_s")->type == json::Value::Type::kNull);  // nothing drains it

    // Drained: back to exactly what inline stores; the raw copy is dead space.
    m.unmount();
    m.set_options({"chunking=fixed,chunk_size=4K", "mode=inline"});
    m.mount();
    v = wait_for(m, [&](const json::Value& x) { return field(x, "backlog", "records") == 0 && field(x, "space", "raw_bytes") == 0; });
    fsync_path(m.path("deferred"));
    t.logical += unique.size();
    t.files = 4;
    t.dead = unique.size();
    v = wait_for(m, [&](const json::Value& x) { return field(x, "space", "dead_bytes") == t.dead; });
    check_figures(v, t, m.store());

    // Deleted: a file whose chunks others share frees nothing; one whose
    // block is its own turns it into dead, reclaimable space.
    const std::uint64_t reclaimable_before = field(v, "space", "reclaimable_bytes");
    REQUIRE(::unlink(m.path("copy").c_str()) == 0);
    REQUIRE(::unlink(m.path("repeated").c_str()) == 0);
    fsync_path(m.path("unique"));
    t.logical -= unique.size() + repeated.size();
    t.stored -= block.size();
    t.chunks -= 1;
    t.files = 2;
    t.dead += block.size();
    v = wait_for(m, [&](const json::Value& x) { return field(x, "files", "count") == 2 && field(x, "space", "dead_bytes") == t.dead; });
    check_figures(v, t, m.store());
    CHECK(field(v, "space", "reclaimable_bytes") == reclaimable_before + block.size() + 24);

    // Unmounted: the same figures, read from the store itself.
    m.unmount();
    json::Value off = stat_json(m.store());
    CHECK_FALSE(off.get("mounted")->boolean);
    CHECK(off.get("activity")->get("mode")->str() == "not mounted");
    check_figures(off, t, m.store());
    for (const char* g : {"space", "chunks", "files", "backlog"}) {
        for (const auto& [name, value] : v.get(g)->members) {
            if (std::string(g) == "space" && name == "store_dir_bytes") continue;  // du moves a little
            if (std::string(g) == "backlog" && name == "drain_bytes_per_s") continue;  // a rate
            INFO(g << "." << name);
            CHECK(off.get(g)->get(name)->text == value.text);
        }
    }
    CHECK(off.get("read_errors")->u64() == 0);

    // Human output: aligned figures, no colour off a terminal.
    CmdResult text = run({HIODSFS_STAT_BIN, m.store()});
    REQUIRE(text.ok());
    CHECK(text.out.find("not mounted") != std::string::npos);
    CHECK(text.out.find("\033[") == std::string::npos);
    CHECK(text.out.find("ratio ") != std::string::npos);
    // Bad input: one line, non-zero exit.
    CmdResult bad = run({HIODSFS_STAT_BIN, m.dir()});
    CHECK(bad.status == 1);
    CHECK(bad.err.find("neither a hiodsfs store nor a hiodsfs mount point") != std::string::npos);
    CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}

TEST_CASE("hiodsfs-stat --estimate: within 1 % of what a copy really stores; a re-run reads nothing",
          "[mount][stat][estimate]") {
    MountFixture m;  // the daemon's default chunking (CDC)
    // A tree with known duplication: copies, shifted copies (an insertion
    // in the middle) and unique files.
    const std::string tree = m.scratch("tree");
    make_dir(tree);
    make_dir(tree + "/a");
    make_dir(tree + "/b");
    std::uint64_t seed = 100;
    for (int i = 0; i < 6; ++i) {
        std::string data = random_bytes(1 * kMiB + static_cast<std::size_t>(i) * 7777, ++seed);
        write_file(tree + "/a/f" + std::to_string(i), data);
        if (i % 2 == 0) write_file(tree + "/b/copy" + std::to_string(i), data);
        std::string shifted = data.substr(0, data.size() / 2) + "inserted bytes" + data.substr(data.size() / 2);
        if (i % 3 == 0) write_file(tree + "/b/shifted" + std::to_string(i), shifted);
    }
    const std::string cache = m.scratch("estimate.cache");
    // --compare: the first pass does the work of all eight chunkings, so its
    // time is well above the fixed costs (walk, cache fsync) both runs pay.
    CmdResult first = run({HIODSFS_STAT_BIN, "--estimate", "--compare", "--json", "--cache", cache, tree});
    INFO(first.describe());
    REQUIRE(first.ok());
    json::Value e1;
    REQUIRE(json::parse(first.out, &e1));
    const json::Value& r1 = e1.get("results")->items.at(0);
    CHECK(r1.get("chunking")->str() == "cdc:2048/8192/32768");

    CmdResult cp = run({"cp", "-a", tree, m.path("tree")});
    REQUIRE(cp.ok());
    fsync_path(m.path("tree/a/f0"));
    json::Value s = wait_for(m, [&](const json::Value& x) {
        return field(x, "space", "logical_bytes") == r1.get("logical_bytes")->u64();
    });
    const double stored = static_cast<double>(field(s, "space", "stored_bytes"));
    const double estimated = static_cast<double>(r1.get("stored_bytes")->u64());
    INFO("stored " << stored << ", estimated " << estimated);
    CHECK(std::abs(estimated - stored) <= 0.01 * stored);
    CHECK(field(s, "space", "logical_bytes") == r1.get("logical_bytes")->u64());

    CmdResult second = run({HIODSFS_STAT_BIN, "--estimate", "--compare", "--json", "--cache", cache, tree});
    REQUIRE(second.ok());
    json::Value e2;
    REQUIRE(json::parse(second.out, &e2));
    CHECK(e2.get("bytes_read")->u64() == 0);
    CHECK(e2.get("files_read")->u64() == 0);
    INFO("first run " << e1.get("elapsed_s")->num() << " s, second " << e2.get("elapsed_s")->num() << " s");
    CHECK(e2.get("elapsed_s")->num() < e1.get("elapsed_s")->num() / 2);
    CHECK(e2.get("results")->items.size() == 8);
    CHECK(e2.get("results")->items.at(0).get("stored_bytes")->u64() == r1.get("stored_bytes")->u64());

    // The options are the daemon's; a wrong one is one line.
    CmdResult bad = run({HIODSFS_STAT_BIN, "--estimate", "-o", "chunking=fixed,cdc_avg=8K", tree});
    CHECK(bad.status == 1);
    CHECK(bad.err.find("cdc_min, cdc_avg and cdc_max apply to chunking=cdc only") != std::string::npos);
}
