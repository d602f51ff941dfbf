// Helpers of the mount tests that read a store's figures (stat_test.cc,
// compression_test.cc): hiodsfs-stat --json of a store or mount point, one
// of its counters, a wait for a condition on them, an fsync by path, and
// text-like file contents that compress.
// Thread-safety: they use Catch2 assertions (the test's own thread only).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../stat/schema_check.h"
#include "mount_fixture.h"

namespace hiodsfs::mt {

// hiodsfs-stat --json --history of a store or a mount point (a mounted
// store's figures are those the daemon last published), checked against
// the documented schema unless check_schema is false; extra: more options.
inline nlohmann::json stat_json(const std::string& target, bool check_schema = true,
                                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {HIODSFS_STAT_BIN, "--json", "--history"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(target);
    CmdResult r = run(argv, {}, std::chrono::seconds(60));
    INFO("hiodsfs-stat " << target << ": " << r.describe());
    REQUIRE(r.ok());
    INFO(r.out);
    nlohmann::json v = nlohmann::json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(v.is_discarded());
    if (!check_schema) return v;
    static const nlohmann::json schema = test::read_json_file(HIODSFS_SCHEMA);
    CHECK(test::schema_violations(v, schema) == std::vector<std::string>{});
    return v;
}

// A counter of the report: field(v, "space", "stored_bytes").
inline std::uint64_t field(const nlohmann::json& v, const char* group, const char* name) {
    INFO(group << "." << name);
    REQUIRE(v.contains(group));
    REQUIRE(v.at(group).contains(name));
    REQUIRE(v.at(group).at(name).is_number_unsigned());
    return v.at(group).at(name).get<std::uint64_t>();
}

// Polls hiodsfs-stat of target (the daemon publishes every control
// interval) until pred holds or timeout passes; returns the last figures,
// schema-checked.
inline nlohmann::json wait_for_stat(const std::string& target,
                                    const std::function<bool(const nlohmann::json&)>& pred,
                                    std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        nlohmann::json v = stat_json(target, false);
        if (pred(v) || std::chrono::steady_clock::now() > deadline) return stat_json(target);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

// fsync of one file, which commits the whole store.
inline void fsync_path(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const int synced = ::fsync(fd);
    ::close(fd);
    REQUIRE(synced == 0);
}

// Text-like bytes (C keywords and numbers) that compress, each seed its own.
inline std::string text_like(std::size_t n, std::uint64_t seed) {
    static const char* words[] = {"struct ", "int ",  "return ", "const ",   "static ",   "void ",
                                  "if (",    ") {\n", "}\n",     "#define ", "unsigned ", "long "};
    std::string s;
    while (s.size() < n)
        s += std::string(words[splitmix64(seed) % 12]) + std::to_string(splitmix64(seed) % 1000);
    s.resize(n);
    return s;
}

}  // namespace hiodsfs::mt
