// A randomized model test through the mount: pwrite, O_APPEND writes,
// truncate, hole punching and copy_file_range on a few files, checked
// against in-memory copies along the way and after every remount; once with
// the kernel's writeback cache, once writing through, and once on an
// encrypted store.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>

#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

constexpr int kFiles = 4;

std::string describe_diff(const std::string& want, const std::string& got) {
    if (want.size() != got.size())
        return "size " + std::to_string(got.size()) + ", expected " + std::to_string(want.size());
    std::size_t i = 0;
    while (i < want.size() && want[i] == got[i]) ++i;
    return i == want.size() ? "" : "first difference at byte " + std::to_string(i);
}

}  // namespace

TEST_CASE("random operations match an in-memory model, across remounts", "[model][slow]") {
    const std::string cache = GENERATE(as<std::string>{}, "writeback_cache", "no_writeback_cache", "encrypted");
    // The third: an encrypted store (its chunks sealed, read back opened).
    TempDir keys;
    std::vector<std::string> options = {cache};
    if (cache == "encrypted") {
        const std::string key = keys.path() + "/store.key";
        write_file(key, random_bytes(32, 404), 0600);
        options = {"writeback_cache", "key_file=" + key};
    }
    MountFixture fx(options);
    INFO("mount option " << cache);
    const long ops = env_long("HIODSFS_MODEL_OPS", 4000);
    const long remount_every = std::max(1L, ops / 4);
    std::array<std::string, kFiles> model;
    std::array<int, kFiles> fds{};
    auto path = [&](int i) { return fx.path("m" + std::to_string(i)); };
    auto open_all = [&] {
        for (int i = 0; i < kFiles; ++i) {
            fds[static_cast<std::size_t>(i)] = ::open(path(i).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            REQUIRE(fds[static_cast<std::size_t>(i)] >= 0);
        }
    };
    auto close_all = [&] {
        for (int& fd : fds) {
            REQUIRE(::close(fd) == 0);
            fd = -1;
        }
    };
    auto verify_all = [&](const std::string& when) {
        for (int i = 0; i < kFiles; ++i) {
            INFO(when << ": file m" << i);
            const std::string got = read_file(path(i));
            const std::string diff = describe_diff(model[static_cast<std::size_t>(i)], got);
            CHECK(diff == "");
            CHECK(stat_of(path(i)).st_size == static_cast<off_t>(model[static_cast<std::size_t>(i)].size()));
        }
    };
    bool punch_ok = true;
    std::uint64_t rng = 4242;
    std::string history;  // the last operations, for failure messages
    open_all();
    for (long n = 1; n <= ops; ++n) {
        const auto f = static_cast<std::size_t>(splitmix64(rng) % kFiles);
        std::string& m = model[f];
        const int fd = fds[f];
        const std::uint64_t op = splitmix64(rng) % 100;
        const std::uint64_t size = m.size();
        std::string what;
        if (op < 40) {  // pwrite: mostly near the end, sometimes far past it
            std::uint64_t off = splitmix64(rng) % (size + 65536);
            if (splitmix64(rng) % 20 == 0) off = size + splitmix64(rng) % (8 * kMiB);
            const std::size_t len = 1 + splitmix64(rng) % (splitmix64(rng) % 4 == 0 ? 300000 : 9000);
            std::string data;
            switch (splitmix64(rng) % 4) {
                case 0: data.assign(len, '\0'); break;                       // zeros
                case 1: data = model[(f + 1) % kFiles].substr(0, len); break;  // shared with another file
                default: data = random_bytes(len, rng); break;
            }
            if (data.empty()) data = "x";
            what = "pwrite " + std::to_string(data.size()) + " @" + std::to_string(off);
            REQUIRE(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off)) ==
                    static_cast<ssize_t>(data.size()));
            if (m.size() < off + data.size()) m.resize(off + data.size(), '\0');
            m.replace(off, data.size(), data);
        } else if (op < 50) {  // O_APPEND through a second descriptor
            const std::string data = random_bytes(1 + splitmix64(rng) % 20000, rng);
            what = "append " + std::to_string(data.size());
            int afd = ::open(path(static_cast<int>(f)).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
            REQUIRE(afd >= 0);
            REQUIRE(::write(afd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
            REQUIRE(::close(afd) == 0);
            m += data;
        } else if (op < 60) {  // truncate shorter or longer
            const std::uint64_t len = splitmix64(rng) % (size + 200000);
            what = "ftruncate " + std::to_string(len);
            REQUIRE(::ftruncate(fd, static_cast<off_t>(len)) == 0);
            m.resize(len, '\0');
        } else if (op < 66) {  // punch a hole
            if (!punch_ok || size == 0) continue;
            const std::uint64_t off = splitmix64(rng) % size;
            const std::uint64_t len = 1 + splitmix64(rng) % 100000;
            what = "punch " + std::to_string(len) + " @" + std::to_string(off);
            int r = ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                                static_cast<off_t>(len));
            if (r != 0 && errno == EOPNOTSUPP) {
                punch_ok = false;
                continue;
            }
            REQUIRE(r == 0);
            const std::uint64_t end = std::min<std::uint64_t>(size, off + len);
            std::fill(m.begin() + static_cast<std::ptrdiff_t>(off), m.begin() + static_cast<std::ptrdiff_t>(end), '\0');
        } else if (op < 74) {  // copy_file_range from another file
            const std::size_t g = (f + 1 + splitmix64(rng) % (kFiles - 1)) % kFiles;
            const std::string& src = model[g];
            if (src.empty()) continue;
            const std::uint64_t in_off = splitmix64(rng) % src.size();
            const std::uint64_t len = 1 + splitmix64(rng) % 400000;
            const std::uint64_t out_off = splitmix64(rng) % (size + 70000);
            what = "copy_file_range m" + std::to_string(g) + " " + std::to_string(len) + " @" +
                   std::to_string(in_off) + " -> @" + std::to_string(out_off);
            loff_t io = static_cast<loff_t>(in_off), oo = static_cast<loff_t>(out_off);
            const ssize_t got = ::copy_file_range(fds[g], &io, fd, &oo, len, 0);
            INFO(what << ": " << std::strerror(errno));
            REQUIRE(got >= 0);
            const std::uint64_t copied = static_cast<std::uint64_t>(got);
            REQUIRE(copied <= std::min<std::uint64_t>(len, src.size() - in_off));
            const std::string piece = src.substr(in_off, copied);
            if (copied > 0) {
                if (m.size() < out_off + copied) m.resize(out_off + copied, '\0');
                m.replace(out_off, copied, piece);
            }
        } else if (op < 94) {  // read a range back through the open descriptor
            if (size == 0) continue;
            const std::uint64_t off = splitmix64(rng) % size;
            const std::size_t len = 1 + splitmix64(rng) % 200000;
            what = "pread " + std::to_string(len) + " @" + std::to_string(off);
            std::string buf(len, '\0');
            const ssize_t got = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
            REQUIRE(got >= 0);
            buf.resize(static_cast<std::size_t>(got));
            INFO("after: " << history << "\nfile m" << f << ", " << what);
            REQUIRE(buf == m.substr(off, len));
        } else if (op < 97) {
            what = "fsync";
            REQUIRE(::fsync(fd) == 0);
        } else {
            what = "stat";
            struct stat st{};
            REQUIRE(::fstat(fd, &st) == 0);
            INFO("after: " << history);
            REQUIRE(st.st_size == static_cast<off_t>(m.size()));
        }
        history += "\n  m" + std::to_string(f) + ": " + what;
        if (history.size() > 3000) history.erase(0, history.find('\n', history.size() - 2000));
        if (n % remount_every == 0) {
            close_all();
            verify_all("before remount after op " + std::to_string(n));
            fx.remount();
            verify_all("after remount after op " + std::to_string(n));
            open_all();
        }
    }
    close_all();
}
