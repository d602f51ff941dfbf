// hiodsfs-stat --estimate's command line, the binary run as a subprocess:
// bad input is one line and a non-zero exit, --json is JSON with the
// compression figures, the text names every method, and --compression is
// wherever a user looks for an option.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "stat_test_util.h"

using namespace hiodsfs;
using nlohmann::json;

namespace {

using test::ScratchDir;

struct StatRun {
    int code = -1;
    std::string out, err;
    std::size_t err_lines() const {
        return static_cast<std::size_t>(std::count(err.begin(), err.end(), '\n'));
    }
};

// Runs hiodsfs-stat with args (each quoted for the shell); stderr apart.
StatRun run_stat(const ScratchDir& d, const std::vector<std::string>& args) {
    const std::string err_file = d.path + "/stderr";
    std::string cmd = HIODSFS_STAT_BIN;
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " 2>'" + err_file + "'";
    StatRun r;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::ifstream in(err_file);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
}

void make_tree(const std::string& root) {
    std::filesystem::create_directories(root);
    std::string text;
    for (int i = 0; text.size() < 100000; ++i)
        text += "line " + std::to_string(i % 977) + " of a text file\n";
    std::ofstream(root + "/a.txt") << text;
    std::ofstream(root + "/b.txt") << text;
    std::mt19937_64 rng(9);
    std::string random(50000, '\0');
    for (auto& c : random) c = static_cast<char>(rng());
    std::ofstream(root + "/random.bin") << random;
}

}  // namespace

TEST_CASE("hiodsfs-stat --estimate: bad input is one line and a non-zero exit",
          "[stat][estimate][cli]") {
    ScratchDir d;
    make_tree(d.path + "/tree");
    SECTION("a directory that is not there") {
        StatRun r = run_stat(d, {"--estimate", "--no-cache", d.path + "/missing"});
        CHECK(r.code == 1);
        CHECK(r.err_lines() == 1);
        CHECK(r.err.find(d.path + "/missing") != std::string::npos);
        CHECK(r.out.empty());
    }
    SECTION("a method the codec does not know") {
        StatRun r = run_stat(
            d, {"--estimate", "--no-cache", "--compression", "lz4,zstd:42", d.path + "/tree"});
        CHECK(r.code == 1);
        CHECK(r.err_lines() == 1);
        CHECK(r.err.find("zstd:42") != std::string::npos);
    }
    SECTION("a method twice, or none among others") {
        for (const char* list : {"lz4,lz4", "none,zstd", ""}) {
            INFO(list);
            StatRun r =
                run_stat(d, {"--estimate", "--no-cache", "--compression", list, d.path + "/tree"});
            CHECK(r.code == 1);
            CHECK(r.err_lines() == 1);
        }
    }
    SECTION("--compression without --estimate") {
        StatRun r = run_stat(d, {"--compression", "lz4", d.path + "/tree"});
        CHECK(r.code == 1);
        CHECK(r.err_lines() == 1);
        CHECK(r.err.find("--estimate") != std::string::npos);
    }
}

TEST_CASE("hiodsfs-stat --estimate --json: the figures of every method; the text names them",
          "[stat][estimate][cli]") {
    ScratchDir d;
    const std::string tree = d.path + "/tree";
    make_tree(tree);
    StatRun r =
        run_stat(d, {"--estimate", "--no-cache", "--json", "--compression", "lz4,zstd:3", tree});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["schema"] == "hiodsfs-stat-estimate/1");
    CHECK(j["files"] == 3);
    const json& first = j["results"].at(0);
    CHECK(first["chunking"] == "cdc:2048/8192/32768");
    // The two text files are one: the dedup ratio is near 2 less the random file's share.
    CHECK(first["ratio"].get<double>() > 1.2);
    const json& c = j["compression"];
    CHECK(c["chunking"] == first["chunking"]);
    CHECK(c["record_header_bytes"] == 24);
    REQUIRE(c["methods"].size() == 2);
    CHECK(c["methods"][0]["method"] == "lz4");
    CHECK(c["methods"][1]["method"] == "zstd:3");
    for (const json& m : c["methods"]) {
        CHECK(m["raw_bytes"] == first["stored_bytes"]);
        CHECK(m["stored_bytes"].get<std::uint64_t>() < first["stored_bytes"].get<std::uint64_t>());
        CHECK(m["ratio"].get<double>() > 1.0);
        CHECK(m["combined_ratio"].get<double>() > first["ratio"].get<double>());
        CHECK(m["cpu_s_per_gib"].is_number());
        CHECK(m["encoded_chunks"].get<std::uint64_t>() <=
              first["unique_chunks"].get<std::uint64_t>());
    }

    // The default methods, as text.
    StatRun text = run_stat(d, {"--estimate", "--no-cache", tree});
    REQUIRE(text.code == 0);
    for (const char* m : {"lz4", "zstd:3", "zstd:9"})
        CHECK(text.out.find(std::string("\n") + m + " ") != std::string::npos);
    CHECK(text.out.find("unique") != std::string::npos);

    // none: no compression figures.
    StatRun none =
        run_stat(d, {"--estimate", "--no-cache", "--json", "--compression", "none", tree});
    REQUIRE(none.code == 0);
    const json n = json::parse(none.out, nullptr, false);
    REQUIRE_FALSE(n.is_discarded());
    CHECK(n["compression"]["methods"].empty());
}

TEST_CASE("hiodsfs-stat --compression is in --help, the man page, the completion and the README",
          "[stat][estimate][cli]") {
    ScratchDir d;
    StatRun help = run_stat(d, {"--help"});
    REQUIRE(help.code == 0);
    CHECK(help.out.find("--compression LIST") != std::string::npos);
    auto source = [](const std::string& rel) {
        std::ifstream in(std::string(HIODSFS_SOURCE_DIR) + "/" + rel);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    CHECK(source("man/hiodsfs-stat.1").find("\\-\\-compression \" LIST\"") != std::string::npos);
    CHECK(source("completions/hiodsfs-stat").find("--compression") != std::string::npos);
    CHECK(source("README.md").find("--compression") != std::string::npos);
    CHECK(source("docs/hiodsfs-stat.md").find("--compression") != std::string::npos);
}
