// Helpers shared by the store tests: a temporary directory that removes
// itself, random bytes, segment file paths, and a check that prints a
// Status's message.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

// Fails the test with the Status's own message, so a failure says why.
#define REQUIRE_OK(expr)                          \
    do {                                          \
        ::hiodsfs::Status _st = (expr);           \
        INFO(#expr << " -> " << _st.to_string()); \
        REQUIRE(_st.is_ok());                     \
    } while (0)

namespace hiodsfs::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::string tmpl =
            std::filesystem::temp_directory_path().string() + "/hiodsfs-store-XXXXXX";
        char* p = ::mkdtemp(tmpl.data());
        REQUIRE(p != nullptr);
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline std::vector<char> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<char> v(n);
    for (auto& c : v) c = static_cast<char>(rng());
    return v;
}

inline std::vector<char> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The file of segment ID in a store directory.
inline std::string segment_path(const std::string& dir, SegmentId id) {
    char name[16];
    std::snprintf(name, sizeof name, "%08x.seg", id);
    return dir + "/" + name;
}

inline void spit(const std::string& path, const std::vector<char>& data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

}  // namespace hiodsfs::test
