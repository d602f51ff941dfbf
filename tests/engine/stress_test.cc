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
#include <linux/falloc.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "engine_test_util.h"
#include "store/fault_env.h"

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

// One file of kBlock-sized self-describing blocks that several threads
// overwrite, each its own blocks (block % writers == w), as modelled.
struct SharedBlockFile {
    Engine& e;
    std::uint64_t tag;
    std::uint64_t seed;
    Failures& failures;
    Attr f;
    std::vector<std::uint8_t> model;
    std::mutex model_mu;
    std::atomic<int> writers_left{0};

    SharedBlockFile(Engine& engine, const char* name, std::uint64_t blocks, std::uint64_t file_tag,
                    std::uint64_t rng_seed, Failures& fails)
        : e(engine), tag(file_tag), seed(rng_seed), failures(fails), model(blocks * kBlock) {
        NewNode n;
        n.mode = S_IFREG | 0644;
        REQUIRE(e.create(kRootInode, name, n, &f).is_ok());
        // The whole file first: every later overwrite is inside old data.
        for (std::uint64_t b = 0; b < blocks; ++b) fill_block(model.data() + b * kBlock, tag, b, 0);
        REQUIRE(e.write(f.ino, 0, model.data(), model.size()).is_ok());
    }
    std::uint64_t blocks() const { return model.size() / kBlock; }

    // Writer w of `writers`: `ops` overwrites of its own blocks among the
    // first `within`, and an fsync after one in `fsync_every` (0: none).
    void overwrite(int w, int writers, std::uint64_t within, int ops, unsigned fsync_every) {
        std::mt19937_64 rng(seed + static_cast<std::uint64_t>(w));
        std::vector<std::uint8_t> buf(kBlock);
        for (int op = 0; op < ops; ++op) {
            const std::uint64_t block = (rng() % (within / static_cast<std::uint64_t>(writers))) *
                                            static_cast<std::uint64_t>(writers) +
                                        static_cast<std::uint64_t>(w);
            fill_block(buf.data(), tag, block, rng() | 1);
            Status st = e.write(f.ino, block * kBlock, buf.data(), buf.size());
            if (!st) {
                failures.add("write block " + std::to_string(block) + ": " + st.to_string());
                continue;
            }
            std::lock_guard<std::mutex> l(model_mu);
            std::memcpy(model.data() + block * kBlock, buf.data(), kBlock);
            if (fsync_every != 0 && rng() % fsync_every == 0) {
                st = e.fsync(f.ino, false);
                if (!st) failures.add("fsync: " + st.to_string());
            }
        }
        writers_left.fetch_sub(1);
    }

    // At the end (the threads joined): the file reads as modelled, the
    // store is consistent once closed, and the file reads the same reopened.
    void check_closed_and_reopened(std::unique_ptr<Engine>& engine, const EngineOptions& o, const TempDir& dir) {
        const InodeId ino = f.ino;
        CHECK(read_all(*engine, ino) == model);
        REQUIRE(engine->close().is_ok());
        engine.reset();  // this->e is not used again
        for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
        engine = open_engine(o);
        CHECK(read_all(*engine, ino) == model);
        REQUIRE(engine->close().is_ok());
    }

    // Reader r: runs of at most `most` blocks among the first `within`,
    // each zero or whole, until every writer is done.
    void check_reads(int r, std::uint64_t within, std::uint64_t most) {
        std::mt19937_64 rng(seed ^ (0x1234ull + static_cast<std::uint64_t>(r)));
        std::vector<std::uint8_t> buf(most * kBlock);
        while (writers_left.load() > 0) {
            const std::uint64_t first = rng() % within, count = 1 + rng() % std::min(most, within - first);
            std::size_t got = 0;
            Status st = e.read(f.ino, first * kBlock, count * kBlock, buf.data(), &got);
            if (!st || got != count * kBlock) {
                failures.add("read: " + st.to_string() + ", " + std::to_string(got) + " bytes");
                continue;
            }
            std::uint64_t seen = 0;
            for (std::uint64_t i = 0; i < count; ++i) {
                std::string bad = check_block(buf.data() + i * kBlock, first + i, &seen);
                if (bad.empty() && seen != tag) bad = "block of another file";
                if (!bad.empty()) {
                    failures.add("read: " + bad);
                    break;
                }
            }
        }
    }
};

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
        constexpr std::uint64_t kBlocks = 64;
        const int ops = kSanitized ? 150 : 600;
        Failures failures;
        SharedBlockFile file(*e, "shared", kBlocks, 7, seed, failures);
        file.writers_left = kWriters;
        auto writer = [&](int w) { file.overwrite(w, kWriters, kBlocks, ops, 16); };
        auto reader = [&](int r) { file.check_reads(r, kBlocks, kBlocks); };
        run_threads(*e, switching, seed, kWriters, writer, kReaders, reader);
        e->set_deferred(false);
        for (const auto& msg : failures.list()) FAIL_CHECK(msg);

        file.check_closed_and_reopened(e, o, dir);
    }
}

// Overwrites inside a file run in windows of their own, beside each other
// (write_path.cc, "Overwrites in windows"), while appends, fsyncs, hole
// lookups, fallocate and sync_all of the same file need the whole
// file and wait for the windows to close. Four writers overwrite blocks of
// their own all over an 8 MiB file, so their windows often meet and often
// do not; an appender grows the file; a reader checks every block it
// sees; a thread takes the whole file again and again.
TEST_CASE("overwrites of one file run beside each other in windows, and the whole-file operations wait for them",
          "[engine][stress]") {
    TempDir dir;
    EngineOptions o = stress_options(dir);
    o.mode = DedupMode::kInline;
    auto e = open_engine(o);
    const std::uint64_t seed = std::random_device{}();
    INFO("seed " << seed);

    constexpr int kWriters = 4, kReaders = 1;
    constexpr std::uint64_t kBlocks = 2048, kTag = 11;
    const int ops = kSanitized ? 300 : 1500;
    Failures failures;
    SharedBlockFile file(*e, "db", kBlocks, kTag, seed, failures);
    file.writers_left = kWriters + 1;
    auto overwriter = [&](int w) { file.overwrite(w, kWriters, kBlocks, ops, 0); };
    auto appender = [&] {
        std::mt19937_64 rng(seed ^ 0xa99e);
        std::vector<std::uint8_t> buf(kBlock);
        for (std::uint64_t block = kBlocks; block < kBlocks + ops / 8; ++block) {
            fill_block(buf.data(), kTag, block, rng() | 1);
            Status st = e->write(file.f.ino, block * kBlock, buf.data(), buf.size());
            if (!st) {
                failures.add("append block " + std::to_string(block) + ": " + st.to_string());
                break;
            }
            std::lock_guard<std::mutex> l(file.model_mu);
            file.model.insert(file.model.end(), buf.begin(), buf.end());
        }
        file.writers_left.fetch_sub(1);
    };
    auto whole_file = [&] {
        std::mt19937_64 rng(seed ^ 0x3401e);
        while (file.writers_left.load() > 0) {
            Status st;
            std::uint64_t at = 0;
            switch (rng() % 4) {
                case 0: st = e->fsync(file.f.ino, false); break;
                case 1: st = e->seek(file.f.ino, (rng() % kBlocks) * kBlock, SeekWhence::kHole, &at); break;
                case 2: st = e->fallocate(file.f.ino, FALLOC_FL_KEEP_SIZE, 0, kBlock); break;
                default: st = e->sync_all(); break;
            }
            if (!st) failures.add("whole-file operation: " + st.to_string());
            std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
        }
    };
    auto reader = [&](int r) { file.check_reads(r, kBlocks, 64); };
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) threads.emplace_back(overwriter, w);
    threads.emplace_back(appender);
    threads.emplace_back(whole_file);
    for (int r = 0; r < kReaders; ++r) threads.emplace_back(reader, r);
    for (auto& t : threads) t.join();
    for (const auto& msg : failures.list()) FAIL_CHECK(msg);

    auto status = nlohmann::json::parse(e->status_json());
    INFO(status.dump());
    CHECK(status["overwrites_beside_others"].get<std::uint64_t>() > 0);
    CHECK(status["overwrites_in_windows"].get<std::uint64_t>() >= status["overwrites_beside_others"].get<std::uint64_t>());
    file.check_closed_and_reopened(e, o, dir);
}

// The same overwrites in windows, with a segment write failing under them
// (once, or from then on): a write that fails maps nothing, so after a
// reopen every block holds its first version or one a write acknowledged,
// and, when the fsync after them succeeded, the last one acknowledged.
TEST_CASE("a segment write failing under overwrites in windows loses nothing acknowledged",
          "[engine][stress][fault]") {
    constexpr int kWriters = 4;
    constexpr std::uint64_t kBlocks = 512, kTag = 13;
    for (bool permanent : {false, true}) {
        for (std::uint64_t at = 1; at < 40; at += 6) {
            INFO((permanent ? "permanent" : "one") << " I/O error at segment write " << at);
            TempDir dir;
            FaultInjectionEnv fenv(Env::posix());
            fenv.set_forward_syncs(false);
            EngineOptions o = stress_options(dir);
            o.mode = DedupMode::kInline;
            o.env = &fenv;
            o.background_commit = false;
            o.segments.write_buffer_bytes = 32 * 1024;
            // Per block: the versions acknowledged, in order (each block has one writer).
            std::vector<std::vector<std::uint64_t>> acked(kBlocks, std::vector<std::uint64_t>{0});
            std::atomic<std::uint64_t> failed{0};
            bool synced = false;
            {
                auto e = open_engine(o);
                Attr f = make_file(*e, "db");
                std::vector<std::uint8_t> first(kBlocks * kBlock);
                for (std::uint64_t b = 0; b < kBlocks; ++b) fill_block(first.data() + b * kBlock, kTag, b, 0);
                REQUIRE(e->write(f.ino, 0, first.data(), first.size()).is_ok());
                REQUIRE(e->fsync(f.ino, false).is_ok());
                fenv.fail_write_at(at, WriteFault::kIoError, permanent);
                std::vector<std::thread> threads;
                for (int w = 0; w < kWriters; ++w) {
                    threads.emplace_back([&, w] {
                        std::mt19937_64 rng(at * 31 + static_cast<std::uint64_t>(w));
                        std::vector<std::uint8_t> buf(kBlock);
                        for (int op = 0; op < 48; ++op) {
                            const std::uint64_t block =
                                (rng() % (kBlocks / kWriters)) * kWriters + static_cast<std::uint64_t>(w);
                            const std::uint64_t version = rng() | 1;
                            fill_block(buf.data(), kTag, block, version);
                            if (e->write(f.ino, block * kBlock, buf.data(), buf.size()).is_ok())
                                acked[block].push_back(version);
                            else
                                failed.fetch_add(1);
                        }
                    });
                }
                for (auto& t : threads) t.join();
                Status fs = e->fsync(f.ino, false);
                synced = fs.is_ok();
                if (!synced) CHECK(fs.err() == EIO);
                (void)e->close();
            }
            CHECK((failed.load() > 0 || synced));
            fenv.clear_faults();
            auto e = open_engine(o);
            Attr f;
            REQUIRE(e->lookup(kRootInode, "db", &f).is_ok());
            auto got = read_all(*e, f.ino);
            REQUIRE(got.size() == kBlocks * kBlock);
            int wrong = 0;
            for (std::uint64_t b = 0; b < kBlocks && wrong < 5; ++b) {
                const std::uint8_t* p = got.data() + b * kBlock;
                std::uint64_t tag = 0, version = 0;
                std::string bad = check_block(p, b, &tag);
                std::memcpy(&version, p + 24, sizeof version);
                if (bad.empty() && tag == 0) bad = "zeros";
                if (bad.empty() && synced && version != acked[b].back()) bad = "not the last acknowledged version";
                if (bad.empty() && std::find(acked[b].begin(), acked[b].end(), version) == acked[b].end())
                    bad = "a version no write acknowledged";
                if (!bad.empty()) {
                    FAIL_CHECK("block " << b << ": " << bad);
                    ++wrong;
                }
            }
            REQUIRE(e->close().is_ok());
            e.reset();
            for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
        }
    }
}
