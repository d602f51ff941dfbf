// read_key_file (src/store/key_file.h): a key file is read only when it is
// the file itself, 32 bytes, root's (or the caller's) and private to it;
// every other case is refused with one line that names the file.
#include "store/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <string>

#include "../skip.h"
#include "store_test_util.h"

using namespace hiodsfs;

namespace {

std::string write_key(const std::string& path, std::size_t len, mode_t mode = 0600) {
    std::string b(len, '\0');
    for (std::size_t i = 0; i < len; ++i) b[i] = static_cast<char>(i + 1);
    std::ofstream(path, std::ios::binary) << b;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    return b;
}

void check_refused(const std::string& path, int err, const std::string& says) {
    StoreKey k;
    Status st = read_key_file(path, &k);
    INFO(st.message());
    CHECK(st.err() == err);
    CHECK(st.message().find(path) != std::string::npos);
    CHECK(st.message().find(says) != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("a private 32-byte key file is read", "[store][key-file]") {
    hiodsfs::test::TempDir dir;
    const std::string path = dir.path() + "/key";
    const std::string b = write_key(path, 32, 0400);
    StoreKey k;
    REQUIRE(read_key_file(path, &k).is_ok());
    CHECK(std::string(reinterpret_cast<const char*>(k.data()), 32) == b);
}

TEST_CASE("key files that others could read, swap or point elsewhere are refused", "[store][key-file]") {
    hiodsfs::test::TempDir dir;
    const std::string path = dir.path() + "/key";
    write_key(path, 32, 0640);
    check_refused(path, EPERM, "has mode 0640");
    write_key(path, 32, 0602);
    check_refused(path, EPERM, "chmod 600");
    write_key(path, 31);
    check_refused(path, EINVAL, "holds 31 bytes");
    write_key(path, 33);
    check_refused(path, EINVAL, "holds 33 bytes");
    write_key(path, 32);
    const std::string link = dir.path() + "/link";
    REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
    check_refused(link, ELOOP, "symbolic link");
    check_refused(dir.path(), EINVAL, "not a regular file");
    check_refused(dir.path() + "/none", ENOENT, "No such file");
}

TEST_CASE("another user's key file, however private, is not taken by root", "[store][key-file]") {
    if (::geteuid() != 0) SKIP_TEST("needs root to give the file away");
    hiodsfs::test::TempDir dir;
    const std::string path = dir.path() + "/key";
    write_key(path, 32);
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    check_refused(path, EPERM, "belongs to uid 65534");
}
