// Errors a mounted store must not lose or leave unsaid, through a real
// mount: a lost write's error belongs to each file description open when it
// was lost, not to whoever closes the file first.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {

// LEB128, as the metadata's inode records store their numbers.
std::string varint(std::uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    out.push_back(static_cast<char>(v));
    return out;
}

// Offsets of every copy of `pattern` in a file (LMDB keeps old copies of a
// page beside the current one).
std::vector<std::size_t> find_all(const std::string& path, const std::string& pattern) {
    const std::string bytes = read_file(path);
    std::vector<std::size_t> at;
    for (std::size_t p = bytes.find(pattern); p != std::string::npos;
         p = bytes.find(pattern, p + 1))
        at.push_back(p);
    return at;
}

bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

}  // namespace

TEST_CASE("a reader's open and close do not take a lost write's error from its writer",
          "[mount][errseq]") {
    // Deferred writes are held in memory and applied later; the file's inode
    // record, made undecodable under the running daemon, makes the apply of
    // the writer's second write fail after it was acknowledged. Long cache
    // timeouts keep the kernel from asking for the damaged record itself.
    MountFixture fx({"mode=deferred", "background_threads=0", "no_writeback_cache",
                     "commit_interval=100", "control_interval=100", "entry_timeout=600",
                     "attr_timeout=600"});
    const std::string f = fx.path("f");
    const int writer = ::open(f.c_str(), O_WRONLY | O_CREAT, 0644);
    REQUIRE(writer >= 0);
    const std::string block(4096, 'w');
    REQUIRE(::pwrite(writer, block.data(), block.size(), 0) == 4096);
    REQUIRE(::fsync(writer) == 0);
    // A group number no other record holds finds the record in the file:
    // mode, uid and gid follow its flags byte. (Root stays the owner: the
    // kernel would ask a user outside the owner's class for the file's ACL,
    // from the record.)
    const std::uint32_t uid = 0, gid = 0x2c3d4e;
    REQUIRE(::fchown(writer, uid, gid) == 0);
    const std::uint32_t mode = stat_of(f).st_mode;
    const std::string pattern = varint(std::uint64_t{mode & 07777} << 4 | (mode & S_IFMT) >> 12) +
                                varint(uid) + varint(gid);
    const std::string mdb = fx.store() + "/meta/data.mdb";
    REQUIRE(wait_for([&] { return !find_all(mdb, pattern).empty(); }, 30s));  // committed
    {
        const int fd = ::open(mdb.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        const char bad_flags = '\xff';
        for (std::size_t at : find_all(mdb, pattern))
            REQUIRE(::pwrite(fd, &bad_flags, 1, static_cast<off_t>(at - 1)) == 1);
        ::close(fd);
    }
    REQUIRE(::pwrite(writer, block.data(), block.size(), 4096) == 4096);  // acknowledged, held
    // Any operation applies what is held: this one loses the write.
    write_file(fx.path("other"), "x");
    INFO("daemon log:\n" << fx.daemon_log());
    REQUIRE(wait_for([&] { return fx.daemon_log().find("writes to inode") != std::string::npos; },
                     30s));

    const int reader = ::open(f.c_str(), O_RDONLY);
    REQUIRE(reader >= 0);
    CHECK(::close(reader) == 0);
    CHECK(MT_ERRNO(::fsync(writer)) == EIO);
    CHECK(MT_ERRNO(::fsync(writer)) == 0);  // told once
    CHECK(::close(writer) == 0);
}
