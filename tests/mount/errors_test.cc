// Errors a mounted store must not lose or leave unsaid, through a real
// mount: a lost write's error belongs to each file description open when it
// was lost, not to whoever closes the file first; a store whose segment
// file stops taking writes stops, says why, and answers EIO.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
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

// The newest segment file: the one being appended to.
std::string active_segment(const std::string& store) {
    std::vector<std::string> names;
    DIR* d = ::opendir((store + "/segments").c_str());
    REQUIRE(d != nullptr);
    while (const dirent* e = ::readdir(d))
        if (std::string_view(e->d_name).ends_with(".seg")) names.emplace_back(e->d_name);
    ::closedir(d);
    REQUIRE(!names.empty());
    return store + "/segments/" + *std::max_element(names.begin(), names.end());
}

// Takes the immutable flag off again however the test ends, so the
// fixture can unmount and remove the store.
struct ImmutableGuard {
    std::string path;
    ~ImmutableGuard() {
        if (!path.empty()) (void)run({"chattr", "-i", path});
    }
};

// Writes data to a new file and fsyncs it; the errno of the first call that
// failed (write, fsync or close), or 0.
int write_and_fsync(const std::string& path, const std::string& data) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int err = 0;
    if (::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) err = errno;
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}

}  // namespace

TEST_CASE("a reader's open and close do not take a lost write's error from its writer",
          "[mount][errseq]") {
    // Deferred writes are held in memory and applied later; the file's inode
    // record, made undecodable under the running daemon, makes the apply of
    // the writer's second write fail after it was acknowledged. The reader
    // opens before: the lost write drops the kernel's cached attributes
    // (EngineOptions::attrs_changed), and an open after it would ask for
    // the damaged record.
    MountFixture fx({"mode=deferred", "background_threads=0", "no_writeback_cache",
                     "commit_interval=100", "control_interval=100", "entry_timeout=600",
                     "attr_timeout=600"});
    const std::string f = fx.path("f");
    const int writer = ::open(f.c_str(), O_WRONLY | O_CREAT, 0644);
    REQUIRE(writer >= 0);
    const std::string block(4096, 'w');
    REQUIRE(::pwrite(writer, block.data(), block.size(), 0) == 4096);
    REQUIRE(::fsync(writer) == 0);
    const int reader = ::open(f.c_str(), O_RDONLY);
    REQUIRE(reader >= 0);
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

    CHECK(::close(reader) == 0);
    CHECK(MT_ERRNO(::fsync(writer)) == EIO);
    CHECK(MT_ERRNO(::fsync(writer)) == 0);  // told once
    CHECK(::close(writer) == 0);
}

TEST_CASE(
    "a segment file made immutable under a mount stops the store, which says why and answers EIO",
    "[mount][store-stop]") {
    if (!is_root()) SKIP_TEST("chattr +i needs root (CAP_LINUX_IMMUTABLE)");
    MountFixture fx({"commit_interval=100", "control_interval=100"});
    const std::string kept = random_bytes(256 * kKiB, 7);
    REQUIRE(write_and_fsync(fx.path("kept"), kept) == 0);
    ImmutableGuard guard{active_segment(fx.store())};
    const CmdResult chattr = run({"chattr", "+i", guard.path});
    if (!chattr.ok()) {
        guard.path.clear();
        SKIP_TEST("the store's file system does not take chattr +i: " << chattr.describe());
    }

    CHECK(write_and_fsync(fx.path("refused"), random_bytes(2 * kMiB, 8)) == EIO);
    // Stopped: nothing more is taken, and the reason is said, once.
    CHECK(MT_ERRNO(::open(fx.path("after").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) == EIO);
    std::string why;
    REQUIRE(wait_for(
        [&] {
            const auto status =
                nlohmann::json::parse(read_file_or_empty(fx.store() + "/status.json"), nullptr, false);
            if (status.is_object() && status["store_error"].is_string())
                why = status["store_error"];
            return !why.empty();
        },
        30s));
    CHECK(why.find("Operation not permitted") != std::string::npos);
    const std::string log = fx.daemon_log();
    INFO("daemon log:\n" << log);
    const std::size_t first = log.find("the store stopped: ");
    CHECK(first != std::string::npos);
    CHECK(log.find("Operation not permitted", first) != std::string::npos);
    CHECK(log.find("the store stopped: ", first + 1) == std::string::npos);
    const CmdResult text = run({HIODSFS_STAT_BIN, fx.mnt()});
    INFO(text.describe() << text.out);
    CHECK(text.out.find("STOPPED") != std::string::npos);
    CHECK(text.out.find("Operation not permitted") != std::string::npos);
    const CmdResult json = run({HIODSFS_STAT_BIN, "--json", fx.mnt()});
    const auto v = nlohmann::json::parse(json.out, nullptr, false);
    REQUIRE(v.is_object());
    CHECK(v["store_error"] == why);

    (void)run({"chattr", "-i", guard.path});
    guard.path.clear();
    CHECK(fx.unmount_status() != 0);  // the unmount's flush could not commit either
    fx.mount();
    CHECK(read_file(fx.path("kept")) == kept);
    CHECK_FALSE(exists(fx.path("after")));
}

TEST_CASE(
    "a file the background pass fails on is set aside, shown by hiodsfs-stat, and the rest is "
    "deduplicated",
    "[mount][quarantine]") {
    // Written deferred with no pass running; then a byte of a's first raw
    // chunk (the first record of the first segment) is damaged, and a mount
    // with the pass takes the backlog: a's re-chunking fails, b's goes on.
    MountFixture fx({"mode=deferred", "background_threads=0", "control_interval=100"});
    const std::string a = random_bytes(256 * kKiB, 21);
    const std::string half = random_bytes(128 * kKiB, 22);
    const std::string b = half + half;
    write_file(fx.path("a"), a);
    write_file(fx.path("b"), b);
    const std::string a_name = "inode " + std::to_string(stat_of(fx.path("a")).st_ino);
    fx.unmount();
    flip_byte(fx.store() + "/segments/00000001.seg", 24 + 100);
    fx.set_options({"mode=deferred", "background_threads=1", "control_interval=100"});
    fx.mount();
    nlohmann::json status;
    const bool drained = wait_for(
        [&] {
            status = nlohmann::json::parse(read_file_or_empty(fx.store() + "/status.json"), nullptr, false);
            return status.is_object() && status["backlog_records"] == 0 &&
                   status["quarantined_dirty_records"].is_number() &&
                   status["quarantined_dirty_records"] >= 1;
        },
        60s);
    INFO("status: " << status.dump() << "\ndaemon log:\n" << fx.daemon_log());
    REQUIRE(drained);
    CHECK(status["raw_bytes"] == a.size());  // b's were deduplicated
    CHECK(read_file(fx.path("b")) == b);
    const CmdResult json = run({HIODSFS_STAT_BIN, "--json", fx.mnt()});
    const auto v = nlohmann::json::parse(json.out, nullptr, false);
    REQUIRE(v.is_object());
    CHECK(v["quarantine"]["dirty_records"] >= 1);
    CHECK(v["quarantine"]["last_error"].get<std::string>().find(a_name) != std::string::npos);
    const CmdResult text = run({HIODSFS_STAT_BIN, fx.mnt()});
    INFO(text.out);
    CHECK(text.out.find("set aside") != std::string::npos);
    const std::string log = fx.daemon_log();
    const std::size_t first = log.find("set aside " + a_name);
    CHECK(first != std::string::npos);
    CHECK(log.find("set aside " + a_name, first + 1) == std::string::npos);
}
