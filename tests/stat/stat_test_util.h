// Helpers of the hiodsfs-stat tests: a scratch directory removed at the
// end, and a file written whole.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

namespace hiodsfs::test {

struct ScratchDir {
    std::string path;
    ScratchDir() {
        char tmpl[] = "/tmp/hiodsfs-stat-XXXXXX";
        const char* made = ::mkdtemp(tmpl);
        REQUIRE(made != nullptr);
        path = made;
    }
    ~ScratchDir() { std::filesystem::remove_all(path); }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

inline void write_whole_file(const std::string& path, const std::string& data) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    const bool whole = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    ::close(fd);
    REQUIRE(whole);
}

}  // namespace hiodsfs::test
