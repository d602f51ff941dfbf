// Corruption at read time through a real mount, and hiodsfs-fsck beside the
// daemon: a byte flipped in one chunk of an unmounted store makes that range
// of that file fail with EIO after the next mount (never wrong bytes), the
// rest keeps working, the daemon counts the event in status.json, fsck
// refuses to run while the store is mounted, and fsck --scrub names the file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "meta/chunk_table.h"
#include "meta/extent_map.h"
#include "meta/meta_store.h"
#include "meta/records.h"
#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {

// Where the chunk that holds byte `off` of /name lies: segment file and byte.
// *start (if given): the file offset its extent begins at.
std::pair<std::string, std::uint64_t> chunk_byte(const std::string& store, const std::string& name,
                                                 std::uint64_t off, std::uint64_t* start = nullptr) {
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(store + "/meta", 1ull << 32, true, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    std::string_view v;
    bool found = false;
    REQUIRE(t->get(Db::kDirents, key_u64_str(kRootInode, name), &v, &found).is_ok());
    REQUIRE(found);
    DirentValue d;
    REQUIRE(decode(v, &d));
    std::vector<MappedExtent> ex;
    REQUIRE(extents_overlapping(*t, d.ino, off, off + 1, &ex).is_ok());
    REQUIRE(ex.size() == 1);
    if (start != nullptr) *start = ex[0].start;
    const ExtentRecord e = ex[0].e;
    ChunkRecord c;
    REQUIRE(get_chunk(*t, e.chunk, &c, &found).is_ok());
    REQUIRE(found);
    char seg[32];
    std::snprintf(seg, sizeof seg, "/segments/%08x.seg", c.segment);
    return {store + seg, c.offset + 1000};
}

}  // namespace

TEST_CASE("a corrupt chunk reads as EIO through the mount; fsck refuses a mounted store and names the file",
          "[mount][fsck]") {
    MountFixture fx({"chunking=fixed", "chunk_size=4096", "control_interval=100"});
    const std::string good = random_bytes(256 * kKiB, 1), bad = random_bytes(256 * kKiB, 2);
    write_file(fx.path("good"), good);
    write_file(fx.path("bad"), bad);
    fx.unmount();

    auto [segment, at] = chunk_byte(fx.store(), "bad", 64 * kKiB);
    flip_byte(segment, at, 0x01);

    fx.mount();  // a fresh mount: nothing of the file is in the page cache
    const std::string fsck = HIODSFS_FSCK_BIN;
    {
        // Read-only or repairing: fsck does not run beside the daemon.
        CmdResult r = run({fsck, fx.store()});
        INFO(r.describe() << r.out);
        CHECK(r.status == 8);
        CHECK(r.err.find("in use by another process") != std::string::npos);
        CHECK(run({fsck, fx.store(), "--repair"}).status == 8);
    }
    int fd = ::open(fx.path("bad").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    std::string buf(4096, '\0');
    CHECK(MT_ERRNO(::pread(fd, buf.data(), buf.size(), 64 * kKiB)) == EIO);
    CHECK(MT_ERRNO(::pread(fd, buf.data(), buf.size(), 64 * kKiB + 2048)) == EIO);
    // The rest of the file, and other files, read fine.
    REQUIRE(::pread(fd, buf.data(), buf.size(), 0) == 4096);
    CHECK(buf == bad.substr(0, 4096));
    REQUIRE(::pread(fd, buf.data(), buf.size(), 128 * kKiB) == 4096);
    CHECK(buf == bad.substr(128 * kKiB, 4096));
    ::close(fd);
    CHECK(read_file(fx.path("good")) == good);
    // Counted for hiodsfs-stat (status.json is rewritten every control interval).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((status_field(fx.store(), "read_errors") < 1 || status_field(fx.store(), "reads_coalesced") < 1) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(status_field(fx.store(), "read_errors") >= 1);
    // The good file's chunks, back to back in a segment, were read in runs
    // (one preadv each; the runs holding the bad chunk fell back to reads of
    // one chunk, which found it).
    CHECK(status_field(fx.store(), "reads_coalesced") >= 1);
    fx.unmount();

    CmdResult r = run({fsck, fx.store(), "--scrub"});
    INFO(r.describe() << r.out);
    CHECK(r.status == 4);
    CHECK(r.out.find("payload checksum mismatch") != std::string::npos);
    CHECK(r.out.find("/bad bytes 65536-69631") != std::string::npos);
    CHECK(r.out.find("/good") == std::string::npos);
    // The verdict does not send the user to --repair, which cannot help
    // (the bytes are gone), and says where to turn instead.
    CHECK(r.out.find("run with --repair") == std::string::npos);
    CHECK(r.out.find("cannot be repaired without losing data") != std::string::npos);
    CHECK(r.out.find("restore those from a backup") != std::string::npos);
    fx.mount();
}

// An inline overwrite re-cuts the old bytes after it until its cuts meet
// old ones; when those bytes do not read, write(2) fails with EIO and the
// file keeps what it held, after a remount too.
TEST_CASE("an overwrite whose re-cut meets a corrupt chunk fails with EIO and leaves the file as it was",
          "[mount][fsck][trust]") {
    MountFixture fx({"chunking=cdc", "mode=inline", "no_writeback_cache"});
    std::string data = random_bytes(256 * kKiB, 5);
    write_file(fx.path("f"), data);
    fx.unmount();
    std::uint64_t start = 0;
    auto [segment, at] = chunk_byte(fx.store(), "f", 128 * kKiB, &start);
    flip_byte(segment, at, 0x01);
    fx.mount();
    int refused = 0;
    for (int k = 0; k < 8; ++k) {
        // New bytes right before the corrupt chunk: unless they happen to
        // keep a cut where it starts, the re-cut goes on into it.
        const std::size_t len = 100 + 50 * k, off = static_cast<std::size_t>(start) - len;
        const std::string d = random_bytes(len, 200 + k);
        const int fd = ::open(fx.path("f").c_str(), O_WRONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const ssize_t n = ::pwrite(fd, d.data(), d.size(), static_cast<off_t>(off));
        const int err = errno;
        ::close(fd);
        if (n == static_cast<ssize_t>(len)) {
            data.replace(off, len, d);
        } else {
            ++refused;
            CHECK(n == -1);
            CHECK(err == EIO);
        }
    }
    CHECK(refused > 0);
    fx.remount();
    // O_DIRECT: the page that holds the corrupt chunk's first bytes does not
    // read, and the written bytes lie in it; a direct read asks for exactly
    // the bytes before the chunk.
    const int fd = ::open(fx.path("f").c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    REQUIRE(fd >= 0);
    std::string got(static_cast<std::size_t>(start), '\0');
    CHECK(::pread(fd, got.data(), got.size(), 0) == static_cast<ssize_t>(got.size()));
    ::close(fd);
    CHECK(got == data.substr(0, got.size()));
}

namespace {
// Names, sizes and checksums of the segment files.
std::string segment_digest(const std::string& store) {
    return sh("cd " + shq(store + "/segments") + " && ls -l --time-style=+ . | sort && cksum *.seg").out;
}

}  // namespace

TEST_CASE("a corrupt chunk is not shared by a good copy written later; fsck --repair heals from it",
          "[mount][fsck][trust]") {
    MountFixture fx({"chunking=fixed", "chunk_size=4096", "control_interval=100"});
    const std::string data = random_bytes(256 * kKiB, 3);
    write_file(fx.path("orig"), data);
    write_file(fx.scratch("good-copy"), data);
    fx.unmount();
    auto [segment, at] = chunk_byte(fx.store(), "orig", 64 * kKiB);
    flip_byte(segment, at, 0x10);
    fx.mount();
    CHECK(run({"cat", fx.path("orig")}).status != 0);  // EIO
    // The user restores the file from a good copy.
    CmdResult cp = run({"cp", fx.scratch("good-copy"), fx.path("restored")});
    INFO(cp.describe());
    REQUIRE(cp.ok());
    REQUIRE(run({"sync", fx.path("restored")}).ok());
    fx.remount();
    CHECK(read_file(fx.path("restored")) == data);  // stored afresh, not onto the bad chunk
    CHECK(run({"cat", fx.path("orig")}).status != 0);
    fx.unmount();
    const std::string fsck = HIODSFS_FSCK_BIN;
    CmdResult r = run({fsck, fx.store()});
    INFO(r.describe() << r.out);
    CHECK(r.status == 4);
    CHECK(r.out.find("/orig bytes 65536-69631") != std::string::npos);
    r = run({fsck, fx.store(), "--repair"});
    INFO(r.describe() << r.out);
    CHECK(r.status == 1);  // found and repaired
    CHECK(run({fsck, fx.store(), "--scrub"}).status == 0);
    fx.mount();
    CHECK(read_file(fx.path("orig")) == data);
    CHECK(read_file(fx.path("restored")) == data);
}

TEST_CASE("a store whose metadata was deleted is refused at mount and keeps its segments",
          "[mount][trust]") {
    MountFixture fx({"compact_threshold=90"});
    for (int i = 0; i < 7; ++i) write_file(fx.path("f" + std::to_string(i)), random_bytes(10 * kMiB, 40 + i));
    fx.unmount();
    const std::string before = segment_digest(fx.store());
    REQUIRE(::unlink((fx.store() + "/meta/data.mdb").c_str()) == 0);
    const std::string bin = daemon_binary();
    CmdResult r = run({bin, fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(30));
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("hiodsfs-fsck") != std::string::npos);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // a reclaimer would have run by now
    CHECK(segment_digest(fx.store()) == before);
    r = run({HIODSFS_FSCK_BIN, fx.store(), "--repair"});
    INFO(r.describe());
    CHECK(r.status == 8);
    CHECK(segment_digest(fx.store()) == before);
}

TEST_CASE("a store whose FORMAT was deleted mounts again, says so in one line, and fsck writes it back too",
          "[mount][trust]") {
    MountFixture fx;
    const std::string a = random_bytes(3 * kMiB, 71), b = random_bytes(200 * 1024, 72);
    write_file(fx.path("a"), a);
    make_dir(fx.path("d"));
    write_file(fx.path("d/b"), b);
    fx.unmount();
    const std::string format = read_file(fx.store() + "/FORMAT");
    const std::string before = segment_digest(fx.store());

    // fsck first: it names the loss, and --repair writes the record again.
    REQUIRE(::unlink((fx.store() + "/FORMAT").c_str()) == 0);
    CmdResult r = run({HIODSFS_FSCK_BIN, fx.store()});
    INFO(r.describe());
    CHECK(r.status == 4);
    CHECK(r.out.find("FORMAT record is missing") != std::string::npos);
    CHECK_FALSE(exists(fx.store() + "/FORMAT"));
    r = run({HIODSFS_FSCK_BIN, fx.store(), "--repair"});
    INFO(r.describe());
    CHECK(r.status == 1);
    CHECK(read_file(fx.store() + "/FORMAT") == format);
    CHECK(segment_digest(fx.store()) == before);

    // The mount: the same, with a line in the daemon's log.
    REQUIRE(::unlink((fx.store() + "/FORMAT").c_str()) == 0);
    fx.mount();
    CHECK(read_file(fx.path("a")) == a);
    CHECK(read_file(fx.path("d/b")) == b);
    write_file(fx.path("c"), b);
    fx.unmount();
    CHECK(fx.daemon_log().find("FORMAT was missing") != std::string::npos);
    CHECK(read_file(fx.store() + "/FORMAT") == format);
    r = run({HIODSFS_FSCK_BIN, fx.store()});
    INFO(r.describe());
    CHECK(r.status == 0);
}

TEST_CASE("a store whose FORMAT and metadata were both deleted is refused and keeps its segments",
          "[mount][trust]") {
    MountFixture fx;
    write_file(fx.path("a"), random_bytes(3 * kMiB, 73));
    fx.unmount();
    const std::string before = segment_digest(fx.store());
    REQUIRE(::unlink((fx.store() + "/FORMAT").c_str()) == 0);
    REQUIRE(::unlink((fx.store() + "/meta/data.mdb").c_str()) == 0);
    CmdResult r = run({daemon_binary(), fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(30));
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("nothing was changed") != std::string::npos);
    CHECK(segment_digest(fx.store()) == before);
    r = run({HIODSFS_FSCK_BIN, fx.store(), "--repair"});
    INFO(r.describe());
    CHECK(r.status == 8);
    CHECK(segment_digest(fx.store()) == before);
}

TEST_CASE("a truncated newest segment refuses a read-write mount; -o ro copies out the rest",
          "[mount][trust]") {
    MountFixture fx({"chunking=fixed", "chunk_size=4096"});
    const std::string tiny = random_bytes(1000, 50);
    write_file(fx.path("tiny"), tiny);
    fx.remount();
    write_file(fx.path("new"), random_bytes(2 * kMiB, 51));
    fx.unmount();
    // Cut the newest segment short: "tiny" (its first record) stays whole,
    // "new" loses its bytes.
    auto [segment, at] = chunk_byte(fx.store(), "new", 0);
    (void)at;
    REQUIRE(::truncate(segment.c_str(), 4096) == 0);
    const std::string before = segment_digest(fx.store());
    CmdResult r = run({daemon_binary(), fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(30));
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("-o ro") != std::string::npos);
    CHECK(segment_digest(fx.store()) == before);  // nothing re-created, cut or appended
    fx.set_options({"ro"});
    fx.mount();
    CHECK(read_file(fx.path("tiny")) == tiny);
    CHECK(run({"cat", fx.path("new")}).status != 0);
    fx.unmount();
    CHECK(segment_digest(fx.store()) == before);
}

// A segment deleted by hand (a disk's loss, a mistaken rm): fsck names the
// files it held, and its advice, to write them again, needs a read-write
// mount, which --repair gives back.
TEST_CASE(
    "a deleted segment: fsck --repair, a read-write mount, EIO on the lost ranges, the files "
    "written again",
    "[mount][fsck][lost]") {
    MountFixture fx({"chunking=fixed", "chunk_size=4096"});
    // 64 MiB segments: "big" runs from the first into the second, which
    // "small" lies in; "early" is in the first only.
    const std::string early = random_bytes(kMiB, 11), big = random_bytes(66 * kMiB, 12),
                      small = random_bytes(kMiB, 13);
    write_file(fx.path("early"), early);
    write_file(fx.path("big"), big);
    write_file(fx.path("small"), small);
    fx.unmount();
    const std::string second = fx.store() + "/segments/00000002.seg";
    REQUIRE(exists(second));
    REQUIRE(::unlink(second.c_str()) == 0);

    const std::string fsck = HIODSFS_FSCK_BIN;
    CmdResult r = run({fsck, fx.store()});
    INFO(r.describe() << r.out);
    CHECK(r.status == 4);
    CHECK(r.out.find("/small bytes 0-4095") != std::string::npos);
    // Which of big's chunks went with the second segment depends on the
    // order the kernel's writeback requests were appended in: fsck names them.
    const std::size_t big_at = r.out.find("/big bytes ");
    REQUIRE(big_at != std::string::npos);
    const std::uint64_t lost_in_big = std::stoull(r.out.substr(big_at + std::strlen("/big bytes ")));
    CHECK(r.out.find("/early bytes") == std::string::npos);
    CHECK(r.out.find("cannot be mounted read-write") != std::string::npos);
    r = run({fsck, fx.store(), "--repair"});
    INFO(r.describe() << r.out);
    CHECK(r.status == 4);  // the bytes stay lost until the files are written again
    CHECK(r.out.find("REPAIRED: the store cannot be mounted read-write") != std::string::npos);

    fx.mount();  // read-write
    CHECK(read_file(fx.path("early")) == early);
    {
        std::string buf(4096, '\0');
        const int fd = ::open(fx.path("big").c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::pread(fd, buf.data(), buf.size(), 0) == 4096);
        CHECK(buf == big.substr(0, 4096));
        CHECK(MT_ERRNO(::pread(fd, buf.data(), buf.size(), lost_in_big)) == EIO);
        ::close(fd);
        const int sfd = ::open(fx.path("small").c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(sfd >= 0);
        CHECK(MT_ERRNO(::pread(sfd, buf.data(), buf.size(), 0)) == EIO);
        ::close(sfd);
    }
    // fsck's advice: write them again from a good copy.
    write_file(fx.path("big"), big);
    write_file(fx.path("small"), small);
    CHECK(read_file(fx.path("big")) == big);
    fx.unmount();
    r = run({fsck, fx.store()});
    INFO(r.describe() << r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find(": clean") != std::string::npos);
    fx.mount();
    CHECK(read_file(fx.path("early")) == early);
    CHECK(read_file(fx.path("big")) == big);
    CHECK(read_file(fx.path("small")) == small);
}
