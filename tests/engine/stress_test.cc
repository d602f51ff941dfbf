// The engine under everything at once: writer threads overwriting,
// truncating, fsyncing, renaming, unlinking and re-creating their own
// files, reader threads reading every file, the mode switching between
// inline and deferred, and the background pass and reclaim running behind
// them, with frequent group commits. Each writer keeps a model of its
// files, so their contents are checked exactly; a reader cannot know what a
// racing writer did, so every 4 KiB block is self-describing (its file's
// tag, its index, a version, a checksum) and a read must find each block
// zero or whole, of its own file and at its own place. At the end every file
// matches its model, before and after a reopen, and the store passes fsck.
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::uint64_t kMagic = 0x68696f6473667321;  // "hiodsfs!"

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// Block `index` of the file tagged `tag`, as written the `version`th time.
void fill_block(std::uint8_t* b, std::uint64_t tag, std::uint64_t index, std::uint64_t version) {
    const std::uint64_t head[4] = {kMagic, tag, index, version};
    std::memcpy(b, head, sizeof(head));
    std::uint64_t x = mix(tag * 0x9e3779b97f4a7c15ull ^ index ^ (version << 40));
    for (std::size_t i = sizeof(head); i < kBlock; i += 8) {
        x = mix(x + i);
        std::memcpy(b + i, &x, 8);
    }
}

// "" if the block at `index` is all zeros or a whole block of file `*tag`
// at that index (the first block seen sets *tag); else what is wrong.
std::string check_block(const std::uint8_t* b, std::uint64_t index, std::uint64_t* tag) {
    if (std::all_of(b, b + kBlock, [](std::uint8_t c) { return c == 0; })) return "";
    std::uint64_t head[4];
    std::memcpy(head, b, sizeof(head));
    if (head[0] != kMagic) return "block " + std::to_string(index) + ": no block header (torn or misplaced bytes)";
    if (head[2] != index) return "block " + std::to_string(index) + " holds block " + std::to_string(head[2]);
    if (*tag == 0) *tag = head[1];
    if (head[1] != *tag) return "block " + std::to_string(index) + " belongs to another file";
    std::vector<std::uint8_t> want(kBlock);
    fill_block(want.data(), head[1], head[2], head[3]);
    if (std::memcmp(want.data(), b, kBlock) != 0) return "block " + std::to_string(index) + ": damaged payload";
    return "";
}

struct OwnedFile {
    std::string name;
    InodeId ino = 0;
    std::uint64_t tag = 0;
    std::vector<std::uint8_t> model;
};

// Collects failures from every thread (Catch2's assertions are not thread-safe).
class Failures {
public:
    void add(std::string what) {
        std::lock_guard<std::mutex> l(mu_);
        if (list_.size() < 20) list_.push_back(std::move(what));
    }
    std::vector<std::string> list() {
        std::lock_guard<std::mutex> l(mu_);
        return list_;
    }

private:
    std::mutex mu_;
    std::vector<std::string> list_;
};

// Small chunks (many per block, so writes re-cut their neighbours'), small
// segments and frequent group commits: every mechanism runs often.
EngineOptions stress_options(const TempDir& dir) {
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
    o.commit_interval_ms = 20;
    o.segments.max_segment_bytes = 1ull << 20;
    return o;
}

// Runs `writers` writer(w) and `readers` reader(r) threads to their end;
// with `switching`, a thread flips the mode between inline and deferred
// every few milliseconds meanwhile.
void run_threads(Engine& e, bool switching, std::uint64_t seed, int writers,
                 const std::function<void(int)>& writer, int readers, const std::function<void(int)>& reader) {
    std::atomic<bool> stop_switching{false};
    std::thread switcher([&] {
        std::mt19937_64 rng(seed ^ 0x5eed);
        while (switching && !stop_switching.load()) {
            e.set_deferred(rng() % 2 == 0);
            std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 5));
        }
    });
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) threads.emplace_back(writer, w);
    for (int r = 0; r < readers; ++r) threads.emplace_back(reader, r);
    for (auto& t : threads) t.join();
    stop_switching.store(true);
    switcher.join();
}

}  // namespace

TEST_CASE("writers, readers, fsync, truncate, rename, unlink, mode switches and the pass at once",
          "[engine][stress]") {
    const bool switching = GENERATE(false, true);
    DYNAMIC_SECTION((switching ? "inline and deferred, switching" : "inline")) {
        TempDir dir;
        EngineOptions o = stress_options(dir);
        o.mode = switching ? DedupMode::kDeferred : DedupMode::kInline;
        if (switching) o.reclaim = ReclaimMode::kBackground;  // async deletes and compaction too
        auto e = open_engine(o);
        const std::uint64_t seed = std::random_device{}();
        INFO("seed " << seed);

        constexpr int kWriters = 3, kFilesEach = 3, kReaders = 2;
        const int ops = kSanitized ? 120 : 500;
        constexpr std::uint64_t kMaxBlocks = 96;  // files up to 384 KiB
        Failures failures;
        std::atomic<std::uint64_t> next_tag{1};
        std::atomic<int> writers_left{kWriters};
        std::vector<std::vector<OwnedFile>> owned(kWriters);

        auto writer = [&](int w) {
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(w));
            auto& files = owned[static_cast<std::size_t>(w)];
            auto create = [&](OwnedFile& f, int gen) {
                f.name = "w" + std::to_string(w) + "-" + std::to_string(&f - files.data()) + "-g" + std::to_string(gen);
                NewNode n;
                n.mode = S_IFREG | 0644;
                Attr a;
                Status st = e->create(kRootInode, f.name, n, &a);
                if (!st) failures.add("create " + f.name + ": " + st.to_string());
                f.ino = a.ino;
                f.tag = next_tag.fetch_add(1);
                f.model.clear();
            };
            files.resize(kFilesEach);
            int gen = 0;
            for (auto& f : files) create(f, gen++);
            std::vector<std::uint8_t> buf;
            for (int op = 0; op < ops; ++op) {
                OwnedFile& f = files[rng() % files.size()];
                const int kind = static_cast<int>(rng() % 100);
                Status st;
                std::string what;
                if (kind < 55) {  // overwrite or extend: whole blocks, 1 to 8 of them
                    const std::uint64_t first = rng() % kMaxBlocks, n = 1 + rng() % 8;
                    buf.resize(n * kBlock);
                    const std::uint64_t version = rng();
                    for (std::uint64_t i = 0; i < n; ++i) fill_block(buf.data() + i * kBlock, f.tag, first + i, version);
                    what = "write " + f.name;
                    st = e->write(f.ino, first * kBlock, buf.data(), buf.size());
                    if (st) {
                        if (f.model.size() < (first + n) * kBlock) f.model.resize((first + n) * kBlock, 0);
                        std::memcpy(f.model.data() + first * kBlock, buf.data(), buf.size());
                    }
                } else if (kind < 65) {  // truncate to a block boundary, shorter or longer
                    const std::uint64_t size = (rng() % kMaxBlocks) * kBlock;
                    SetAttr ch;
                    ch.valid = SetAttr::kSize;
                    ch.size = size;
                    Attr a;
                    what = "truncate " + f.name;
                    st = e->setattr(f.ino, ch, &a);
                    if (st) f.model.resize(size, 0);
                } else if (kind < 75) {
                    what = "fsync " + f.name;
                    st = e->fsync(f.ino, rng() % 2 == 0);
                } else if (kind < 82) {
                    const std::string to = "w" + std::to_string(w) + "-r" + std::to_string(gen++);
                    what = "rename " + f.name + " to " + to;
                    st = e->rename(kRootInode, f.name, kRootInode, to, 0);
                    if (st) f.name = to;
                } else if (kind < 86) {
                    what = "unlink " + f.name;
                    st = e->unlink(kRootInode, f.name);
                    if (st) create(f, gen++);
                } else {  // the owner knows the contents exactly
                    Attr a;
                    what = "read " + f.name;
                    st = e->getattr(f.ino, &a);
                    if (st && a.size != f.model.size()) {
                        failures.add(f.name + ": size " + std::to_string(a.size) + ", model " +
                                     std::to_string(f.model.size()));
                    } else if (st) {
                        buf.assign(f.model.size(), 0xee);
                        std::size_t got = 0;
                        st = e->read(f.ino, 0, buf.size(), buf.data(), &got);
                        if (st && (got != buf.size() || buf != f.model))
                            failures.add(f.name + ": contents differ from the model at op " + std::to_string(op));
                    }
                }
                if (!st) failures.add(what + ": " + st.to_string());
            }
            writers_left.fetch_sub(1);
        };

        auto reader = [&](int r) {
            std::mt19937_64 rng(seed ^ (0xabcdefull + static_cast<std::uint64_t>(r)));
            std::vector<std::uint8_t> buf(kMaxBlocks * kBlock + 8 * kBlock);
            while (writers_left.load() > 0) {
                std::vector<DirEntry> entries;
                Status st = e->readdir(kRootInode, &entries);
                if (!st) {
                    failures.add("readdir: " + st.to_string());
                    return;
                }
                if (entries.empty()) continue;
                const DirEntry& d = entries[rng() % entries.size()];
                Attr a;
                st = e->lookup(kRootInode, d.name, &a);
                if (st.err() == ENOENT) continue;  // renamed or unlinked since the listing
                if (!st) {
                    failures.add("lookup " + d.name + ": " + st.to_string());
                    continue;
                }
                std::size_t got = 0;
                st = e->read(a.ino, 0, buf.size(), buf.data(), &got);
                if (st.err() == ENOENT) continue;  // unlinked and freed meanwhile
                if (!st) {
                    failures.add("read " + d.name + ": " + st.to_string());
                    continue;
                }
                // Sizes move in whole blocks, so a read ends on one.
                if (got % kBlock != 0) failures.add("read " + d.name + ": " + std::to_string(got) + " bytes");
                std::uint64_t tag = 0;
                for (std::size_t i = 0; i + kBlock <= got; i += kBlock) {
                    std::string bad = check_block(buf.data() + i, i / kBlock, &tag);
                    if (!bad.empty()) {
                        failures.add("read " + d.name + ": " + bad);
                        break;
                    }
                }
            }
        };

        run_threads(*e, switching, seed, kWriters, writer, kReaders, reader);
        for (const auto& f : failures.list()) FAIL_CHECK(f);

        auto check_models = [&](Engine& eng) {
            for (const auto& files : owned)
                for (const auto& f : files) {
                    INFO(f.name);
                    Attr a;
                    REQUIRE(eng.lookup(kRootInode, f.name, &a).is_ok());
                    CHECK(a.ino == f.ino);
                    CHECK(read_all(eng, a.ino) == f.model);
                }
            std::vector<DirEntry> entries;
            REQUIRE(eng.readdir(kRootInode, &entries).is_ok());
            CHECK(entries.size() == static_cast<std::size_t>(kWriters * kFilesEach));
        };
        check_models(*e);
        Status closed = e->close();
        INFO(closed.to_string());
        REQUIRE(closed.is_ok());
        e.reset();
        for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
        o.reclaim = ReclaimMode::kOff;
        e = open_engine(o);
        check_models(*e);
        Status st = e->close();
        INFO(st.to_string());
        REQUIRE(st.is_ok());
    }
}

// One file, many writers: each owns every kWriters-th block, so the file's
// final contents are known exactly, yet neighbouring writers' re-chunked
// regions overlap all the time (chunks of 1-16 KiB span several owners'
// blocks), so one writer's realignment re-reads and re-stores bytes
// another just wrote. Readers check that every block is zero or whole; a
// switcher flips the mode so held (deferred) writes and the pass come
// between.
TEST_CASE("one file's overwrites from many threads at once keep every block whole and end as modelled",
          "[engine][stress]") {
    const bool switching = GENERATE(false, true);
    DYNAMIC_SECTION((switching ? "inline and deferred, switching" : "inline")) {
        TempDir dir;
        EngineOptions o = stress_options(dir);
        o.mode = DedupMode::kInline;
        auto e = open_engine(o);
        const std::uint64_t seed = std::random_device{}();
        INFO("seed " << seed);

        constexpr int kWriters = 4, kReaders = 2;
        constexpr std::uint64_t kBlocks = 64, kTag = 7;
        const int ops = kSanitized ? 150 : 600;
        Failures failures;
        NewNode n;
        n.mode = S_IFREG | 0644;
        Attr f;
        REQUIRE(e->create(kRootInode, "shared", n, &f).is_ok());
        // The whole file first: every later write is inside old data.
        std::vector<std::uint8_t> model(kBlocks * kBlock);
        for (std::uint64_t b = 0; b < kBlocks; ++b) fill_block(model.data() + b * kBlock, kTag, b, 0);
        REQUIRE(e->write(f.ino, 0, model.data(), model.size()).is_ok());
        std::mutex model_mu;  // each writer changes only its own blocks of it
        std::atomic<int> writers_left{kWriters};

        auto writer = [&](int w) {
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(w));
            std::vector<std::uint8_t> buf(kBlock);
            for (int op = 0; op < ops; ++op) {
                const std::uint64_t block = (rng() % (kBlocks / kWriters)) * kWriters + static_cast<std::uint64_t>(w);
                fill_block(buf.data(), kTag, block, rng() | 1);
                Status st = e->write(f.ino, block * kBlock, buf.data(), buf.size());
                if (!st) {
                    failures.add("write block " + std::to_string(block) + ": " + st.to_string());
                    continue;
                }
                std::lock_guard<std::mutex> l(model_mu);
                std::memcpy(model.data() + block * kBlock, buf.data(), kBlock);
                if (rng() % 16 == 0) {
                    st = e->fsync(f.ino, false);
                    if (!st) failures.add("fsync: " + st.to_string());
                }
            }
            writers_left.fetch_sub(1);
        };
        auto reader = [&](int r) {
            std::mt19937_64 rng(seed ^ (0x1234ull + static_cast<std::uint64_t>(r)));
            std::vector<std::uint8_t> buf(kBlocks * kBlock);
            while (writers_left.load() > 0) {
                const std::uint64_t first = rng() % kBlocks, count = 1 + rng() % (kBlocks - first);
                std::size_t got = 0;
                Status st = e->read(f.ino, first * kBlock, count * kBlock, buf.data(), &got);
                if (!st || got != count * kBlock) {
                    failures.add("read: " + st.to_string() + ", " + std::to_string(got) + " bytes");
                    continue;
                }
                std::uint64_t tag = 0;
                for (std::uint64_t i = 0; i < count; ++i) {
                    std::string bad = check_block(buf.data() + i * kBlock, first + i, &tag);
                    if (bad.empty() && tag != kTag) bad = "block of another file";
                    if (!bad.empty()) {
                        failures.add("read: " + bad);
                        break;
                    }
                }
            }
        };
        run_threads(*e, switching, seed, kWriters, writer, kReaders, reader);
        e->set_deferred(false);
        for (const auto& msg : failures.list()) FAIL_CHECK(msg);

        CHECK(read_all(*e, f.ino) == model);
        REQUIRE(e->close().is_ok());
        e.reset();
        for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
        e = open_engine(o);
        CHECK(read_all(*e, f.ino) == model);
        REQUIRE(e->close().is_ok());
    }
}
