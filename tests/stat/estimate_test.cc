// hiodsfs-stat --estimate without a mount: exact figures on trees whose
// duplication is known, and the cache (re-runs read nothing, changed files
// are read again, an interrupted run leaves a usable cache), and a walk
// that stays on one file system.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../skip.h"
#include "stat/estimate.h"
#include "stat_test_util.h"

using namespace hiodsfs;

namespace {

using EstimateTmpDir = test::ScratchDir;
using test::write_whole_file;

std::string random_block(std::mt19937_64& rng, std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

// Files made of 4 KiB blocks drawn from a pool: with fixed 4K chunking the
// stored bytes are exactly the distinct blocks used (plus unique tails).
struct Tree {
    std::uint64_t logical = 0, stored = 0, files = 0;
};
Tree make_tree(const std::string& root, int nfiles, int blocks_per_file) {
    std::mt19937_64 rng(7);
    std::vector<std::string> pool;
    for (int i = 0; i < 64; ++i) pool.push_back(random_block(rng, 4096));
    std::vector<bool> used(pool.size());
    Tree t;
    std::filesystem::create_directories(root + "/sub/deeper");
    for (int f = 0; f < nfiles; ++f) {
        std::string data;
        for (int b = 0; b < blocks_per_file; ++b) {
            std::size_t i = rng() % pool.size();
            used[i] = true;
            data += pool[i];
        }
        if (f % 3 == 0) data += random_block(rng, 1000 + static_cast<std::size_t>(f));  // unique tail
        if (f % 3 == 0) t.stored += 1000 + static_cast<std::uint64_t>(f);
        write_whole_file(root + (f % 2 ? "/sub/f" : "/sub/deeper/f") + std::to_string(f), data);
        t.logical += data.size();
        ++t.files;
    }
    for (bool u : used) t.stored += u ? 4096 : 0;
    // A hard link is one file; a file of zeros is holes.
    REQUIRE(::link((root + "/sub/f1").c_str(), (root + "/hardlink").c_str()) == 0);
    write_whole_file(root + "/zeros", std::string(64 * 1024, '\0'));
    ++t.files;
    REQUIRE(::symlink("sub/f1", (root + "/symlink").c_str()) == 0);
    return t;
}

}  // namespace

TEST_CASE("estimate: exact stored bytes for fixed chunking on a tree with known duplication", "[stat][estimate]") {
    EstimateTmpDir d;
    Tree t = make_tree(d.path + "/tree", 40, 32);
    stat::EstimateOptions o;
    o.roots = {d.path + "/tree"};
    o.chunkings = {ChunkingParams::fixed(4096), ChunkingParams::cdc(2048, 8192, 32768)};
    stat::EstimateReport r;
    REQUIRE(stat::run_estimate(o, &r));
    CHECK(r.files == t.files);
    CHECK(r.apparent_bytes == t.logical + 64 * 1024);
    REQUIRE(r.results.size() == 2);
    CHECK(r.results[0].logical_bytes == t.logical);  // zeros are holes, the link counts once
    CHECK(r.results[0].stored_bytes == t.stored);
    CHECK(r.results[0].ratio() == Approx(static_cast<double>(t.logical) / static_cast<double>(t.stored)));
    // CDC cuts across the 4 KiB blocks, so it shares less of this tree, and
    // maps the same bytes (its chunks of the zero file are holes too).
    CHECK(r.results[1].logical_bytes == t.logical);
    CHECK(r.results[1].stored_bytes > t.stored);
    CHECK(r.results[1].stored_bytes < t.logical);
    CHECK(r.bytes_read == r.apparent_bytes);

    stat::EstimateOptions bad = o;
    bad.roots = {d.path + "/missing"};
    CHECK_FALSE(stat::run_estimate(bad, &r));
    bad = o;
    bad.chunkings = {ChunkingParams::fixed(1000)};
    CHECK_FALSE(stat::run_estimate(bad, &r));
}

TEST_CASE("estimate: the cache makes a re-run read nothing, and survives an interruption", "[stat][estimate]") {
    EstimateTmpDir d;
    const std::string root = d.path + "/tree";
    Tree t = make_tree(root, 60, 96);  // ~23 MiB
    stat::EstimateOptions o;
    o.roots = {root};
    o.chunkings = stat::comparison_chunkings();
    o.cache_path = d.path + "/cache/estimate.cache";

    stat::EstimateReport first, second;
    REQUIRE(stat::run_estimate(o, &first));
    CHECK(first.bytes_read == first.apparent_bytes);
    CHECK(first.files_cached == 0);
    REQUIRE(stat::run_estimate(o, &second));
    CHECK(second.cache_loaded);
    CHECK(second.bytes_read == 0);
    CHECK(second.files_read == 0);
    CHECK(second.files_cached == t.files);
    REQUIRE(second.results.size() == first.results.size());
    for (std::size_t i = 0; i < first.results.size(); ++i) {
        CHECK(second.results[i].stored_bytes == first.results[i].stored_bytes);
        CHECK(second.results[i].logical_bytes == first.results[i].logical_bytes);
    }

    // A changed file is read again, and only it.
    write_whole_file(root + "/sub/f1", std::string(8192, 'x'));
    stat::EstimateReport third;
    REQUIRE(stat::run_estimate(o, &third));
    CHECK(third.files_read == 1);
    CHECK(third.bytes_read == 8192);

    // Interrupted half-way (as by Ctrl-C): the cache on disk stays whole and
    // keeps what was read, so the next run reads only the rest.
    std::filesystem::remove(o.cache_path);
    std::atomic<bool> stop{false};
    stat::EstimateOptions io = o;
    io.interrupt = &stop;
    io.progress_interval_s = 0;  // called at every read, so half-way is seen however fast the run
    io.progress = [&](const stat::EstimateProgress& p) {
        if (p.bytes_read > p.bytes_to_read / 2) stop = true;
    };
    stat::EstimateReport partial, rest;
    REQUIRE(stat::run_estimate(io, &partial));
    CHECK(partial.interrupted);
    CHECK(partial.bytes_read < partial.apparent_bytes);
    REQUIRE(stat::run_estimate(o, &rest));
    CHECK(rest.cache_loaded);
    CHECK(rest.cache_note == "");
    CHECK(rest.files_cached > 0);
    CHECK(rest.bytes_read + partial.bytes_read >= rest.apparent_bytes);
    CHECK(rest.bytes_read < rest.apparent_bytes);
    CHECK(rest.results[0].stored_bytes == third.results[0].stored_bytes);

    // A damaged cache is ignored with a note, never trusted.
    {
        int fd = ::open(o.cache_path.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        REQUIRE(::pwrite(fd, "garbage", 7, 40) == 7);
        ::close(fd);
    }
    stat::EstimateReport damaged;
    REQUIRE(stat::run_estimate(o, &damaged));
    CHECK(damaged.cache_note.find("damaged") != std::string::npos);
    CHECK(damaged.bytes_read == damaged.apparent_bytes);
    CHECK(damaged.results[0].stored_bytes == third.results[0].stored_bytes);
}

TEST_CASE("estimate: the walk stays on the roots' file systems", "[stat][estimate]") {
    EstimateTmpDir d;
    const std::string root = d.path + "/tree";
    std::filesystem::create_directories(root + "/mnt");
    write_whole_file(root + "/here", std::string(10000, 'h'));
    if (::mount("tmpfs", (root + "/mnt").c_str(), "tmpfs", 0, "size=1m") != 0)
        SKIP_TEST("cannot mount a tmpfs here: " << std::strerror(errno));
    struct Unmount {
        std::string path;
        ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
    } unmount{root + "/mnt"};
    write_whole_file(root + "/mnt/elsewhere", std::string(20000, 'e'));

    stat::EstimateOptions o;
    o.roots = {root};
    o.chunkings = {ChunkingParams::fixed(4096)};
    stat::EstimateReport r;
    REQUIRE(stat::run_estimate(o, &r));
    CHECK(r.files == 1);
    CHECK(r.apparent_bytes == 10000);
    // Given as a root, the other file system is walked.
    o.roots = {root + "/mnt"};
    REQUIRE(stat::run_estimate(o, &r));
    CHECK(r.files == 1);
    CHECK(r.apparent_bytes == 20000);
}
