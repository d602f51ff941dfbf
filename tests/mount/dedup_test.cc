// Deduplication seen through the mount: copies of one file are stored once,
// and copy_file_range shares chunks instead of copying bytes. Stored bytes
// are read with the engine library after each unmount.
//
// On Debian 12 (coreutils 9.1) both plain `cp` and `cp --reflink=auto` try
// the FICLONE ioctl first (FUSE answers EOPNOTSUPP) and then copy with
// copy_file_range(2); between two files of one FUSE mount the kernel sends
// that as FUSE_COPY_FILE_RANGE to the daemon. The test calls `cp` and the
// system call directly.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

// Writes a pseudo-random file of `size` bytes without holding it in memory.
void write_random_file(const std::string& path, std::uint64_t size, std::uint64_t seed) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    std::string block(kMiB, '\0');
    for (std::uint64_t off = 0; off < size; off += kMiB) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kMiB, size - off));
        fill_random(block.data(), n, seed * 1000003 + off / kMiB);
        REQUIRE(::pwrite(fd, block.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
    }
    REQUIRE(::close(fd) == 0);
}

// copy_file_range(2) of [in_off, in_off+len) to out_off, looping on short copies.
std::uint64_t copy_range(const std::string& from, std::uint64_t in_off, const std::string& to,
                         std::uint64_t out_off, std::uint64_t len, bool create) {
    int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(in >= 0);
    int out = ::open(to.c_str(), O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0644);
    REQUIRE(out >= 0);
    loff_t ioff = static_cast<loff_t>(in_off), ooff = static_cast<loff_t>(out_off);
    std::uint64_t done = 0;
    while (done < len) {
        ssize_t n = ::copy_file_range(in, &ioff, out, &ooff, len - done, 0);
        if (n < 0 && errno == EINTR) continue;
        INFO("copy_file_range: " << std::strerror(errno));
        REQUIRE(n >= 0);
        if (n == 0) break;
        done += static_cast<std::uint64_t>(n);
    }
    ::close(in);
    REQUIRE(::close(out) == 0);
    return done;
}

}  // namespace

TEST_CASE("ten copies of one file are stored once; copy_file_range shares chunks", "[dedup][slow]") {
    const std::string chunking = GENERATE(as<std::string>{}, "chunking=cdc", "chunking=fixed");
    // Inline mode: stored bytes are final when the daemon exits (a deferred
    // pass would still owe work).
    std::vector<std::string> opts = {chunking, "mode=inline"};
    if (chunking == "chunking=fixed") opts.push_back("chunk_size=4096");
    MountFixture fx(opts);
    INFO("mount options: " << chunking);
    const std::uint64_t size = static_cast<std::uint64_t>(env_long("HIODSFS_DEDUP_MIB", 100)) * kMiB;
    const int copies = 10;
    const std::string src = fx.scratch("random.bin");
    write_random_file(src, size, 77);

    const hiodsfs::SpaceCounters base = fx.counters_between_mounts();
    INFO("empty store: " << describe(base));
    for (int i = 0; i < copies; ++i) {
        CmdResult r = run({"cp", src, fx.path("copy-" + std::to_string(i))});
        INFO("cp: " << r.describe());
        REQUIRE(r.ok());
    }
    fx.unmount();
    const hiodsfs::SpaceCounters c1 = fx.counters();
    INFO("after " << copies << " copies: " << describe(c1));
    const std::uint64_t grown = c1.stored_bytes - base.stored_bytes;
    CHECK(grown >= size);            // random data: nothing to share inside one copy
    CHECK(grown <= size + size / 10);  // ... but the other nine copies share all of it
    CHECK(c1.logical_bytes - base.logical_bytes == copies * size);
    CHECK(c1.dedup_hits > base.dedup_hits);

    fx.mount();
    for (int i = 0; i < copies; i += 3) {
        INFO("copy " << i << " after remount");
        CHECK(compare_files(src, fx.path("copy-" + std::to_string(i))) == "");
    }
    auto t0 = std::chrono::steady_clock::now();
    CmdResult r = run({"cp", fx.path("copy-0"), fx.path("cp-clone")});
    const double cp_s = seconds_since(t0);
    INFO("cp inside the mount: " << r.describe());
    REQUIRE(r.ok());
    t0 = std::chrono::steady_clock::now();
    CHECK(copy_range(fx.path("copy-1"), 0, fx.path("cfr-clone"), 0, size, true) == size);
    const double cfr_s = seconds_since(t0);
    WARN("copying " << size / kMiB << " MiB inside the mount took " << cp_s << " s with cp and "
                    << cfr_s << " s with copy_file_range(2)");
    CHECK(cp_s < 10);
    CHECK(cfr_s < 10);

    fx.unmount();
    const hiodsfs::SpaceCounters c2 = fx.counters();
    INFO("after cp and copy_file_range inside the mount: " << describe(c2));
    CHECK(c2.stored_bytes == c1.stored_bytes);
    CHECK(c2.logical_bytes == c1.logical_bytes + 2 * size);
    // The copies went through the engine's clone path, not a byte copy.
    CHECK(c2.cloned_bytes - c1.cloned_bytes >= 2 * size);

    fx.mount();
    CHECK(compare_files(src, fx.path("cp-clone")) == "");
    CHECK(compare_files(src, fx.path("cfr-clone")) == "");

    // Unaligned ranges: into the middle of an existing file, past its end.
    const std::string head = random_bytes(10000, 78);
    write_file(fx.path("partial"), head);
    const std::uint64_t in_off = 3 * 4096 + 5, out_off = 777, len = 3 * kMiB + 17;
    CHECK(copy_range(fx.path("copy-2"), in_off, fx.path("partial"), out_off, len, false) == len);
    // Past the source's end copy_file_range copies what is there.
    CHECK(copy_range(fx.path("copy-2"), size - 100, fx.path("tail"), 0, 1000, true) == 100);
    fx.remount();
    std::string expect = head.substr(0, out_off);
    {
        int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        std::string mid(len, '\0');
        REQUIRE(::pread(fd, mid.data(), len, static_cast<off_t>(in_off)) == static_cast<ssize_t>(len));
        expect += mid;
        std::string tail(100, '\0');
        REQUIRE(::pread(fd, tail.data(), 100, static_cast<off_t>(size - 100)) == 100);
        ::close(fd);
        CHECK(read_file(fx.path("tail")) == tail);
    }
    const std::string got = read_file(fx.path("partial"));
    CHECK(got.size() == expect.size());
    CHECK((got == expect));
}
