// Concurrency through the mount: 4 writer and 4 reader threads for
// $HIODSFS_CONCURRENCY_SECONDS (default 30) on private files, one shared
// file and files published by rename; everything is verified exactly when
// the threads stop and again after a remount.
//
// Every 4 KiB block written is self-describing (file, block, generation in a
// header; the rest derived from them), so a reader can tell a valid block
// from garbage without knowing the writers' timing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "../skip.h"
#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::uint32_t kMagic = 0x4d54424b;  // "MTBK"
constexpr int kWriters = 4;
constexpr int kReaders = 4;
constexpr std::uint32_t kPrivateBlocks = 1024;  // 4 MiB each
constexpr std::uint32_t kSharedBlocks = 4096;   // 16 MiB
constexpr std::uint32_t kSharedId = 100;

struct Header {
    std::uint32_t magic, file, block, gen;
};

void make_block(char* out, std::uint32_t file, std::uint32_t block, std::uint32_t gen) {
    fill_random(out, kBlock, (static_cast<std::uint64_t>(file) << 48) ^
                                 (static_cast<std::uint64_t>(block) << 24) ^ gen);
    const Header h{kMagic, file, block, gen};
    std::memcpy(out, &h, sizeof h);
}

// True when `data` is a block of zeros or a block make_block() wrote for
// (file, block) with some generation.
bool valid_block(const char* data, std::uint32_t file, std::uint32_t block) {
    Header h;
    std::memcpy(&h, data, sizeof h);
    if (h.magic == 0) {
        for (std::size_t i = 0; i < kBlock; ++i)
            if (data[i] != 0) return false;
        return true;
    }
    if (h.magic != kMagic || h.file != file || h.block != block) return false;
    char expect[kBlock];
    make_block(expect, file, block, h.gen);
    return std::memcmp(expect, data, kBlock) == 0;
}

// Content of a published (immutable) file.
std::string published_content(int writer, std::uint64_t n) {
    std::uint64_t s = static_cast<std::uint64_t>(writer) * 1000003 + n;
    const std::size_t size = 1 + static_cast<std::size_t>(splitmix64(s) % (300 * kKiB));
    return random_bytes(size, 0xabc000 + static_cast<std::uint64_t>(writer) * 1000003 + n);
}

class Errors {
public:
    void add(std::string e) {
        std::lock_guard<std::mutex> g(mu_);
        ++count_;
        if (list_.size() < 20) list_.push_back(std::move(e));
    }
    std::size_t count() const { return count_; }
    std::string text() const {
        std::string s;
        for (const auto& e : list_) s += e + "\n";
        return s;
    }

private:
    std::mutex mu_;
    std::vector<std::string> list_;
    std::atomic<std::size_t> count_{0};
};

std::string errstr(const char* what, const std::string& path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

struct Writer {
    int id = 0;
    std::vector<std::uint32_t> priv;    // generation per block of the private file (0: zeros)
    std::uint32_t priv_size = 0;        // in blocks
    std::vector<std::uint32_t> shared;  // generation per shared block this writer owns
    std::atomic<std::uint64_t> published{0};  // pub-<id>-<n> exist for n in (published-5, published]
    std::uint64_t ops = 0;
};

// Validates [off, off+len) of an open file read in one pread; retries a few
// times because a read racing a write may legitimately see a torn block.
bool check_range(int fd, std::uint32_t file, std::uint32_t first, std::uint32_t count, std::string* why) {
    std::vector<char> buf(count * kBlock);
    for (int attempt = 0; attempt < 4; ++attempt) {
        ssize_t got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(first) * kBlock);
        if (got < 0) {
            *why = std::string("pread: ") + std::strerror(errno);
            return false;
        }
        bool ok = got % static_cast<ssize_t>(kBlock) == 0;
        std::uint32_t bad = 0;
        for (std::uint32_t b = 0; ok && b < static_cast<std::uint32_t>(got) / kBlock; ++b) {
            if (!valid_block(buf.data() + b * kBlock, file, first + b)) {
                ok = false;
                bad = first + b;
            }
        }
        if (ok) return true;
        *why = got % static_cast<ssize_t>(kBlock) != 0
                   ? "a read returned " + std::to_string(got) + " bytes, not whole blocks"
                   : "block " + std::to_string(bad) + " of file " + std::to_string(file) +
                         " is neither zeros nor a block written to it";
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}

// Verifies a private or shared file block by block against the model.
void verify_file(const std::string& path, std::uint32_t file, const std::vector<std::uint32_t>& gens,
                 std::uint32_t size_blocks, Errors& errors) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errors.add(errstr("open", path));
        return;
    }
    struct stat st{};
    ::fstat(fd, &st);
    if (static_cast<std::uint64_t>(st.st_size) != static_cast<std::uint64_t>(size_blocks) * kBlock) {
        errors.add(path + ": size " + std::to_string(st.st_size) + ", expected " +
                   std::to_string(static_cast<std::uint64_t>(size_blocks) * kBlock));
    }
    std::vector<char> buf(static_cast<std::size_t>(size_blocks) * kBlock);
    ssize_t got = ::pread(fd, buf.data(), buf.size(), 0);
    ::close(fd);
    if (got != static_cast<ssize_t>(buf.size())) {
        errors.add(path + ": read " + std::to_string(got) + " bytes of " + std::to_string(buf.size()));
        return;
    }
    char expect[kBlock];
    for (std::uint32_t b = 0; b < size_blocks; ++b) {
        if (gens[b] == 0)
            std::memset(expect, 0, kBlock);
        else
            make_block(expect, file, b, gens[b]);
        if (std::memcmp(expect, buf.data() + static_cast<std::size_t>(b) * kBlock, kBlock) != 0) {
            errors.add(path + ": block " + std::to_string(b) + " is not generation " +
                       std::to_string(gens[b]));
        }
    }
}

}  // namespace

TEST_CASE("4 writers and 4 readers on private, shared and renamed files", "[concurrency][slow]") {
    const long seconds = env_long("HIODSFS_CONCURRENCY_SECONDS", 30);
    MountFixture fx;
    const std::string dir = fx.path("conc");
    make_dir(dir);
    const std::string shared_path = dir + "/shared";
    write_file(shared_path, "");
    auto priv_path = [&](int w) { return dir + "/priv-" + std::to_string(w); };
    auto pub_path = [&](int w, std::uint64_t n) {
        return dir + "/pub-" + std::to_string(w) + "-" + std::to_string(n);
    };

    Errors errors;
    std::atomic<bool> stop{false};
    std::vector<Writer> writers(kWriters);
    std::atomic<std::uint64_t> reads{0}, pub_reads{0};

    auto writer_main = [&](Writer& w) {
        std::uint64_t rng = 0x1234 + static_cast<std::uint64_t>(w.id);
        w.priv.assign(kPrivateBlocks, 0);
        w.shared.assign(kSharedBlocks, 0);
        std::uint32_t gen = 0;
        const std::string pp = priv_path(w.id);
        int pfd = ::open(pp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int sfd = ::open(shared_path.c_str(), O_RDWR | O_CLOEXEC);
        if (pfd < 0 || sfd < 0) {
            errors.add(errstr("open", pp));
            return;
        }
        std::vector<char> buf(16 * kBlock);
        while (!stop.load()) {
            ++w.ops;
            const std::uint64_t op = splitmix64(rng) % 100;
            if (op < 60) {  // a run of blocks in the private file
                const auto first = static_cast<std::uint32_t>(splitmix64(rng) % kPrivateBlocks);
                const auto n = std::min<std::uint32_t>(1 + static_cast<std::uint32_t>(splitmix64(rng) % 16),
                                                       kPrivateBlocks - first);
                for (std::uint32_t b = 0; b < n; ++b) make_block(buf.data() + b * kBlock, static_cast<std::uint32_t>(w.id), first + b, ++gen);
                ssize_t r = ::pwrite(pfd, buf.data(), n * kBlock, static_cast<off_t>(first) * kBlock);
                if (r != static_cast<ssize_t>(n * kBlock)) {
                    errors.add(errstr("pwrite", pp));
                    break;
                }
                for (std::uint32_t b = 0; b < n; ++b) w.priv[first + b] = gen - n + 1 + b;
                w.priv_size = std::max(w.priv_size, first + n);
            } else if (op < 80) {  // one of this writer's blocks of the shared file
                auto b = static_cast<std::uint32_t>(splitmix64(rng) % (kSharedBlocks / kWriters)) * kWriters +
                         static_cast<std::uint32_t>(w.id);
                make_block(buf.data(), kSharedId, b, ++gen);
                if (::pwrite(sfd, buf.data(), kBlock, static_cast<off_t>(b) * kBlock) != static_cast<ssize_t>(kBlock)) {
                    errors.add(errstr("pwrite", shared_path));
                    break;
                }
                w.shared[b] = gen;
            } else if (op < 88) {  // publish a new immutable file by rename
                const std::uint64_t n = w.published.load() + 1;
                const std::string content = published_content(w.id, n);
                const std::string tmp = dir + "/.tmp-" + std::to_string(w.id);
                int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                std::size_t done = 0;
                while (fd >= 0 && done < content.size()) {  // in uneven pieces
                    const std::size_t piece = std::min<std::size_t>(content.size() - done, 1 + splitmix64(rng) % 70000);
                    if (::write(fd, content.data() + done, piece) != static_cast<ssize_t>(piece)) break;
                    done += piece;
                }
                if (fd < 0 || done != content.size() || ::close(fd) != 0 ||
                    ::rename(tmp.c_str(), pub_path(w.id, n).c_str()) != 0) {
                    errors.add(errstr("publish", pub_path(w.id, n)));
                    break;
                }
                w.published.store(n);
                if (n > 5 && ::unlink(pub_path(w.id, n - 5).c_str()) != 0) {
                    errors.add(errstr("unlink", pub_path(w.id, n - 5)));
                }
            } else if (op < 92) {  // shrink or grow the private file
                const auto len = static_cast<std::uint32_t>(splitmix64(rng) % kPrivateBlocks);
                if (::ftruncate(pfd, static_cast<off_t>(len) * kBlock) != 0) {
                    errors.add(errstr("ftruncate", pp));
                    break;
                }
                for (std::uint32_t b = len; b < kPrivateBlocks; ++b) w.priv[b] = 0;
                w.priv_size = len;
            } else if (op < 95) {
                if ((op & 1 ? ::fsync(pfd) : ::fdatasync(pfd)) != 0) errors.add(errstr("fsync", pp));
            } else {
                struct stat st{};
                if (::stat(pp.c_str(), &st) != 0) errors.add(errstr("stat", pp));
            }
        }
        ::close(pfd);
        ::close(sfd);
    };

    auto reader_main = [&](int id) {
        std::uint64_t rng = 0x9876 + static_cast<std::uint64_t>(id);
        while (!stop.load()) {
            const std::uint64_t op = splitmix64(rng) % 100;
            if (op < 70) {
                const int w = static_cast<int>(splitmix64(rng) % (kWriters + 1));
                const bool shared = w == kWriters;
                const std::string p = shared ? shared_path : priv_path(w);
                int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                    if (errno != ENOENT) errors.add(errstr("open", p));
                    continue;
                }
                const std::uint32_t nblocks = shared ? kSharedBlocks : kPrivateBlocks;
                const auto first = static_cast<std::uint32_t>(splitmix64(rng) % nblocks);
                const auto n = std::min<std::uint32_t>(1 + static_cast<std::uint32_t>(splitmix64(rng) % 32), nblocks - first);
                std::string why;
                if (!check_range(fd, shared ? kSharedId : static_cast<std::uint32_t>(w), first, n, &why)) {
                    errors.add("reader: " + p + ": " + why);
                }
                ::close(fd);
                ++reads;
            } else {
                const int w = static_cast<int>(splitmix64(rng) % kWriters);
                const std::uint64_t top = writers[static_cast<std::size_t>(w)].published.load();
                if (top == 0) continue;
                const std::uint64_t n = top - splitmix64(rng) % std::min<std::uint64_t>(top, 4);
                const std::string p = pub_path(w, n);
                int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                    if (errno != ENOENT) errors.add(errstr("open", p));  // ENOENT: already replaced
                    continue;
                }
                const std::string want = published_content(w, n);
                std::string got(want.size() + 1, '\0');
                ssize_t r = ::pread(fd, got.data(), got.size(), 0);
                ::close(fd);
                if (r != static_cast<ssize_t>(want.size()) || std::memcmp(got.data(), want.data(), want.size()) != 0) {
                    errors.add("reader: " + p + ": contents differ from what was published (read " +
                               std::to_string(r) + " of " + std::to_string(want.size()) + " bytes)");
                }
                ++pub_reads;
            }
        }
    };

    {
        std::vector<std::thread> threads;
        for (int i = 0; i < kWriters; ++i) {
            writers[static_cast<std::size_t>(i)].id = i;
            threads.emplace_back(writer_main, std::ref(writers[static_cast<std::size_t>(i)]));
        }
        for (int i = 0; i < kReaders; ++i) threads.emplace_back(reader_main, i);
        for (long s = 0; s < seconds * 10 && errors.count() == 0; ++s) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        stop.store(true);
        for (auto& t : threads) t.join();
    }
    std::uint64_t writes = 0;
    for (const auto& w : writers) writes += w.ops;
    WARN("concurrency: " << writes << " writer operations, " << reads.load() << " block-range reads, "
                         << pub_reads.load() << " published-file reads in " << seconds << " s");
    INFO("errors during the run (" << errors.count() << "):\n" << errors.text());
    REQUIRE(errors.count() == 0);

    auto verify_all = [&](const char* when) {
        Errors verr;
        std::vector<std::uint32_t> shared(kSharedBlocks, 0);
        std::uint32_t shared_size = 0;
        for (const auto& w : writers) {
            verify_file(priv_path(w.id), static_cast<std::uint32_t>(w.id), w.priv, w.priv_size, verr);
            for (std::uint32_t b = 0; b < kSharedBlocks; ++b) {
                if (w.shared[b] != 0) {
                    shared[b] = w.shared[b];
                    shared_size = std::max(shared_size, b + 1);
                }
            }
            const std::uint64_t top = w.published.load();
            for (std::uint64_t n = top > 5 ? top - 4 : 1; n <= top; ++n) {
                const std::string p = pub_path(w.id, n);
                if (!exists(p)) {
                    verr.add(p + " is missing");
                    continue;
                }
                std::string got = read_file(p);
                if (got != published_content(w.id, n)) verr.add(p + ": contents differ");
            }
            if (top > 5 && exists(pub_path(w.id, top - 5))) verr.add(pub_path(w.id, top - 5) + " was not removed");
        }
        verify_file(shared_path, kSharedId, shared, shared_size, verr);
        INFO(when << ": " << verr.count() << " problems:\n" << verr.text());
        CHECK(verr.count() == 0);
    };
    verify_all("when the threads stopped");
    fx.remount();
    verify_all("after remount");
}

// O_DIRECT writers of one file, as a database's or a VM image's: the open
// says FOPEN_PARALLEL_DIRECT_WRITES, so the kernel sends their overwrites
// inside the file at once (it takes the inode lock for each one
// otherwise), and the engine runs them in windows of their own
// (status.json `overwrites_beside_others`, 0 before either change). An
// O_DIRECT reader checks every block it sees; at the end the file is as
// modelled, through the cache, O_DIRECT and a remount, each kind of
// descriptor sees the other's writes, and O_DIRECT takes unaligned I/O.
TEST_CASE("O_DIRECT overwrites of one file from 4 threads run at once and end as modelled", "[concurrency]") {
    constexpr std::uint32_t kBlocks = 4096, kFile = 7;  // 16 MiB
    MountFixture fx({"chunking=cdc", "mode=inline"});
    const std::string path = fx.path("db");
    std::vector<char> all(std::size_t{kBlocks} * kBlock);
    for (std::uint32_t b = 0; b < kBlocks; ++b) make_block(all.data() + std::size_t{b} * kBlock, kFile, b, 0);
    write_file(path, std::string(all.data(), all.size()));
    std::vector<std::uint32_t> gen(kBlocks, 0);  // each block has one writer
    Errors errors;
    std::atomic<int> left{kWriters};
    auto writer = [&](int w) {
        const int fd = ::open(path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
        if (fd < 0) {
            errors.add(errstr("open O_DIRECT", path));
            left.fetch_sub(1);
            return;
        }
        void* mem = nullptr;
        if (::posix_memalign(&mem, kBlock, kBlock) != 0) std::abort();
        char* buf = static_cast<char*>(mem);
        std::uint64_t rng = 0x0d1ec7 + static_cast<std::uint64_t>(w);
        for (int op = 0; op < 1500; ++op) {
            const auto block = static_cast<std::uint32_t>(splitmix64(rng) % (kBlocks / kWriters)) * kWriters +
                               static_cast<std::uint32_t>(w);
            make_block(buf, kFile, block, gen[block] + 1);
            if (::pwrite(fd, buf, kBlock, static_cast<off_t>(block) * kBlock) != static_cast<ssize_t>(kBlock)) {
                errors.add(errstr("pwrite O_DIRECT", path));
                break;
            }
            ++gen[block];
        }
        std::free(mem);
        ::close(fd);
        left.fetch_sub(1);
    };
    // O_DIRECT too: while any descriptor of the file is open through the
    // page cache, the kernel takes the inode lock for direct writes again.
    auto reader = [&] {
        const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        void* mem = nullptr;
        if (::posix_memalign(&mem, kBlock, 64 * kBlock) != 0) std::abort();
        const char* buf = static_cast<const char*>(mem);
        std::uint64_t rng = 0x4ead;
        while (fd >= 0 && left.load() > 0) {
            const auto first = static_cast<std::uint32_t>(splitmix64(rng) % (kBlocks - 64));
            if (::pread(fd, mem, 64 * kBlock, static_cast<off_t>(first) * kBlock) != static_cast<ssize_t>(64 * kBlock)) {
                errors.add(errstr("pread O_DIRECT", path));
                break;
            }
            for (std::uint32_t i = 0; i < 64; ++i)
                if (!valid_block(buf + std::size_t{i} * kBlock, kFile, first + i))
                    errors.add("block " + std::to_string(first + i) + " torn or misplaced");
        }
        std::free(mem);
        if (fd >= 0) ::close(fd);
    };
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) threads.emplace_back(writer, w);
    threads.emplace_back(reader);
    for (auto& t : threads) t.join();
    INFO(errors.text());
    REQUIRE(errors.count() == 0);
    for (std::uint32_t b = 0; b < kBlocks; ++b) make_block(all.data() + std::size_t{b} * kBlock, kFile, b, gen[b]);
    const std::string want(all.data(), all.size());
    CHECK(read_file(path) == want);
    // status.json is rewritten every control interval.
    for (int i = 0; i < 50 && status_field(fx.store(), "overwrites_beside_others") < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(status_field(fx.store(), "overwrites_beside_others") > 0);

    // O_DIRECT reads the same bytes; a write through the page cache is
    // seen by an O_DIRECT read.
    {
        const int fd = ::open(path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
        REQUIRE(fd >= 0);
        void* mem = nullptr;
        REQUIRE(::posix_memalign(&mem, kBlock, 64 * kBlock) == 0);
        REQUIRE(::pread(fd, mem, 64 * kBlock, 0) == static_cast<ssize_t>(64 * kBlock));
        CHECK(std::memcmp(mem, want.data(), 64 * kBlock) == 0);
        const int cached = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(cached >= 0);
        REQUIRE(::pwrite(cached, "cached", 6, 0) == 6);
        REQUIRE(::fsync(cached) == 0);
        ::close(cached);
        REQUIRE(::pread(fd, mem, kBlock, 0) == static_cast<ssize_t>(kBlock));
        CHECK(std::memcmp(mem, "cached", 6) == 0);
        std::free(mem);
        // Any alignment of buffer, offset and length (README).
        const std::string odd = random_bytes(99, 99);
        REQUIRE(::pwrite(fd, odd.data(), odd.size(), 12345) == static_cast<ssize_t>(odd.size()));
        char back[99];
        REQUIRE(::pread(fd, back, sizeof back, 12345) == static_cast<ssize_t>(sizeof back));
        CHECK(std::memcmp(back, odd.data(), sizeof back) == 0);
        ::close(fd);
        std::memcpy(all.data() + 12345, odd.data(), odd.size());
    }
    std::string after = want;
    std::memcpy(after.data() + 12345, all.data() + 12345, 99);
    std::memcpy(after.data(), "cached", 6);
    fx.remount();
    CHECK(read_file(path) == after);
}

namespace {

// fsfreeze of a file system for the scope, thawed however the test ends.
struct Frozen {
    std::string dir;
    bool frozen = false;
    explicit Frozen(std::string d) : dir(std::move(d)) {
        CmdResult r = run({"fsfreeze", "-f", dir});
        INFO("fsfreeze -f: " << r.describe());
        REQUIRE(r.ok());
        frozen = true;
    }
    void thaw() {
        if (frozen) run({"fsfreeze", "-u", dir});
        frozen = false;
    }
    ~Frozen() { thaw(); }
};

}  // namespace

// Issue 13: reads never wait for writers. With the store's file system
// frozen, the next group commit waits inside LMDB's commit for its page
// writes; a stat and an O_DIRECT read of a file committed before must be
// answered meanwhile, from the committed state.
TEST_CASE("stat and read are answered while a group commit waits for a frozen disk", "[mount][concurrency]") {
    if (!is_root() || which("mkfs.ext4").empty() || which("fsfreeze").empty())
        SKIP_TEST("needs root, mkfs.ext4 and fsfreeze (a loop-mounted ext4 to freeze)");
    TempDir t;
    LoopExt4 fs(t.path() + "/ext4", 256 * kMiB);
    ForegroundDaemon d{fs.dir + "/store", t.path() + "/mnt"};
    make_dir(d.mnt);
    // Every stat and lookup reaches the daemon; a commit every 200 ms.
    d.start({"attr_timeout=0", "entry_timeout=0", "commit_interval=200"});
    const std::string a = d.mnt + "/a", b = d.mnt + "/b";
    const std::string data = random_bytes(kMiB, 41);
    write_file(a, data);
    write_file(b, random_bytes(kMiB, 42));
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // both are committed
    Frozen frozen(fs.dir);  // writes everything out first
    // A change of the metadata alone: no disk write until the commit,
    // whose first is LMDB's, which now waits for the thaw.
    REQUIRE(::chmod(b.c_str(), 0600) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));

    std::atomic<bool> done{false};
    off_t size = -1;
    std::string got;
    std::thread reader([&] {
        struct stat st {};
        if (::stat(a.c_str(), &st) == 0) size = st.st_size;
        const int fd = ::open(a.c_str(), O_RDONLY | O_DIRECT);
        if (fd >= 0) {
            void* buf = nullptr;
            if (::posix_memalign(&buf, 4096, kMiB) == 0) {
                const ssize_t n = ::pread(fd, buf, kMiB, 0);
                if (n > 0) got.assign(static_cast<char*>(buf), static_cast<std::size_t>(n));
                std::free(buf);
            }
            ::close(fd);
        }
        done = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    while (!done && seconds_since(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double waited = seconds_since(t0);
    const bool answered_while_frozen = done;
    frozen.thaw();  // a reader that waited finishes now
    reader.join();
    INFO("the stat and read took " << waited << " s with the disk frozen");
    CHECK(answered_while_frozen);
    CHECK(size == static_cast<off_t>(kMiB));
    CHECK(got == data);
    d.stop();
}
