// A tool's key options (src/cli/credentials.h), as hiodsfs-fsck and
// hiodsfs-stat take them: --key-file reads the file as the daemon reads
// key_file=, --key ask reads the passphrase from standard input when it is
// a pipe, and a wrong form or both at once are refused in one line.
#include "cli/credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "stdin_util.h"

using hiodsfs::Status;
using hiodsfs::cli::read_store_credentials;
using hiodsfs::cli::StoreCredentials;
using hiodsfs::test::pipe_of;
using hiodsfs::test::StdinFrom;

namespace {

struct KeyDir {
    std::string path;
    KeyDir() {
        char tmpl[] = "/tmp/hiodsfs-credentials-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~KeyDir() { std::filesystem::remove_all(path); }
    std::string key_file(const std::string& name, std::size_t bytes, mode_t mode) const {
        const std::string p = path + "/" + name;
        std::ofstream(p, std::ios::binary) << std::string(bytes, '\x42');
        REQUIRE(::chmod(p.c_str(), mode) == 0);
        return p;
    }
};

}  // namespace

TEST_CASE("credentials: a key file, a passphrase from standard input, or neither", "[credentials]") {
    KeyDir d;
    const std::string good = d.key_file("good.key", 32, 0600);
    StoreCredentials c;
    REQUIRE(read_store_credentials(nullptr, nullptr, "/s", &c).is_ok());
    CHECK_FALSE(c.given());
    REQUIRE(read_store_credentials(&good, nullptr, "/s", &c).is_ok());
    REQUIRE(c.key != nullptr);
    CHECK(c.key->data()[0] == 0x42);
    CHECK(c.passphrase == nullptr);
    const std::string ask = "ask";
    {
        StdinFrom in(pipe_of("some words\n"));
        REQUIRE(read_store_credentials(nullptr, &ask, "/s", &c).is_ok());
    }
    REQUIRE(c.passphrase != nullptr);
    CHECK(c.passphrase->text() == "some words");
    CHECK(c.key == nullptr);
}

TEST_CASE("credentials: a wrong form, both options, and a key file the daemon would refuse", "[credentials]") {
    KeyDir d;
    const std::string good = d.key_file("good.key", 32, 0600);
    StoreCredentials c;
    const std::string other = "file", ask = "ask";
    Status st = read_store_credentials(nullptr, &other, "/s", &c);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("the only form is --key ask") != std::string::npos);
    st = read_store_credentials(&good, &ask, "/s", &c);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("exclude each other") != std::string::npos);
    const std::string loose = d.key_file("loose.key", 32, 0644), short_key = d.key_file("short.key", 31, 0600);
    CHECK_FALSE(read_store_credentials(&loose, nullptr, "/s", &c).is_ok());
    CHECK(c.key == nullptr);
    CHECK_FALSE(read_store_credentials(&short_key, nullptr, "/s", &c).is_ok());
    const std::string missing = d.path + "/none.key";
    CHECK(read_store_credentials(&missing, nullptr, "/s", &c).err() == ENOENT);
    {
        StdinFrom in(pipe_of(""));
        CHECK(read_store_credentials(nullptr, &ask, "/s", &c).err() == ENODATA);
    }
    CHECK_FALSE(c.given());
}
