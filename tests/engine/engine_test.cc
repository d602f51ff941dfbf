// Engine behaviour driven directly, without a mount: deduplication and its
// counters, re-chunking locality, truncate, holes, clones, persistence, and
// refusal of mismatched stores. (Namespace operations: namespace_ops_test.cc.)
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

// The public options are what a program linking libhiodsfs sets: what tests
// inject goes through EngineHooks (engine/engine_test_hooks.h).
template <typename O>
concept HasTestHook = requires(O o) { o.commit_fault; } || requires(O o) { o.on_publish; } ||
                      requires(O o) { o.held_write_fault; } || requires(O o) { o.background_speed; };
static_assert(!HasTestHook<EngineOptions>, "a test hook in the public EngineOptions");

TEST_CASE("the same 64 MiB in two files is stored once; unlinking both makes it dead", "[engine][dedup][slow]") {
    for (auto params : {kCdc, kFixed}) {
        DYNAMIC_SECTION(params.describe()) {
            TempDir dir;
            auto e = open_engine(options_for(dir.store(), params));
            std::mt19937_64 rng(42);
            auto data = random_bytes(rng, 64u << 20);
            Attr a = make_file(*e, "one");
            Attr b = make_file(*e, "two");
            write_all(*e, a.ino, 0, data, 128 * 1024);
            write_all(*e, b.ino, 0, data, 1 << 20);  // other write sizes, same chunks
            REQUIRE(e->flush(a.ino).is_ok());
            REQUIRE(e->flush(b.ino).is_ok());
            SpaceCounters c;
            REQUIRE(e->counters(&c).is_ok());
            CHECK(c.logical_bytes == 2 * data.size());
            CHECK(c.stored_bytes == data.size());
            CHECK(c.dead_bytes == 0);
            CHECK(c.dedup_hits == c.chunk_count);
            // Segment files hold the chunks once plus a small header each.
            CHECK(c.disk_bytes < data.size() + data.size() / 50);
            CHECK(read_all(*e, b.ino) == data);

            REQUIRE(e->unlink(kRootInode, "one").is_ok());
            REQUIRE(e->counters(&c).is_ok());
            CHECK(c.stored_bytes == data.size());
            CHECK(c.dead_bytes == 0);
            REQUIRE(e->unlink(kRootInode, "two").is_ok());
            REQUIRE(e->counters(&c).is_ok());
            CHECK(c.stored_bytes == 0);
            CHECK(c.chunk_count == 0);
            CHECK(c.logical_bytes == 0);
            CHECK(c.dead_bytes == data.size());
            REQUIRE(e->close().is_ok());
            CHECK(check_invariants(dir.store()).empty());
        }
    }
}

TEST_CASE("a small overwrite in a CDC file re-chunks only its region", "[engine][cdc]") {
    TempDir dir;
    auto e = open_engine(options_for(dir.store(), kCdc));
    std::mt19937_64 rng(7);
    auto data = random_bytes(rng, 16u << 20);
    Attr f = make_file(*e, "f");
    write_all(*e, f.ino, 0, data);
    REQUIRE(e->flush(f.ino).is_ok());
    SpaceCounters before;
    REQUIRE(e->counters(&before).is_ok());

    auto patch = random_bytes(rng, 4096);
    std::uint64_t at = 5'000'000;
    REQUIRE(e->write(f.ino, at, patch.data(), patch.size()).is_ok());
    REQUIRE(e->flush(f.ino).is_ok());
    std::copy(patch.begin(), patch.end(), data.begin() + at);
    CHECK(read_all(*e, f.ino) == data);
    SpaceCounters after;
    REQUIRE(e->counters(&after).is_ok());
    // A few chunks around the write are replaced; nothing else changes.
    std::uint64_t new_bytes = after.stored_bytes + after.dead_bytes - before.stored_bytes;
    INFO("new bytes " << new_bytes << ", dead " << after.dead_bytes);
    CHECK(new_bytes <= 4 * 65536);
    CHECK(after.dead_bytes <= 4 * 65536);
    CHECK(after.chunk_count - before.chunk_count <= 4);

    // Appending to a closed file re-cuts its short tail: the result is
    // chunked as if written in one go.
    TempDir dir2;
    auto e2 = open_engine(options_for(dir2.store(), kCdc));
    Attr g = make_file(*e2, "g");
    for (std::size_t off = 0; off < data.size(); off += 3'000'000) {
        std::vector<std::uint8_t> part(data.begin() + off,
                                       data.begin() + std::min(data.size(), off + 3'000'000));
        write_all(*e2, g.ino, off, part);
        REQUIRE(e2->flush(g.ino).is_ok());
    }
    Attr h = make_file(*e2, "h");
    write_all(*e2, h.ino, 0, data);
    REQUIRE(e2->flush(h.ino).is_ok());
    SpaceCounters c2;
    REQUIRE(e2->counters(&c2).is_ok());
    INFO("stored " << c2.stored_bytes << " dead " << c2.dead_bytes);
    CHECK(c2.stored_bytes == data.size());
    CHECK(read_all(*e2, g.ino) == data);
}

TEST_CASE("truncate, holes, sparse writes and seek", "[engine]") {
    for (auto params : {kCdc, kFixed}) {
        DYNAMIC_SECTION(params.describe()) {
            TempDir dir;
            auto e = open_engine(options_for(dir.store(), params));
            std::mt19937_64 rng(3);
            Attr f = make_file(*e, "f");
            auto d = random_bytes(rng, 100000);
            write_all(*e, f.ino, 0, d);
            // Shrink into the middle of a chunk, then grow: the tail reads as zeros.
            SetAttr s;
            s.valid = SetAttr::kSize;
            s.size = 50001;
            Attr a;
            REQUIRE(e->setattr(f.ino, s, &a).is_ok());
            CHECK(a.size == 50001);
            s.size = 200000;
            REQUIRE(e->setattr(f.ino, s, &a).is_ok());
            auto got = read_all(*e, f.ino);
            std::vector<std::uint8_t> expect(d.begin(), d.begin() + 50001);
            expect.resize(200000, 0);
            CHECK(got == expect);

            // A write far past the end leaves a hole.
            Attr g = make_file(*e, "g");
            auto tail = random_bytes(rng, 10000);
            std::uint64_t far = (5ull << 30) + 12345;  // past 4 GiB
            REQUIRE(e->write(g.ino, far, tail.data(), tail.size()).is_ok());
            REQUIRE(e->getattr(g.ino, &a).is_ok());
            CHECK(a.size == far + tail.size());
            CHECK(a.blocks * 512 < 100000);
            std::vector<std::uint8_t> buf(20000, 0xff);
            std::size_t n = 0;
            REQUIRE(e->read(g.ino, far - 10000, buf.size(), buf.data(), &n).is_ok());
            CHECK(n == 20000);
            CHECK(std::all_of(buf.begin(), buf.begin() + 10000, [](auto b) { return b == 0; }));
            CHECK(std::equal(buf.begin() + 10000, buf.end(), tail.begin()));
            std::uint64_t pos = 0;
            REQUIRE(e->seek(g.ino, 0, SeekWhence::kData, &pos).is_ok());
            CHECK(pos <= far);
            CHECK(pos + 65536 > far);
            REQUIRE(e->seek(g.ino, 0, SeekWhence::kHole, &pos).is_ok());
            CHECK(pos == 0);
            REQUIRE(e->seek(g.ino, far + 5000, SeekWhence::kHole, &pos).is_ok());
            CHECK(pos == far + tail.size());
            CHECK(e->seek(g.ino, far + tail.size(), SeekWhence::kData, &pos).err() == ENXIO);

            // Punching a hole reads back zeros and unmaps the range.
            Attr h = make_file(*e, "h");
            auto hd = random_bytes(rng, 300000);
            write_all(*e, h.ino, 0, hd);
            REQUIRE(e->fallocate(h.ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100000, 100000).is_ok());
            std::fill(hd.begin() + 100000, hd.begin() + 200000, 0);
            CHECK(read_all(*e, h.ino) == hd);
            CHECK(e->fallocate(h.ino, FALLOC_FL_COLLAPSE_RANGE, 0, 4096).err() == EOPNOTSUPP);
            REQUIRE(e->fallocate(h.ino, 0, 0, 1000000).is_ok());
            REQUIRE(e->getattr(h.ino, &a).is_ok());
            CHECK(a.size == 1000000);

            // All-zero data is not stored.
            SpaceCounters before, after;
            REQUIRE(e->counters(&before).is_ok());
            Attr z = make_file(*e, "z");
            std::vector<std::uint8_t> zeros(1 << 20, 0);
            write_all(*e, z.ino, 0, zeros);
            REQUIRE(e->flush(z.ino).is_ok());
            REQUIRE(e->counters(&after).is_ok());
            CHECK(after.stored_bytes == before.stored_bytes);
            CHECK(read_all(*e, z.ino) == zeros);
            REQUIRE(e->close().is_ok());
            CHECK(check_invariants(dir.store()).empty());
        }
    }
}

TEST_CASE("clone_range shares chunks without copying", "[engine][clone]") {
    TempDir dir;
    auto e = open_engine(options_for(dir.store(), kCdc));
    std::mt19937_64 rng(11);
    auto d = random_bytes(rng, 3u << 20);
    Attr a = make_file(*e, "a");
    write_all(*e, a.ino, 0, d);
    REQUIRE(e->flush(a.ino).is_ok());
    SpaceCounters before;
    REQUIRE(e->counters(&before).is_ok());
    Attr b = make_file(*e, "b");
    std::uint64_t copied = 0;
    REQUIRE(e->clone_range(a.ino, 0, b.ino, 0, d.size() + 100, &copied).is_ok());
    CHECK(copied == d.size());
    CHECK(read_all(*e, b.ino) == d);
    // A partial clone at an unaligned offset.
    Attr c = make_file(*e, "c");
    REQUIRE(e->clone_range(a.ino, 12345, c.ino, 777, 1000000, &copied).is_ok());
    auto cd = read_all(*e, c.ino);
    REQUIRE(cd.size() == 777 + 1000000);
    CHECK(std::equal(cd.begin() + 777, cd.end(), d.begin() + 12345));
    SpaceCounters after;
    REQUIRE(e->counters(&after).is_ok());
    CHECK(after.stored_bytes == before.stored_bytes);
    CHECK(after.cloned_bytes == d.size() + 1000000);
    // Overwriting the clone leaves the original intact.
    auto patch = random_bytes(rng, 5000);
    REQUIRE(e->write(b.ino, 1000, patch.data(), patch.size()).is_ok());
    CHECK(read_all(*e, a.ino) == d);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("data and metadata persist across reopen", "[engine]") {
    TempDir dir;
    std::mt19937_64 rng(5);
    auto d = random_bytes(rng, 1u << 20);
    InodeId ino = 0;
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        Attr f = make_file(*e, "f");
        ino = f.ino;
        write_all(*e, f.ino, 0, d);
        REQUIRE(e->setxattr(f.ino, "user.k", "v", 0).is_ok());
        REQUIRE(e->close().is_ok());
    }
    auto e = open_engine(options_for(dir.store(), kFixed));
    Attr a;
    REQUIRE(e->lookup(kRootInode, "f", &a).is_ok());
    CHECK(a.ino == ino);
    CHECK(read_all(*e, ino) == d);
    std::string v;
    REQUIRE(e->getxattr(ino, "user.k", &v).is_ok());
    CHECK(v == "v");
}

TEST_CASE("a background nice value outside 0..19 is refused", "[engine][options]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.background_nice = 20;
    std::unique_ptr<Engine> e;
    const Status st = Engine::open(o, &e);
    CHECK(st.err() == EINVAL);
    CHECK(st.message() == "background_nice must be between 0 and 19, not 20");
}

TEST_CASE("a store is refused when its format or chunking does not match", "[engine][format]") {
    TempDir dir;
    { auto e = open_engine(options_for(dir.store(), kCdc)); }
    std::unique_ptr<Engine> e;
    Status st = Engine::open(options_for(dir.store(), kFixed), &e);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("was made with chunking cdc:4096/16384/65536") != std::string::npos);
    // Without explicit chunking the store's own parameters are used.
    EngineOptions o = options_for(dir.store(), kFixed);
    o.chunking_given = false;
    REQUIRE(Engine::open(o, &e).is_ok());
    CHECK(e->chunking() == kCdc);
    // A second opener is refused while the store is open.
    std::unique_ptr<Engine> e2;
    st = Engine::open(options_for(dir.store(), kCdc), &e2);
    CHECK(st.err() == EBUSY);
    e.reset();

    // A newer format version is refused and left untouched.
    std::string format = dir.store() + "/FORMAT";
    {
        std::ofstream f(format, std::ios::trunc);
        f << "hiodsfs store\nformat " << kEncryptedFormatVersion + 1 << "\nchunking cdc:4096/16384/65536\n";
    }
    st = Engine::open(options_for(dir.store(), kCdc), &e);
    CHECK(st.err() == EPROTO);
    CHECK(st.message().find("format version " + std::to_string(kEncryptedFormatVersion + 1)) != std::string::npos);
    std::ifstream in(format);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(all.find("format " + std::to_string(kEncryptedFormatVersion + 1)) != std::string::npos);

    // A non-empty directory that is not a store, and a path that is a file.
    TempDir other;
    std::filesystem::create_directories(other.path() + "/data");
    { std::ofstream(other.path() + "/data/precious") << "x"; }
    st = Engine::open(options_for(other.path() + "/data", kCdc), &e);
    CHECK(st.err() == EEXIST);
    CHECK(std::filesystem::exists(other.path() + "/data/precious"));
    st = Engine::open(options_for(other.path() + "/data/precious", kCdc), &e);
    CHECK(st.err() == ENOTDIR);
    st = Engine::open(options_for(other.path() + "/missing/parent", kCdc), &e);
    CHECK(st.err() == ENOENT);
}

TEST_CASE("status.json is strict JSON with the fields hiodsfs-stat reads", "[engine][status]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.mode = DedupMode::kHybrid;
    o.control.target_ops = 1000;
    auto e = open_engine(o);
    std::mt19937_64 rng(8);
    Attr f = make_file(*e, "a");
    write_all(*e, f.ino, 0, random_bytes(rng, 200000));
    REQUIRE(e->fsync(f.ino, false).is_ok());
    const std::string text = e->status_json();
    INFO(text);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(text));  // strict: no nan, no trailing commas
    for (const char* k : {"logical_bytes", "stored_bytes", "disk_bytes", "chunk_count", "inode_count",
                          "file_count", "backlog_records", "read_errors", "damaged_chunks", "pid",
                          "segment_count", "now_ns", "unix_time_ns", "interval_ms", "mode_since_ns"}) {
        INFO(k);
        CHECK(j.at(k).is_number_unsigned());
    }
    CHECK(j.at("logical_bytes").get<std::uint64_t>() == 200000);
    CHECK(j.at("target_ops").get<double>() == 1000.0);
    CHECK(j.at("store_error").is_null());
    CHECK(j.at("setting") == "hybrid");
    CHECK(j.at("chunking") == kCdc.describe());
    CHECK(j.at("history").is_array());
    CHECK(j.at("history_daily").is_array());
    CHECK(j.at("events").is_array());
}

// commit_writes bounds a group (LMDB holds its dirty pages in memory): a
// group that reaches it is committed long before its interval, and what a
// crash then keeps is a prefix of the operations, as with any group.
TEST_CASE("a group that reaches commit_writes is committed before its interval", "[engine][commit]") {
    constexpr int kFiles = 400;
    auto crash_after_creates = [](std::uint64_t commit_writes, std::uint64_t* early) {
        TempDir dir;
        EngineOptions o = options_for(dir.store(), kCdc);
        o.commit_interval_ms = 3600 * 1000;  // never, within the test
        o.commit_writes = commit_writes;
        auto e = open_engine(o);
        for (int i = 0; i < kFiles; ++i) make_file(*e, "f" + std::to_string(i));
        // The committer commits the full group in the background.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        do {
            *early = nlohmann::json::parse(e->status_json()).at("early_commits").get<std::uint64_t>();
            if (*early > 0 || commit_writes == 0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        } while (std::chrono::steady_clock::now() < deadline);
        // Whatever group the early commit covers is done once it shows.
        std::this_thread::sleep_for(std::chrono::milliseconds(commit_writes == 0 ? 200 : 50));
        abandon_engine(*e);  // a crash: the open group is lost
        e = open_engine(options_for(dir.store(), kCdc));
        int kept = 0;
        for (int i = 0; i < kFiles; ++i) {
            Attr a;
            Status st = e->lookup(kRootInode, "f" + std::to_string(i), &a);
            if (!st.is_ok()) break;
            ++kept;
        }
        // A prefix: nothing after the first missing file was kept.
        for (int i = kept; i < kFiles; ++i) {
            Attr a;
            INFO("f" << i << " after f" << kept << " was lost");
            CHECK(e->lookup(kRootInode, "f" + std::to_string(i), &a).err() == ENOENT);
        }
        REQUIRE(e->close().is_ok());
        CHECK(check_invariants(dir.store()).empty());
        return kept;
    };
    std::uint64_t early = 0;
    SECTION("bounded") {
        // A create is a few writes (entry, inode, parent): 400 of them are
        // several groups of 200.
        int kept = crash_after_creates(200, &early);
        CHECK(early >= 1);
        CHECK(kept >= 50);
    }
    SECTION("unbounded: only the interval commits") {
        int kept = crash_after_creates(0, &early);
        CHECK(early == 0);
        CHECK(kept == 0);
    }
}

// meta_resident drops the daemon's mappings of metadata pages after a
// commit; the pages come back from the page cache on the next read, with
// nothing lost, whatever the commits and reads in between.
TEST_CASE("metadata pages unmapped after commits read back the same", "[engine][commit]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::fixed(4096));
    o.meta_resident_bytes = 1u << 20;  // the least: any process maps more than that
    auto e = open_engine(o);
    std::mt19937_64 rng(11);
    std::vector<std::pair<Attr, std::vector<std::uint8_t>>> files;
    for (int i = 0; i < 40; ++i) {
        Attr f = make_file(*e, "f" + std::to_string(i));
        auto d = random_bytes(rng, 256 * 1024 + 4096 * static_cast<std::size_t>(i));  // 64+ chunks each
        write_all(*e, f.ino, 0, d);
        REQUIRE(e->sync_all().is_ok());  // a commit, then the trim
        files.emplace_back(f, std::move(d));
        // Everything so far, through the pages just unmapped.
        if (i % 8 == 7)
            for (const auto& [a, want] : files) REQUIRE(read_all(*e, a.ino) == want);
    }
    auto trims = nlohmann::json::parse(e->status_json()).at("resident_trims").get<std::uint64_t>();
    CHECK(trims >= 40);
    REQUIRE(e->close().is_ok());
    e = open_engine(options_for(dir.store(), ChunkingParams::fixed(4096)));
    for (const auto& [a, want] : files) CHECK(read_all(*e, a.ino) == want);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

namespace {

// Files in random directories in random order, so the B-trees' pages split
// and are left part full, as a tree copied into the store leaves them.
struct ScatteredFiles {
    std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files;  // "dN/fM", contents
    void write(Engine& e) {
        std::mt19937_64 rng(21);
        std::vector<InodeId> dirs;
        for (int d = 0; d < 30; ++d) {
            NewNode n;
            n.mode = S_IFDIR | 0755;
            Attr a;
            REQUIRE(e.create(kRootInode, "d" + std::to_string(d), n, &a).is_ok());
            dirs.push_back(a.ino);
        }
        for (int i = 0; i < 3000; ++i) {
            const std::size_t d = rng() % dirs.size();
            const std::string name = "f" + std::to_string(rng() % 1000000);
            Attr a;
            if (e.lookup(dirs[d], name, &a).is_ok()) continue;
            a = make_file(e, name, dirs[d]);
            auto data = random_bytes(rng, 100 + rng() % 12000);
            write_all(e, a.ino, 0, data);
            files.emplace_back("d" + std::to_string(d) + "/" + name, std::move(data));
        }
    }
    void check(Engine& e) const {
        for (const auto& [path, want] : files) {
            INFO(path);
            Attr d, f;
            REQUIRE(e.lookup(kRootInode, path.substr(0, path.find('/')), &d).is_ok());
            REQUIRE(e.lookup(d.ino, path.substr(path.find('/') + 1), &f).is_ok());
            CHECK(read_all(e, f.ino) == want);
        }
    }
};

std::uint64_t meta_file_size(const std::string& store) {
    return std::filesystem::file_size(store + "/meta/data.mdb");
}

}  // namespace

TEST_CASE("the metadata is compacted at close and reads back the same", "[engine][compact]") {
    TempDir plain, compacted;
    ScatteredFiles w;
    for (auto* d : {&plain, &compacted}) {
        EngineOptions o = options_for(d->store(), ChunkingParams::cdc(2048, 8192, 32768));
        o.meta_compact_max_bytes = d == &plain ? 0 : 1ull << 30;
        auto e = open_engine(o);
        if (d == &plain) w.write(*e);
        else ScatteredFiles{}.write(*e);  // the same files (one seed)
        REQUIRE(e->close().is_ok());
    }
    const std::uint64_t before = meta_file_size(plain.store()), after = meta_file_size(compacted.store());
    {
        // A store whose metadata is larger than the limit is left alone.
        EngineOptions o = options_for(plain.store(), ChunkingParams::cdc(2048, 8192, 32768));
        o.meta_compact_max_bytes = 4096;
        REQUIRE(open_engine(o)->close().is_ok());
    }
    INFO("metadata " << before << " bytes, compacted " << after << ", over the limit "
                      << meta_file_size(plain.store()));
    CHECK(after <= before * 9 / 10);
    CHECK(meta_file_size(plain.store()) * 9 / 10 >= after);
    CHECK_FALSE(std::filesystem::exists(compacted.store() + "/meta/data.mdb.compact"));
    auto e = open_engine(options_for(compacted.store(), ChunkingParams::cdc(2048, 8192, 32768)));
    w.check(*e);
    // And it grows again from the compacted pages.
    Attr more = make_file(*e, "more");
    std::mt19937_64 rng(3);
    const auto data = random_bytes(rng, 300000);
    write_all(*e, more.ino, 0, data);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(compacted.store()).empty());
    e = open_engine(options_for(compacted.store(), ChunkingParams::cdc(2048, 8192, 32768)));
    CHECK(read_all(*e, more.ino) == data);
    w.check(*e);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("a compaction a crash interrupted leaves the metadata as it was", "[engine][compact]") {
    TempDir dir;
    ScatteredFiles w;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(2048, 8192, 32768));
    o.meta_compact_max_bytes = 0;
    {
        auto e = open_engine(o);
        w.write(*e);
        REQUIRE(e->close().is_ok());
    }
    // The copy half written when the machine stopped: the file beside it is intact.
    {
        std::ofstream junk(dir.store() + "/meta/data.mdb.compact");
        junk << std::string(12345, 'x');
    }
    auto e = open_engine(o);
    CHECK_FALSE(std::filesystem::exists(dir.store() + "/meta/data.mdb.compact"));
    w.check(*e);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

// meta_dirty bounds a group by the pages it dirties in the random-key
// databases, not by its writes: the same 512 new chunks in one group fill
// it in a store whose index has some 70 leaves (each write a leaf of its
// own) and not in a fresh one (a few leaves, and 8 pages of chunk records).
TEST_CASE("a group that dirties meta_dirty of index pages is committed before its interval", "[engine][commit]") {
    // Early commits while 2 MiB of new data is written after `base_bytes`.
    auto early_commits_writing = [](std::size_t base_bytes, std::uint64_t meta_dirty) {
        TempDir dir;
        EngineOptions o = options_for(dir.store(), kFixed);
        o.commit_interval_ms = 3600 * 1000;  // never, within the test
        o.commit_writes = 0;
        o.meta_dirty_bytes = meta_dirty;
        auto e = open_engine(o);
        auto early = [&] { return nlohmann::json::parse(e->status_json()).at("early_commits").get<std::uint64_t>(); };
        std::mt19937_64 rng(31);
        if (base_bytes > 0) {
            Attr a = make_file(*e, "base");
            write_all(*e, a.ino, 0, random_bytes(rng, base_bytes));
        }
        Attr b = make_file(*e, "more");
        // The group of what follows starts empty; a wake-up the base's last
        // group asked for commits a group that is not full, which is not counted.
        REQUIRE(e->fsync(b.ino, false).is_ok());
        const std::uint64_t before = early();
        const auto more = random_bytes(rng, 2 << 20);
        write_all(*e, b.ino, 0, more);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(base_bytes > 0 && meta_dirty > 0 ? 20 : 1);
        while (early() == before && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const std::uint64_t during = early() - before;
        CHECK(read_all(*e, b.ino) == more);
        REQUIRE(e->close().is_ok());
        CHECK(check_invariants(dir.store()).empty());
        return during;
    };
    constexpr std::uint64_t k32Pages = 32 * 4096;
    CHECK(early_commits_writing(32 << 20, k32Pages) >= 1);
    CHECK(early_commits_writing(0, k32Pages) == 0);
    CHECK(early_commits_writing(32 << 20, 0) == 0);
}
