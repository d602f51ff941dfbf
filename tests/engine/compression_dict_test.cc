// Compression dictionaries (engine/dictionary_trainer.h, meta/dictionaries.h):
// a store that reaches dictionary_min trains one in the background and
// compresses its new zstd chunks with it; the dictionaries are in the
// metadata, loaded at every open (read-only ones too) and by hiodsfs-fsck,
// reach a tier with the rest of it, and survive a crash whole or not at
// all; chunks of two dictionaries, raw, lz4 and plain zstd read back after
// a reopen and after compaction; a chunk whose dictionary is gone is named
// by fsck's scrub; a sample that trains none is logged once and tried again.
#include <atomic>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "../store/memory_tier.h"
#include "compression_test_util.h"
#include "fsck/fsck.h"
#include "meta/dictionaries.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

using Files = std::map<std::string, std::vector<std::uint8_t>>;

std::uint64_t dictionary_count(Engine& e) {
    return nlohmann::json::parse(e.status_json()).at("dictionaries").get<std::uint64_t>();
}

void write_files(Engine& e, Files* files, const std::string& prefix, int n, std::size_t bytes,
                 unsigned seed) {
    for (int i = 0; i < n; ++i) {
        const std::string name = prefix + std::to_string(i);
        (*files)[name] = text_bytes(bytes, seed + static_cast<unsigned>(i));
        write_synced(e, name, (*files)[name]);
    }
}

void check_files(Engine& e, const Files& files) {
    for (const auto& [name, data] : files) {
        INFO(name);
        CHECK(read_named(e, name) == data);
    }
}

// Every file reads back after a reopen and through a read-only open
// (hiodsfs-stat, a read-only mount), which loads the store's n dictionaries
// and trains none.
void check_reopened(const EngineOptions& o, const Files& files, std::uint64_t n) {
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == n);
        check_files(*e, files);
    }
    EngineOptions ro = o;
    ro.read_only = true;
    auto e = open_engine(ro);
    CHECK(dictionary_count(*e) == n);
    check_files(*e, files);
    bool trained = true;
    CHECK(e->train_dictionary(&trained).err() == EROFS);
}

FsckReport scrub(const std::string& store) {
    FsckReport report;
    FsckOptions fo;
    fo.store = store;
    fo.scrub = true;
    require_ok(run_fsck(fo, &report));
    return report;
}

std::string problems_of(const FsckReport& r) {
    std::string all;
    for (const FsckProblem& p : r.problems) all += p.what + "\n";
    return all;
}

// One operation on the metadata of a closed store, committed.
void change_metadata(const std::string& store, const std::function<void(Txn&)>& change) {
    std::unique_ptr<MetaStore> m;
    require_ok(MetaStore::open(store + "/meta", 1ull << 32, false, &m));
    std::unique_ptr<Txn> t;
    require_ok(m->begin(&t));
    change(*t);
    require_ok(t->commit());
    t.reset();
    require_ok(m->commit_group(nullptr));
}

// A dictionary trained on text as the store's trainer would.
std::string trained_by_hand() {
    std::string samples;
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; i < 200; ++i) {
        const std::vector<std::uint8_t> t = text_bytes(4096, 5000 + i);
        samples.append(t.begin(), t.end());
        sizes.push_back(t.size());
    }
    std::string bytes;
    require_ok(train_dictionary(samples, sizes, 16 * 1024, &bytes));
    return bytes;
}

// A log the engine's threads write to.
struct Log {
    std::mutex mu;
    std::vector<std::string> lines;
    std::function<void(const std::string&)> sink() {
        return [this](const std::string& line) {
            std::lock_guard l(mu);
            lines.push_back(line);
        };
    }
    std::size_t count(const std::string& what) {
        std::lock_guard l(mu);
        return static_cast<std::size_t>(std::count_if(
            lines.begin(), lines.end(),
            [&](const std::string& line) { return line.find(what) != std::string::npos; }));
    }
};

}  // namespace

TEST_CASE(
    "a dictionary in the metadata is loaded at every open and compresses new zstd chunks; fsck's "
    "scrub "
    "names the files whose chunks need one the metadata lost or holds damaged",
    "[engine][compression][dictionary][fsck]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed("zstd:3");
    Files files;
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 0);
        write_files(*e, &files, "plain", 2, 256 * 1024, 1000);
    }
    change_metadata(dir.store(),
                    [](Txn& t) { require_ok(put_dictionary(t, 1, 0, trained_by_hand())); });
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 1);
        files["needs-it"] = text_bytes(256 * 1024, 1100);
        write_synced(*e, "needs-it", files["needs-it"]);
        check_files(*e, files);
    }
    RecordKinds k = record_kinds(dir.store());
    CHECK(k.by_dictionary[0] > 0);
    CHECK(k.by_dictionary[1] > 0);
    check_reopened(o, files, 1);
    CHECK(check_invariants(dir.store()).empty());
    {
        const FsckReport r = scrub(dir.store());
        INFO(problems_of(r));
        CHECK(r.problems.empty());
    }
    FsckOptions fo;
    fo.store = dir.store();
    fo.scrub = true;
    fo.mark_bad_chunks = false;
    SECTION("the record is gone") {
        change_metadata(dir.store(), [](Txn& t) {
            bool existed = false;
            require_ok(t.del(Db::kSuper, dictionary_key(1), &existed));
            REQUIRE(existed);
        });
        FsckReport r;
        require_ok(run_fsck(fo, &r));
        const std::string all = problems_of(r);
        INFO(all);
        CHECK(all.find("/needs-it") != std::string::npos);
        CHECK(all.find("dictionary 1 is not in the store") != std::string::npos);
        CHECK(all.find("/plain0") == std::string::npos);
    }
    SECTION("the record is damaged") {
        change_metadata(dir.store(), [](Txn& t) {
            std::string_view v;
            bool found = false;
            require_ok(t.get(Db::kSuper, dictionary_key(1), &v, &found));
            REQUIRE(found);
            std::string bad(v);
            bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x40);
            require_ok(t.put(Db::kSuper, dictionary_key(1), bad));
        });
        FsckReport r;
        require_ok(run_fsck(fo, &r));
        const std::string all = problems_of(r);
        INFO(all);
        CHECK(all.find("compression dictionary 1's record is damaged") != std::string::npos);
        CHECK(all.find("/needs-it") != std::string::npos);
        CHECK(all.find("/plain0") == std::string::npos);
        // The engine opens it all the same, and says so: the other files
        // read, that one is EIO.
        Log log;
        o.log = log.sink();
        auto e = open_engine(o);
        CHECK(log.count("compression dictionary 1's record is damaged") == 1);
        CHECK(dictionary_count(*e) == 0);
        CHECK(read_named(*e, "plain0") == files["plain0"]);
        Attr a;
        require_ok(e->lookup(kRootInode, "needs-it", &a));
        std::vector<std::uint8_t> buf(a.size);
        std::size_t got = 0;
        CHECK(e->read(a.ino, 0, buf.size(), buf.data(), &got).err() == EIO);
    }
}

namespace {

EngineOptions dictionary_options(const std::string& store) {
    EngineOptions o = options_for(store, kCdc);
    o.compression = parsed("zstd:3");
    o.dictionary_min_bytes = 1 << 20;
    return o;
}

// Polls until the engine holds at least n dictionaries (the trainer thread
// is paced by the throttle, and sanitizer builds are slow); the count then.
std::uint64_t wait_for_dictionaries(Engine& e, std::uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    std::uint64_t have = dictionary_count(e);
    while (have < n && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        have = dictionary_count(e);
    }
    return have;
}

// What the metadata of a closed store holds.
struct Stored {
    std::vector<std::uint32_t> ids;
    StoredDictionaries found;
};
Stored stored_dictionaries(const std::string& store) {
    std::unique_ptr<MetaStore> m;
    require_ok(MetaStore::open(store + "/meta", 1ull << 32, true, &m));
    std::unique_ptr<Txn> t;
    require_ok(m->begin_read(&t));
    DictionarySet set;
    Stored s;
    require_ok(load_dictionaries(*t, &set, &s.found));
    s.ids = set.ids();
    return s;
}

}  // namespace

TEST_CASE(
    "a store that reaches dictionary_min trains a dictionary in the background, and its new zstd "
    "chunks "
    "name it",
    "[engine][compression][dictionary]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    Log log;
    o.log = log.sink();
    Files files;
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 0);
        write_files(*e, &files, "before", 3, 512 * 1024, 100);
        REQUIRE(wait_for_dictionaries(*e, 1) == 1);
        write_files(*e, &files, "after", 3, 256 * 1024, 200);
        check_files(*e, files);
        CHECK(dictionary_count(*e) == 1);  // far from 8 times the content it was trained at
        require_ok(e->close());
    }
    CHECK(log.count("compression dictionary 1 trained") == 1);
    RecordKinds k = record_kinds(dir.store());
    CHECK(k.by_dictionary[0] > 0);  // the chunks written before it
    CHECK(k.by_dictionary[1] > 0);
    CHECK(k.by_dictionary.size() == 2);
    const Stored s = stored_dictionaries(dir.store());
    CHECK(s.ids == std::vector<std::uint32_t>{1});
    CHECK(s.found.damaged.empty());
    CHECK(s.found.newest_trained_at >= o.dictionary_min_bytes);
    check_reopened(o, files, 1);
    CHECK(check_invariants(dir.store()).empty());
    const FsckReport r = scrub(dir.store());
    INFO(problems_of(r));
    CHECK(r.problems.empty());
    CHECK(r.scrubbed_chunks > 0);
}

TEST_CASE(
    "two dictionaries, lz4, plain zstd and raw chunks read back after a reopen and after "
    "compaction",
    "[engine][compression][dictionary][reclaim]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    o.background_threads = 0;  // no trainer thread: the test trains
    o.reclaim = ReclaimMode::kManual;
    o.segments.max_segment_bytes = 256 * 1024;
    Files files;
    std::mt19937_64 rng(31);
    {
        o.compression = parsed("lz4");
        auto e = open_engine(o);
        write_files(*e, &files, "lz4-", 3, 384 * 1024, 300);
        files["noise"] = random_bytes(rng, 300 * 1024);
        write_synced(*e, "noise", files["noise"]);
    }
    std::uint64_t first_at = 0;
    {
        o.compression = parsed("zstd:3");
        auto e = open_engine(o);
        write_files(*e, &files, "plain-", 2, 128 * 1024, 400);
        first_at = counters_of(*e).content_bytes;
        bool trained = false;
        require_ok(e->train_dictionary(&trained));
        REQUIRE(trained);
        write_files(*e, &files, "one-", 4, 128 * 1024, 500);
        require_ok(e->train_dictionary(&trained));
        CHECK_FALSE(trained);  // not 8 times the content yet
        // Random bytes grow the content past 8 times (the sample skips them).
        const std::uint64_t now = counters_of(*e).content_bytes;
        files["bulk"] =
            random_bytes(rng, static_cast<std::size_t>(8 * first_at - now + 512 * 1024));
        write_synced(*e, "bulk", files["bulk"]);
        require_ok(e->train_dictionary(&trained));
        REQUIRE(trained);
        CHECK(dictionary_count(*e) == 2);
        write_files(*e, &files, "two-", 4, 128 * 1024, 600);
    }
    RecordKinds k = record_kinds(dir.store());
    CHECK(k.as_is > 0);
    CHECK(k.by_level[static_cast<int>(CompressionMethod::kLz4) * 100] > 0);
    CHECK(k.by_dictionary[0] > 0);
    CHECK(k.by_dictionary[1] > 0);
    CHECK(k.by_dictionary[2] > 0);
    const Stored s = stored_dictionaries(dir.store());
    CHECK(s.ids == std::vector<std::uint32_t>{1, 2});
    CHECK(s.found.newest_trained_at >= 8 * first_at);
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 2);
        check_files(*e, files);
        // Every other file goes: their segments are half live, and
        // compaction moves the rest.
        for (const char* name : {"bulk", "lz4-1", "plain-1", "one-1", "one-3", "two-1", "two-3"}) {
            require_ok(e->unlink(kRootInode, name));
            files.erase(name);
        }
        require_ok(e->run_reclaim());
        const nlohmann::json status = nlohmann::json::parse(e->status_json());
        CHECK(status.at("compaction_bytes_moved").get<std::uint64_t>() > 0);
        check_files(*e, files);
    }
    k = record_kinds(dir.store());
    CHECK(k.by_dictionary[1] > 0);
    CHECK(k.by_dictionary[2] > 0);
    {
        auto e = open_engine(o);
        check_files(*e, files);
    }
    CHECK(check_invariants(dir.store()).empty());
    const FsckReport r = scrub(dir.store());
    INFO(problems_of(r));
    CHECK(r.problems.empty());
}

TEST_CASE(
    "a crash around a dictionary's training loses nothing fsynced and leaves it whole or absent",
    "[engine][compression][dictionary][crash]") {
    const std::uint64_t base_seed = std::random_device{}();
    std::cerr << "dictionary crash test seed " << base_seed << "\n";
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t seed = base_seed + static_cast<std::uint64_t>(round);
        const int variant = round % 5;
        INFO("seed " << seed << ", variant " << variant);
        TempDir dir;
        FaultInjectionEnv fenv(Env::posix());
        fenv.set_forward_syncs(false);
        EngineOptions o = dictionary_options(dir.store());
        o.env = &fenv;
        o.background_commit =
            false;  // the dictionary stays in the open group until the test commits
        o.background_threads = 0;
        std::atomic<int> fail_commits{0};
        EngineHooks hooks;
        hooks.commit_fault = [&] { return fail_commits.load(); };
        Files durable;
        bool b_synced = false;
        {
            auto e = open_engine(o, hooks);
            write_files(*e, &durable, "a", 2, 640 * 1024, 700 + static_cast<unsigned>(round));
            bool trained = false;
            require_ok(e->train_dictionary(&trained));
            REQUIRE(trained);
            switch (variant) {
                case 0:  // the crash comes with the dictionary in the open group
                    break;
                case 1:  // a file compressed with it is fsynced: its log record holds the
                         // dictionary
                    write_files(*e, &durable, "b", 1, 256 * 1024, 800);
                    b_synced = true;
                    break;
                case 2: {  // and another is written, not fsynced
                    write_files(*e, &durable, "b", 1, 256 * 1024, 800);
                    b_synced = true;
                    const Attr c = make_file(*e, "c");
                    write_all(*e, c.ino, 0, text_bytes(200 * 1024, 900));
                    break;
                }
                case 3: {  // only a file that is not fsynced uses it
                    const Attr c = make_file(*e, "c");
                    write_all(*e, c.ino, 0, text_bytes(200 * 1024, 900));
                    (void)e->flush(c.ino);
                    break;
                }
                case 4:  // the commit that holds it fails: the store stops
                    fail_commits = EIO;
                    CHECK_FALSE(e->sync_all().is_ok());
                    break;
            }
            abandon_engine(*e);
        }
        require_ok(fenv.drop_unsynced(seed));
        fail_commits = 0;
        {
            auto e = open_engine(o, hooks);
            check_files(*e, durable);
            const std::uint64_t n = dictionary_count(*e);
            CHECK(n <= 1);
            if (b_synced) CHECK(n == 1);
            // A file never synced is absent or readable, never corrupt.
            Attr c;
            if (e->lookup(kRootInode, "c", &c).is_ok()) {
                std::vector<std::uint8_t> buf(c.size);
                std::size_t got = 0;
                const Status st = e->read(c.ino, 0, buf.size(), buf.data(), &got);
                INFO(st.to_string());
                CHECK(st.is_ok());
            }
            require_ok(e->close());
        }
        const Stored s = stored_dictionaries(dir.store());
        CHECK(s.found.damaged.empty());
        CHECK(s.ids.size() <= 1);
        const auto problems = check_invariants(dir.store());
        for (const auto& p : problems) UNSCOPED_INFO(p);
        CHECK(problems.empty());
        const FsckReport r = scrub(dir.store());
        INFO(problems_of(r));
        CHECK(r.problems.empty());
        // Lost or not, training goes on: a dictionary is there after the next.
        {
            auto e = open_engine(o, hooks);
            bool trained = false;
            require_ok(e->train_dictionary(&trained));
            CHECK(trained == s.ids.empty());
            CHECK(dictionary_count(*e) == 1);
            const Attr d = write_synced(*e, "d", text_bytes(128 * 1024, 901));
            CHECK(read_all(*e, d.ino) == text_bytes(128 * 1024, 901));
            require_ok(e->close());
        }
    }
}

TEST_CASE(
    "a tiered store's dictionary reaches the tier: a directory recovered from it reads its chunks",
    "[engine][compression][dictionary][tier]") {
    TempDir first, second;
    MemoryTier tier;
    auto tiered = [&](const std::string& store) {
        EngineOptions o = dictionary_options(store);
        o.segments.tier = &tier;
        o.segments.cache_bytes = 1ull << 30;
        o.background_threads = 0;
        return o;
    };
    Files files;
    {
        auto e = open_engine(tiered(first.store()));
        write_files(*e, &files, "a", 2, 640 * 1024, 1200);
        bool trained = false;
        require_ok(e->train_dictionary(&trained));
        REQUIRE(trained);
        write_files(*e, &files, "b", 2, 256 * 1024, 1300);
        abandon_engine(*e);  // the host is lost: only the tier's journal has the rest
    }
    {
        auto e = open_engine(tiered(second.store()));
        CHECK(dictionary_count(*e) == 1);
        check_files(*e, files);
        require_ok(e->close());
    }
    CHECK(stored_dictionaries(second.store()).ids == std::vector<std::uint32_t>{1});
    CHECK(record_kinds(first.store()).by_dictionary[1] > 0);
    // The clean close left a snapshot: a third directory recovers from it.
    TempDir third;
    auto e = open_engine(tiered(third.store()));
    CHECK(dictionary_count(*e) == 1);
    check_files(*e, files);
    require_ok(e->close());
}

TEST_CASE("samples that train no dictionary are logged once and tried again as the store grows",
          "[engine][compression][dictionary]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    Log log;
    o.log = log.sink();
    std::mt19937_64 rng(41);
    auto e = open_engine(o);
    // Random bytes only: no chunk is worth a sample.
    write_synced(*e, "noise", random_bytes(rng, 1536 * 1024));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (log.count("no compression dictionary") == 0 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(log.count("no compression dictionary") == 1);
    CHECK(dictionary_count(*e) == 0);
    // Text that more than doubles the store: the trainer tries again.
    const std::vector<std::uint8_t> text = text_bytes(1792 * 1024, 1400);
    write_synced(*e, "text", text);
    CHECK(wait_for_dictionaries(*e, 1) == 1);
    CHECK(log.count("no compression dictionary") == 1);
    CHECK(read_named(*e, "text") == text);
    require_ok(e->close());
}

TEST_CASE("a round over a store of random bytes stops after a few hundred chunks read, not thousands",
          "[engine][compression][dictionary]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    o.chunking = ChunkingParams::cdc(2048, 8192, 32768);
    Log log;
    o.log = log.sink();
    std::mt19937_64 rng(43);
    auto e = open_engine(o);
    // About 2 000 chunks: a round could pick up to 8 192 of them.
    write_synced(*e, "noise", random_bytes(rng, 16 << 20));
    bool trained = true;
    require_ok(e->train_dictionary(&trained));
    CHECK_FALSE(trained);
    std::string line;
    {
        std::lock_guard l(log.mu);
        for (const std::string& each : log.lines)
            if (each.find("no compression dictionary") != std::string::npos) line = each;
    }
    INFO(line);
    const std::size_t at = line.find(") of ");
    REQUIRE(at != std::string::npos);
    const std::uint64_t read = std::stoull(line.substr(at + 5));
    CHECK(read >= 256);
    CHECK(read <= 256 + 32);
    require_ok(e->close());
}

TEST_CASE("the trainer waits while the throttle pauses the background",
          "[engine][compression][dictionary]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    std::atomic<double> speed{0.0};
    std::atomic<std::uint64_t> asked{0};
    EngineHooks hooks;
    hooks.background_speed = [&] {
        asked.fetch_add(1);
        return speed.load();
    };
    auto e = open_engine(o, hooks);
    Files files;
    write_files(*e, &files, "f", 3, 512 * 1024, 1500);
    // The background threads ask the throttle every 200 ms while paused:
    // wait for a few seconds' worth of asking.
    const std::uint64_t from = asked.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (asked.load() < from + 30 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(dictionary_count(*e) == 0);
    speed = 1.0;
    CHECK(wait_for_dictionaries(*e, 1) == 1);
    check_files(*e, files);
}

TEST_CASE("a store that stopped trains no dictionary", "[engine][compression][dictionary]") {
    TempDir dir;
    EngineOptions o = dictionary_options(dir.store());
    o.background_threads = 0;
    auto e = open_engine(o);
    Files files;
    write_files(*e, &files, "f", 3, 512 * 1024, 1600);
    e->stop("the test stops it");
    bool trained = true;
    require_ok(e->train_dictionary(&trained));
    CHECK_FALSE(trained);
    CHECK(dictionary_count(*e) == 0);
    abandon_engine(*e);
}

namespace {

// Bytes of random hex digits: zstd halves them, and a dictionary trained on
// text gives it nothing more.
std::vector<std::uint8_t> hex_bytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>("0123456789abcdef"[rng() % 16]);
    return v;
}

std::map<ChunkId, ChunkRecord> chunk_records(const std::string& store) {
    std::unique_ptr<MetaStore> m;
    require_ok(MetaStore::open(store + "/meta", 1ull << 32, true, &m));
    std::unique_ptr<Txn> t;
    require_ok(m->begin_read(&t));
    return all_chunk_records(*t);
}

std::uint64_t bytes_moved(Engine& e) {
    return nlohmann::json::parse(e.status_json()).at("compaction_bytes_moved").get<std::uint64_t>();
}

}  // namespace

TEST_CASE(
    "zstd chunks stored before the store's first dictionary are stored with it once idle; those it "
    "cannot shrink keep their bytes and are not moved again",
    "[engine][compression][dictionary][reclaim]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed("zstd:6");
    o.compression_background = parsed("zstd:6");
    o.reclaim = ReclaimMode::kManual;  // run_reclaim() runs at full speed, as an idle store's reclaimer
    Files files;
    {
        auto e = open_engine(o);
        write_files(*e, &files, "text", 4, 512 * 1024, 7000);
        files["hex"] = hex_bytes(1 << 20, 7100);
        write_synced(*e, "hex", files["hex"]);
    }
    REQUIRE(record_kinds(dir.store()).by_dictionary[1] == 0);
    change_metadata(dir.store(),
                    [](Txn& t) { require_ok(put_dictionary(t, 1, 0, trained_by_hand())); });
    std::uint64_t before = 0;
    {
        auto e = open_engine(o);
        before = counters_of(*e).stored_bytes;
        require_ok(e->run_reclaim());
        CHECK(counters_of(*e).stored_bytes < before);
        check_files(*e, files);
    }
    RecordKinds k = record_kinds(dir.store());
    CHECK(k.by_dictionary[1] > 0);
    // The hex chunks: the dictionary made none of them smaller.
    REQUIRE(k.by_dictionary[0] > 0);
    // Every zstd chunk says a dictionary was tried for it, so no later
    // compaction takes it up again.
    for (const auto& [id, rec] : chunk_records(dir.store())) {
        if (rec.compression().method != CompressionMethod::kZstd) continue;
        INFO("chunk " << id);
        CHECK(rec.dictionary_tried());
    }
    {
        auto e = open_engine(o);
        require_ok(e->run_reclaim());
        CHECK(bytes_moved(*e) == 0);
        check_files(*e, files);
    }
    CHECK(check_invariants(dir.store()).empty());
    const FsckReport r = scrub(dir.store());
    INFO(problems_of(r));
    CHECK(r.problems.empty());
}

TEST_CASE("an encrypted store trains its dictionary sealed: chunks use it, no byte of it is in the clear, a "
          "record moved to another id is damaged, and without the key none is loaded",
          "[engine][compression][dictionary][encryption]") {
    const std::string marker = "DICTIONARY-MARKER-51c7e";
    auto marked = [&](std::size_t n, unsigned seed) {
        std::vector<std::uint8_t> v = text_bytes(n, seed);
        for (std::size_t at = 0; at + marker.size() < v.size(); at += 509)
            std::copy(marker.begin(), marker.end(), v.begin() + static_cast<std::ptrdiff_t>(at));
        return v;
    };
    // Whether any file under dir holds the marker.
    auto holds_marker = [&](const std::string& dir) {
        for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
            if (!f.is_regular_file()) continue;
            std::ifstream in(f.path(), std::ios::binary);
            const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (bytes.find(marker) != std::string::npos) return true;
        }
        return false;
    };
    std::array<std::uint8_t, StoreKey::kBytes> raw{};
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>(i * 5 + 3);
    const auto key = std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(raw));
    const bool encrypted = GENERATE(false, true);
    INFO((encrypted ? "encrypted" : "plain"));
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed("zstd:3");
    o.compression_background = parsed("zstd:3");
    o.dictionary_min_bytes = 1 << 20;
    if (encrypted) o.key = key;
    Files files;
    {
        auto e = open_engine(o);
        for (unsigned i = 0; i < 8; ++i) {
            files["before" + std::to_string(i)] = marked(512 * 1024, 300 + i);
            write_synced(*e, "before" + std::to_string(i), files["before" + std::to_string(i)]);
        }
        // Trained now, or by the trainer's thread, which may have come first.
        bool trained = false;
        require_ok(e->train_dictionary(&trained));
        REQUIRE(wait_for_dictionaries(*e, 1) == 1);
        files["after"] = marked(512 * 1024, 400);
        write_synced(*e, "after", files["after"]);
        check_files(*e, files);
    }
    CHECK(record_kinds(dir.store()).by_dictionary[1] > 0);
    // The plain store's dictionary holds the marker in its metadata: the
    // search can find it, and finds nothing in the encrypted store.
    CHECK(holds_marker(dir.store() + "/meta") == !encrypted);
    if (encrypted) CHECK_FALSE(holds_marker(dir.store()));
    check_reopened(o, files, 1);
    FsckOptions fo;
    fo.store = dir.store();
    fo.scrub = true;
    fo.key = o.key;
    FsckReport report;
    require_ok(run_fsck(fo, &report));
    INFO(problems_of(report));
    CHECK(report.problems.empty());
    if (!encrypted) return;
    // Without the key (hiodsfs-stat): no dictionary loads, none is damaged.
    Log log;
    EngineOptions figures = o;
    figures.key = nullptr;
    figures.read_only = true;
    figures.without_key = true;
    figures.log = log.sink();
    {
        auto e = open_engine(figures);
        CHECK(dictionary_count(*e) == 0);
    }
    CHECK(log.count("damaged") == 0);
    // The sealed record copied under id 2: it opens as id 1 only.
    change_metadata(dir.store(), [](Txn& t) {
        std::string_view v;
        bool found = false;
        require_ok(t.get(Db::kSuper, dictionary_key(1), &v, &found));
        REQUIRE(found);
        require_ok(t.put(Db::kSuper, dictionary_key(2), std::string(v)));
    });
    EngineOptions logged = o;
    logged.log = log.sink();
    {
        auto e = open_engine(logged);
        CHECK(dictionary_count(*e) == 1);
        check_files(*e, files);
    }
    CHECK(log.count("compression dictionary 2's record is damaged") == 1);
}
