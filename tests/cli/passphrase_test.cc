// Asking for a passphrase (src/cli/passphrase.h) where standard input is a
// pipe or a file: a line each time, its newline (and a carriage return)
// dropped, the next line left for the next question; an empty line, end
// of input and an overlong line are refused.
#include "cli/passphrase.h"

#include "stdin_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

using hiodsfs::Passphrase;
using hiodsfs::Status;
using hiodsfs::cli::ask_passphrase;
using hiodsfs::cli::read_passphrase_line;
using hiodsfs::test::pipe_of;
using hiodsfs::test::StdinFrom;


TEST_CASE("passphrase: lines from a pipe, one at a time", "[passphrase]") {
    const int fd = pipe_of("first words\r\nsecond\n\nlast without newline");
    Passphrase p;
    REQUIRE(read_passphrase_line(fd, &p).is_ok());
    CHECK(p.text() == "first words");
    REQUIRE(read_passphrase_line(fd, &p).is_ok());
    CHECK(p.text() == "second");
    CHECK(read_passphrase_line(fd, &p).err() == EINVAL);  // the empty line
    REQUIRE(read_passphrase_line(fd, &p).is_ok());
    CHECK(p.text() == "last without newline");
    Status end = read_passphrase_line(fd, &p);
    CHECK(end.err() == ENODATA);
    CHECK(end.message().find("end of input") != std::string::npos);
    ::close(fd);
}

TEST_CASE("passphrase: one over the limit is refused, and the next line still reads", "[passphrase]") {
    const int fd = pipe_of(std::string(Passphrase::kMaxBytes + 5, 'x') + "\nshort\n" +
                           std::string(Passphrase::kMaxBytes, 'y') + "\n");
    Passphrase p;
    Status st = read_passphrase_line(fd, &p);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("longer than") != std::string::npos);
    REQUIRE(read_passphrase_line(fd, &p).is_ok());
    CHECK(p.text() == "short");
    REQUIRE(read_passphrase_line(fd, &p).is_ok());
    CHECK(p.text().size() == Passphrase::kMaxBytes);
    ::close(fd);
}

TEST_CASE("passphrase: asked of a pipe or a file on standard input, a line each question", "[passphrase]") {
    {
        StdinFrom in(pipe_of("old one\nnew one\n"));
        Passphrase a, b;
        REQUIRE(ask_passphrase("Passphrase for store /x", false, &a).is_ok());
        REQUIRE(ask_passphrase("New passphrase for store /x", true, &b).is_ok());
        CHECK(a.text() == "old one");
        CHECK(b.text() == "new one");
    }
    char path[] = "/tmp/hiodsfs-passphrase-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "from a file\n", 12) == 12);
    REQUIRE(::lseek(fd, 0, SEEK_SET) == 0);
    ::unlink(path);
    StdinFrom in(fd);
    Passphrase p;
    REQUIRE(ask_passphrase("Passphrase for store /x", false, &p).is_ok());
    CHECK(p.text() == "from a file");
}
