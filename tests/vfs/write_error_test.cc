// Lost writes are told to every open file that was open when they were
// lost, once each, at its own fsync or close, as Linux's errseq_t tells a
// writeback error to each struct file: another process's open and close of
// the file must not take the error from its writer.
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "temp_store.h"
#include "vfs/vfs.h"

using namespace hiodsfs;
using hiodsfs::vfs::Caller;
using hiodsfs::vfs::Vfs;

namespace {

// Deferred writes, held in memory until an operation applies them; the
// file `failing` names cannot have them applied.
struct LostWriteFixture {
    test::TempStore dir;
    std::atomic<InodeId> failing{0};
    std::unique_ptr<Engine> engine = dir.open(
        [this] {
            EngineOptions o = dir.options();
            o.mode = DedupMode::kDeferred;
            o.background_threads = 0;
            return o;
        }(),
        [this] {
            EngineHooks hooks;
            hooks.held_write_fault = [this](InodeId ino) {
                return ino == failing.load() ? EIO : 0;
            };
            return hooks;
        }());
    Vfs vfs{*engine, {.writeback_cache = false, .posix_acl = false}};
    Caller user{.uid = 1000, .gid = 1000, .umask = 022, .in_group = {}};
    InodeId ino = 0;

    LostWriteFixture() {
        Attr a;
        REQUIRE(vfs.mknod(user, kRootInode, "f", S_IFREG | 0644, 0, &a).is_ok());
        ino = a.ino;
    }
    ~LostWriteFixture() {
        failing = 0;
        engine->close();
    }

    std::uint64_t open(int flags) {
        std::uint64_t fh = 0;
        REQUIRE(vfs.open(ino, flags, &fh).is_ok());
        return fh;
    }
    void write(std::uint64_t fh, std::uint64_t off) {
        const std::string data(4096, static_cast<char>('a' + off / 4096 % 26));
        REQUIRE(vfs.write(fh, ino, off, data.data(), data.size()).is_ok());
    }
    // A write of fh that is acknowledged and then lost: the getattr, which
    // the kernel sends at every open, applies it.
    void lose_a_write(std::uint64_t fh, std::uint64_t off) {
        failing = ino;
        write(fh, off);
        Attr a;
        (void)vfs.getattr(ino, &a);
        failing = 0;
    }
};

}  // namespace

TEST_CASE_METHOD(LostWriteFixture,
                 "a reader's open and close do not take a lost write's error from its writer",
                 "[vfs][errseq]") {
    const std::uint64_t writer = open(O_WRONLY);
    write(writer, 0);
    REQUIRE(vfs.fsync(writer, ino, false).is_ok());
    const std::uint64_t reader = open(O_RDONLY);
    lose_a_write(writer, 4096);
    CHECK(vfs.flush(reader, ino).is_ok());
    CHECK(vfs.release(reader).is_ok());
    const Status st = vfs.fsync(writer, ino, false);
    CHECK(st.err() == EIO);
    CHECK(st.message().find("lost") != std::string::npos);
    CHECK(vfs.fsync(writer, ino, false).is_ok());  // told once
    CHECK(vfs.release(writer).is_ok());
}

TEST_CASE_METHOD(LostWriteFixture,
                 "every file open when writes were lost is told once, at its own fsync or close",
                 "[vfs][errseq]") {
    const std::uint64_t one = open(O_WRONLY), two = open(O_RDWR), reader = open(O_RDONLY);
    lose_a_write(one, 0);
    CHECK(vfs.fsync(one, ino, false).err() == EIO);
    CHECK(vfs.fsync(one, ino, false).is_ok());
    CHECK(vfs.flush(one, ino).is_ok());
    CHECK(vfs.flush(two, ino).err() == EIO);  // a close of the other writer
    CHECK(vfs.fsync(two, ino, false).is_ok());
    // A reader's fsync is told, as Linux tells it (its close is not).
    CHECK(vfs.fsync(reader, ino, false).err() == EIO);
    CHECK(vfs.fsync(reader, ino, false).is_ok());
    // Opened after the loss, which open files were told of: nothing to tell.
    const std::uint64_t later = open(O_WRONLY);
    CHECK(vfs.fsync(later, ino, false).is_ok());
    // A second loss is news to everyone again.
    lose_a_write(later, 8192);
    CHECK(vfs.flush(later, ino).err() == EIO);
    CHECK(vfs.fsync(one, ino, false).err() == EIO);
    CHECK(vfs.flush(two, ino).err() == EIO);
    for (std::uint64_t fh : {one, two, reader, later}) CHECK(vfs.release(fh).is_ok());
}

TEST_CASE_METHOD(LostWriteFixture, "a loss no open file was told of is told to the next file opened",
                 "[vfs][errseq]") {
    // The writer closes before its held write is applied: its close finds
    // nothing lost. The next file opened, by anyone, is told (Linux 4.16 on).
    const std::uint64_t writer = open(O_WRONLY);
    failing = ino;
    write(writer, 0);
    CHECK(vfs.flush(writer, ino).is_ok());
    CHECK(vfs.release(writer).is_ok());
    Attr a;
    (void)vfs.getattr(ino, &a);  // the apply that loses it
    failing = 0;
    const std::uint64_t next = open(O_RDONLY);
    CHECK(vfs.fsync(next, ino, false).err() == EIO);
    const std::uint64_t after = open(O_RDWR);
    CHECK(vfs.fsync(after, ino, false).is_ok());
    CHECK(vfs.fsync(next, ino, false).is_ok());
    CHECK(vfs.release(next).is_ok());
    CHECK(vfs.release(after).is_ok());
}
