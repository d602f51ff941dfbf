// Stores written by hiodsfs of formats 1, 2 and 3, through a real mount: the daemon
// refuses it with one line naming the upgrade command; after hiodsfs-fsck
// --upgrade every file reads back as it was written (contents, modes, times,
// links, xattrs), the backlog of the old store drains, old content written
// again is deduplicated against the converted index, and fsck is clean.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <string>

#include "../fsck/store_fixture.h"
#include "chunk/fingerprint.h"
#include "meta/records.h"
#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {

// Every file of the fixture's manifest reads back as it was written:
// contents, modes, times, links, xattrs.
void check_manifest(MountFixture& fx, const test::StoreFixture& f) {
    for (const test::ManifestEntry& m : f.entries) {
        INFO(m.path);
        const std::string p = fx.path(m.path);
        struct stat st = stat_of(p);
        CHECK(st.st_mode == m.mode);
        CHECK(st.st_nlink == m.nlink);
        CHECK(st.st_mtim.tv_sec == m.mtime_s);
        CHECK(st.st_mtim.tv_nsec == static_cast<long>(m.mtime_ns));
        if (S_ISREG(m.mode)) {
            CHECK(static_cast<std::uint64_t>(st.st_size) == m.size);
            const std::string data = read_file(p);
            CHECK(thread_sha256().digest(data.data(), data.size()).hex() == m.what);
        } else if (S_ISLNK(m.mode)) {
            char target[4096];
            const ssize_t n = ::readlink(p.c_str(), target, sizeof target);
            REQUIRE(n > 0);
            CHECK(std::string(target, static_cast<std::size_t>(n)) == m.what);
        }
    }
    for (const test::XattrEntry& x : f.xattrs) {
        INFO(x.path << " " << x.name);
        char value[256];
        const ssize_t n = ::lgetxattr(fx.path(x.path).c_str(), x.name.c_str(), value, sizeof value);
        REQUIRE(n >= 0);
        CHECK(std::string(value, static_cast<std::size_t>(n)) == x.value);
    }
}

std::string format_line(const std::string& store) {
    const std::string text = read_file(store + "/FORMAT");
    const std::size_t at = text.find("format ");
    return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

}  // namespace

TEST_CASE("a store of an older format is refused at mount, and upgraded reads back every file",
          "[mount][upgrade]") {
    const int format = GENERATE(1, 2, 3);
    INFO("format " << format);
    MountFixture fx({}, false);
    test::StoreFixture f;
    REQUIRE(test::unpack_store_fixture(fx.dir(), format, &f));

    CmdResult r = run({daemon_binary(), fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(30));
    INFO(r.describe());
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("hiodsfs-fsck --upgrade " + fx.store()) != std::string::npos);

    r = run({HIODSFS_FSCK_BIN, "--upgrade", fx.store()});
    INFO(r.describe());
    REQUIRE(r.status == 0);
    const std::string from_to = "from format version " + std::to_string(format) + " to " + std::to_string(kFormatVersion);
    CHECK(r.out.find(from_to) != std::string::npos);

    fx.mount();
    if (format == 3) {
        // What make-format3-store set and format 4 stores only when it is
        // not the default; before any read can change an atime.
        CHECK(stat_of(fx.path("null-device")).st_rdev == makedev(1, 3));
        const struct stat many = stat_of(fx.path("many-chunks"));
        CHECK(many.st_atim.tv_sec == 981173106);  // 2001-02-03 04:05:06.7 UTC
        CHECK(many.st_atim.tv_nsec == 700000000);
        const struct stat sparse = stat_of(fx.path("sparse"));
        CHECK(sparse.st_blocks > 0);
        CHECK(sparse.st_blocks * 512 < sparse.st_size);  // 4 bytes in 256 KiB of hole
    }
    check_manifest(fx, f);

    // The old store's raw chunks (a deferred file and its copy) are deduplicated now.
    CHECK(wait_drained(fx.store(), std::chrono::seconds(60)));
    const SpaceCounters before = fx.counters_between_mounts();
    CHECK(before.raw_bytes == 0);
    // Written, not cloned (cp would share the chunks with copy_file_range).
    int i = 0;
    for (const char* old : {"dir/random", "deferred", "shifted"}) {
        CmdResult cat = sh("cat " + shq(fx.path(old)) + " >" + shq(fx.path("again-" + std::to_string(++i))));
        INFO(cat.describe());
        REQUIRE(cat.ok());
    }
    const SpaceCounters after = fx.counters_between_mounts();
    CHECK(after.stored_bytes == before.stored_bytes);
    CHECK(after.logical_bytes > before.logical_bytes);
    fx.unmount();
    r = run({HIODSFS_FSCK_BIN, fx.store()});
    INFO(r.describe());
    CHECK(r.status == 0);
}

TEST_CASE("a format-4 store mounts as it is: every file reads back, new chunks are compressed, FORMAT says 5",
          "[mount][upgrade][compression]") {
    MountFixture fx({}, false);
    test::StoreFixture f;
    REQUIRE(test::unpack_store_fixture(fx.dir(), 4, &f));
    REQUIRE(format_line(fx.store()) == "format 4");

    // Read-only, it stays format 4: hiodsfs 0.5.0 can still open it.
    fx.set_options({"ro"});
    fx.mount();
    check_manifest(fx, f);
    fx.unmount();
    CHECK(format_line(fx.store()) == "format 4");

    fx.set_options({});
    fx.mount();
    CHECK(fx.daemon_log().find("is now format 5 (from 4)") != std::string::npos);
    CHECK(format_line(fx.store()) != "format 4");  // 5, or 1005 while an fsync log is open
    check_manifest(fx, f);
    // Text the store holds raw is shared, not stored again compressed.
    SpaceCounters before = fx.counters_between_mounts();
    REQUIRE(sh("cat " + shq(fx.path("text/stdio.h")) + " >" + shq(fx.path("stdio-again"))).ok());
    SpaceCounters after = fx.counters_between_mounts();
    CHECK(after.stored_bytes == before.stored_bytes);
    // New text is compressed (the daemon's default write-path compression).
    std::string text;
    for (const char* h : {"/usr/include/fcntl.h", "/usr/include/signal.h", "/usr/include/time.h", "/usr/include/math.h"})
        text += read_file(h);
    {
        FILE* out = std::fopen(fx.path("new-text").c_str(), "w");
        REQUIRE(out != nullptr);
        REQUIRE(std::fwrite(text.data(), 1, text.size(), out) == text.size());
        REQUIRE(std::fclose(out) == 0);
    }
    before = after;
    after = fx.counters_between_mounts();
    REQUIRE(after.content_bytes > before.content_bytes);
    CHECK(after.stored_bytes - before.stored_bytes < (after.content_bytes - before.content_bytes) / 2);
    CHECK(read_file(fx.path("new-text")) == text);
    check_manifest(fx, f);
    fx.unmount();
    CHECK(format_line(fx.store()) == "format 5");
    CmdResult r = run({HIODSFS_FSCK_BIN, "--scrub", fx.store()});
    INFO(r.describe());
    CHECK(r.status == 0);
}

TEST_CASE("hiodsfs-fsck --upgrade of a format-4 store only marks it 5", "[mount][upgrade][compression]") {
    MountFixture fx({}, false);
    test::StoreFixture f;
    REQUIRE(test::unpack_store_fixture(fx.dir(), 4, &f));
    CmdResult r = run({HIODSFS_FSCK_BIN, "--upgrade", fx.store()});
    INFO(r.describe());
    REQUIRE(r.status == 0);
    CHECK(r.out.find("from format version 4 to " + std::to_string(kFormatVersion)) != std::string::npos);
    CHECK(format_line(fx.store()) == "format 5");
    fx.mount();
    check_manifest(fx, f);
    fx.unmount();
    r = run({HIODSFS_FSCK_BIN, fx.store()});
    INFO(r.describe());
    CHECK(r.status == 0);
}
