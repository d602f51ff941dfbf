// Standard input for the tests of asking (tests/cli): a pipe that holds
// text, and stdin replaced by a descriptor for a while.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace hiodsfs::test {

// A pipe holding text, its write end closed: what `printf ... |` gives.
inline int pipe_of(const std::string& text) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
    return fds[0];
}

// Standard input replaced by fd for the life of this object.
class StdinFrom {
public:
    explicit StdinFrom(int fd) : saved_(::dup(STDIN_FILENO)) {
        REQUIRE(::dup2(fd, STDIN_FILENO) == STDIN_FILENO);
        ::close(fd);
    }
    ~StdinFrom() {
        ::dup2(saved_, STDIN_FILENO);
        ::close(saved_);
    }

private:
    int saved_;
};

}  // namespace hiodsfs::test
