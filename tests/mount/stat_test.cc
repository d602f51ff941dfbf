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
#include <fstream>
#include <thread>

#include "mount_fixture.h"
#include "stat_util.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;
using nlohmann::json;

namespace {

std::uint64_t segment_file_bytes(const std::string& store) {
    std::uint64_t n = 0;
    std::error_code ec;
    // A segment compaction deletes meanwhile counts as gone, not as an error.
    for (const auto& e : std::filesystem::directory_iterator(store + "/segments")) {
        const std::uintmax_t size = e.file_size(ec);
        if (!ec && e.is_regular_file(ec)) n += size;
    }
    return n;
}

struct Truth {
    std::uint64_t logical, stored, chunks, files, dead;
};

void check_figures(const json& v, const Truth& t, const std::string& store) {
    CHECK(field(v, "space", "logical_bytes") == t.logical);
    CHECK(field(v, "space", "stored_bytes") == t.stored);
    CHECK(field(v, "chunks", "count") == t.chunks);
    CHECK(field(v, "files", "count") == t.files);
    CHECK(field(v, "space", "dead_bytes") == t.dead);
    CHECK(field(v, "space", "saved_bytes") == t.logical - t.stored);
    CHECK(v.at("space").at("ratio").get<double>() ==
          Approx(static_cast<double>(t.logical) / static_cast<double>(t.stored)).epsilon(1e-5));
    CHECK(v.at("chunks").at("mean_bytes").get<double>() ==
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
    json v = wait_for_stat(
        m.mnt(), [&](const json& x) { return field(x, "space", "logical_bytes") == t.logical; });
    CHECK(v["mounted"] == true);
    CHECK(v["mountpoint"] == m.mnt());
    CHECK(v["store"] == m.store());
    CHECK(v["activity"]["mode"] == "inline");
    CHECK(v["activity"]["setting"] == "inline");
    CHECK(field(v, "files", "inodes") == 5);  // root, dir and three files
    CHECK(field(v, "backlog", "records") == 0);
    check_figures(v, t, m.store());
    // The store path and the mount point give the same figures.
    json by_store = stat_json(m.store());
    CHECK(field(by_store, "space", "logical_bytes") == t.logical);
    CHECK(by_store["mountpoint"] == m.mnt());

    // Deferred: written raw and queued; nothing drains it (no workers).
    m.unmount();
    m.set_options({"chunking=fixed,chunk_size=4K", "mode=deferred", "background_threads=0"});
    m.mount();
    write_file(m.path("deferred"), unique);
    fsync_path(m.path("deferred"));
    v = wait_for_stat(m.mnt(), [&](const json& x) { return field(x, "files", "count") == 4; });
    CHECK(v["activity"]["mode"] == "deferred");
    CHECK(field(v, "backlog", "records") >= 1);
    CHECK(field(v, "backlog", "bytes") == unique.size());
    CHECK(field(v, "space", "raw_bytes") == unique.size());
    CHECK(field(v, "space", "stored_bytes") == t.stored + unique.size());
    CHECK(field(v, "space", "logical_bytes") == t.logical + unique.size());
    CHECK(v["backlog"]["eta_s"].is_null());  // nothing drains it

    // Drained: back to exactly what inline stores; the raw copy is dead space.
    m.unmount();
    m.set_options({"chunking=fixed,chunk_size=4K", "mode=inline"});
    m.mount();
    v = wait_for_stat(m.mnt(), [&](const json& x) {
        return field(x, "backlog", "records") == 0 && field(x, "space", "raw_bytes") == 0;
    });
    fsync_path(m.path("deferred"));
    t.logical += unique.size();
    t.files = 4;
    t.dead = unique.size();
    v = wait_for_stat(m.mnt(),
                      [&](const json& x) { return field(x, "space", "dead_bytes") == t.dead; });
    check_figures(v, t, m.store());

    // Deleted: a file whose chunks others share frees nothing; one whose
    // block is its own turns it into dead, reclaimable space.
    const std::uint64_t reclaimable_before = field(v, "space", "reclaimable_bytes");
    const std::uint64_t disk_before = field(v, "space", "disk_bytes");
    REQUIRE(::unlink(m.path("copy").c_str()) == 0);
    REQUIRE(::unlink(m.path("repeated").c_str()) == 0);
    fsync_path(m.path("unique"));
    t.logical -= unique.size() + repeated.size();
    t.stored -= block.size();
    t.chunks -= 1;
    t.files = 2;
    t.dead += block.size();
    v = wait_for_stat(m.mnt(), [&](const json& x) {
        return field(x, "files", "count") == 2 && field(x, "space", "dead_bytes") == t.dead;
    });
    check_figures(v, t, m.store());
    // The fsync appended only its log record (docs/architecture.md, "The
    // fsync log"), dead space from the start.
    const std::uint64_t log_record = field(v, "space", "disk_bytes") - disk_before;
    CHECK(log_record > 24);
    CHECK(log_record < 4096);
    CHECK(field(v, "space", "reclaimable_bytes") == reclaimable_before + block.size() + 24 + log_record);

    // Mounted, the backlog has its default limit: a quarter of the free space.
    CHECK(field(v, "backlog", "limit_bytes") > 0);
    // Unmounted: the same figures, read from the store itself.
    m.unmount();
    json off = stat_json(m.store());
    CHECK(off["mounted"] == false);
    CHECK(off["activity"]["mode"] == "not mounted");
    check_figures(off, t, m.store());
    for (const char* g : {"space", "chunks", "files", "backlog"}) {
        for (const auto& [name, value] : v[g].items()) {
            if (std::string(g) == "space" && name == "store_dir_bytes") continue;  // du moves a little
            if (std::string(g) == "backlog" && name == "drain_bytes_per_s") continue;  // a rate
            if (std::string(g) == "backlog" && name == "limit_bytes") continue;        // the daemon's
            INFO(g << "." << name);
            CHECK(off[g][name] == value);
        }
    }
    CHECK(off["read_errors"] == 0);

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
    json e1 = json::parse(first.out, nullptr, false);
    REQUIRE_FALSE(e1.is_discarded());
    const json r1 = e1["results"].at(0);
    CHECK(r1["chunking"] == "cdc:2048/8192/32768");

    CmdResult cp = run({"cp", "-a", tree, m.path("tree")});
    REQUIRE(cp.ok());
    fsync_path(m.path("tree/a/f0"));
    json s = wait_for_stat(m.mnt(), [&](const json& x) {
        return field(x, "space", "logical_bytes") == r1["logical_bytes"].get<std::uint64_t>();
    });
    const double stored = static_cast<double>(field(s, "space", "stored_bytes"));
    const double estimated = r1["stored_bytes"].get<double>();
    INFO("stored " << stored << ", estimated " << estimated);
    CHECK(std::abs(estimated - stored) <= 0.01 * stored);
    CHECK(field(s, "space", "logical_bytes") == r1["logical_bytes"].get<std::uint64_t>());

    CmdResult second = run({HIODSFS_STAT_BIN, "--estimate", "--compare", "--json", "--cache", cache, tree});
    REQUIRE(second.ok());
    json e2 = json::parse(second.out, nullptr, false);
    REQUIRE_FALSE(e2.is_discarded());
    CHECK(e2["bytes_read"] == 0);
    CHECK(e2["files_read"] == 0);
    const double first_s = e1["elapsed_s"].get<double>(), second_s = e2["elapsed_s"].get<double>();
    INFO("first run " << first_s << " s, second " << second_s << " s");
    CHECK(second_s < first_s / 2);
    CHECK(e2["results"].size() == 8);
    CHECK(e2["results"].at(0)["stored_bytes"] == r1["stored_bytes"]);

    // The options are the daemon's; a wrong one is one line.
    CmdResult bad = run({HIODSFS_STAT_BIN, "--estimate", "-o", "chunking=fixed,cdc_avg=8K", tree});
    CHECK(bad.status == 1);
    CHECK(bad.err.find("cdc_min, cdc_avg and cdc_max apply to chunking=cdc only") != std::string::npos);
}

// The memory bounds through the daemon's options: small enough here that a
// few fsynced files make the committer commit groups early (by writes, or
// by the index pages they dirty) and the daemon unmap LMDB's pages; every
// byte reads back, before and after a remount.
TEST_CASE("commit_writes or meta_dirty, and meta_resident through a mount: early commits, unmapped pages, data intact",
          "[mount][stat]") {
    std::vector<std::string> options{"chunking=fixed", "chunk_size=4096", "control_interval=200", "mode=inline"};
    bool trimmed = false;
    SECTION("commit_writes, meta_resident") {
        options.insert(options.end(), {"commit_writes=256", "meta_dirty=0", "meta_resident=1M"});
        trimmed = true;
    }
    SECTION("meta_dirty alone") {
        // 3 000 chunk records: some 50 pages of them.
        options.insert(options.end(), {"commit_writes=0", "meta_dirty=64K"});
    }
    MountFixture m(options);
    std::vector<std::string> data;
    for (int i = 0; i < 12; ++i) {
        data.push_back(random_bytes(kMiB + 4096 * static_cast<std::size_t>(i), 500 + i));
        const std::string path = m.path("f" + std::to_string(i));
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, data.back().data(), data.back().size()) == static_cast<ssize_t>(data.back().size()));
        REQUIRE(::fsync(fd) == 0);
        REQUIRE(::close(fd) == 0);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    long long early = -1, trims = -1;
    while (std::chrono::steady_clock::now() < deadline) {
        early = status_field(m.store(), "early_commits");
        trims = status_field(m.store(), "resident_trims");
        if (early > 0 && (trims > 0 || !trimmed)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    INFO("daemon log: " << m.daemon_log());
    CHECK(early > 0);
    CHECK((trims > 0) == trimmed);
    for (int i = 0; i < 12; ++i) CHECK(read_file(m.path("f" + std::to_string(i))) == data[i]);
    m.remount();
    for (int i = 0; i < 12; ++i) CHECK(read_file(m.path("f" + std::to_string(i))) == data[i]);
}

TEST_CASE("unmount packs the metadata: smaller file, the daemon says so, files intact; meta_compact=0 leaves it",
          "[mount][stat]") {
    // The same tree into two stores, one with compaction off.
    std::uint64_t sizes[2] = {};
    for (int packed = 0; packed < 2; ++packed) {
        MountFixture m(packed ? std::vector<std::string>{} : std::vector<std::string>{"meta_compact=0"});
        // Files in random directories in random order: B-tree pages split part full.
        std::uint64_t state = 77;
        std::vector<std::pair<std::string, std::string>> files;
        for (int d = 0; d < 40; ++d) make_dir(m.path("d" + std::to_string(d)));
        for (int i = 0; i < 2000; ++i) {
            const std::string p = "d" + std::to_string(splitmix64(state) % 40) + "/f" + std::to_string(i);
            files.emplace_back(p, random_bytes(100 + splitmix64(state) % 9000, 900 + i));
            write_file(m.path(p), files.back().second);
        }
        m.unmount();
        INFO("daemon log: " << m.daemon_log());
        sizes[packed] = static_cast<std::uint64_t>(stat_of(m.store() + "/meta/data.mdb").st_size);
        CHECK((m.daemon_log().find("metadata compacted: ") != std::string::npos) == (packed == 1));
        CHECK_FALSE(exists(m.store() + "/meta/data.mdb.compact"));
        m.mount();
        for (const auto& [p, want] : files) CHECK(read_file(m.path(p)) == want);
        m.unmount();
        CmdResult r = run({HIODSFS_FSCK_BIN, m.store()});
        INFO(r.describe());
        CHECK(r.status == 0);
    }
    INFO("metadata without compaction " << sizes[0] << " bytes, packed " << sizes[1]);
    CHECK(sizes[1] <= sizes[0] * 9 / 10);
}

namespace {

// The address space the daemon maps data.mdb in: meta_map's, not 1 TiB.
std::vector<std::uint64_t> data_mdb_mappings(pid_t pid, const std::string& store) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::vector<std::uint64_t> sizes;
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find(store + "/meta/data.mdb") == std::string::npos) continue;
        const std::uint64_t from = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        const std::uint64_t to = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
        sizes.push_back(to - from);
    }
    return sizes;
}

}  // namespace

TEST_CASE("meta_map maps the metadata in that much address space, and the store works in it",
          "[mount][stat]") {
    MountFixture m({"meta_map=64M"});
    const std::string data = random_bytes(4 * kMiB, 77);
    write_file(m.path("f"), data);
    const std::vector<std::uint64_t> sizes = data_mdb_mappings(m.daemon_pid(), m.store());
    INFO("mappings of data.mdb: " << sizes.size());
    REQUIRE_FALSE(sizes.empty());
    CHECK(std::find(sizes.begin(), sizes.end(), 64ull << 20) != sizes.end());
    for (std::uint64_t s : sizes) CHECK(s <= 64ull << 20);
    m.remount();
    CHECK(read_file(m.path("f")) == data);
}

TEST_CASE(
    "dictionary_min: a mounted store trains a compression dictionary, hiodsfs-stat counts it, and "
    "every file "
    "reads back after a remount",
    "[mount][stat][compression]") {
    MountFixture m({"compression=zstd:3", "dictionary_min=1M"});
    // Text-like files, compressible and each its own.
    std::map<std::string, std::string> files;
    for (int i = 0; i < 4; ++i) {
        const std::string name = "before" + std::to_string(i);
        files[name] = text_like(512 * kKiB, 100 + static_cast<std::uint64_t>(i));
        write_file(m.path(name), files[name]);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    json v = stat_json(m.mnt(), false);
    while (field(v, "space", "dictionaries") == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        v = stat_json(m.mnt(), false);
    }
    CHECK(field(stat_json(m.mnt()), "space", "dictionaries") == 1);
    for (int i = 0; i < 2; ++i) {
        const std::string name = "after" + std::to_string(i);
        files[name] = text_like(256 * kKiB, 200 + static_cast<std::uint64_t>(i));
        write_file(m.path(name), files[name]);
    }
    m.unmount();
    CHECK(m.daemon_log().find("compression dictionary 1 trained") != std::string::npos);
    CHECK(field(stat_json(m.store()), "space", "dictionaries") == 1);
    CmdResult text_out = run({HIODSFS_STAT_BIN, m.store()});
    CHECK(text_out.out.find("1 dictionary") != std::string::npos);
    CmdResult scrub = run({HIODSFS_FSCK_BIN, m.store(), "--scrub"});
    INFO(scrub.describe());
    CHECK(scrub.status == 0);
    m.mount();
    for (const auto& [name, data] : files) {
        INFO(name);
        CHECK(read_file(m.path(name)) == data);
    }
}
