// The engine over a SegmentTier: what it writes reaches the tier by the
// time it closes, a remount whose cache holds nothing reads it all back,
// FORMAT keeps the store from being opened read-write without its tier,
// and Engine::stop (the daemon's answer to a lost lock) refuses changes.
// The metadata in the tier: after a crash, or a clean close, a new empty
// store directory over the same tier recovers every fsynced file (journal
// replay, snapshot); a journal write that fails fails fsync with EIO; a
// directory older than the tier's copy, or not its continuation, is refused.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../store/memory_tier.h"
#include "engine/meta_tier.h"
#include "meta/journal.h"
#include "engine_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

EngineOptions tiered_options(const std::string& store, MemoryTier* tier, std::uint64_t cache_bytes) {
    EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
    o.segments.tier = tier;
    o.segments.cache_bytes = cache_bytes;
    return o;
}

std::string slurp_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST_CASE("engine with a tier: everything is in the tier at close, and reads back through an empty cache",
          "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    std::mt19937_64 rng(15);
    const std::vector<std::uint8_t> data = random_bytes(rng, 10 << 20);  // past two 4 MiB segments
    {
        auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
        const Attr f = make_file(*e, "f");
        write_all(*e, f.ino, 0, data);
        REQUIRE(e->fsync(f.ino, false).is_ok());
        REQUIRE(e->close().is_ok());
    }
    // Sealed at close, so the last segment is there too.
    REQUIRE(tier.objects.size() >= 3);
    std::uint64_t in_tier = 0;
    for (const auto& [id, bytes] : tier.objects) in_tier += bytes.size();
    REQUIRE(in_tier >= data.size());
    REQUIRE(slurp_text(dir.store() + "/FORMAT").find("tier memory tier\n") != std::string::npos);

    // An empty cache: the copies the last run left are deleted by hand (an
    // open would evict them too, but in the uploader thread, after the open,
    // and a read that came first on a loaded machine found one). With a cache
    // of one byte every segment is fetched (all but the one read last are
    // evicted again).
    std::size_t removed = 0;
    for (const auto& [id, bytes] : tier.objects) {
        char name[16];
        std::snprintf(name, sizeof name, "%08x.seg", static_cast<unsigned>(id));
        removed += std::filesystem::remove(dir.store() + "/segments/" + name) ? 1 : 0;
    }
    REQUIRE(removed >= 3);
    auto e = open_engine(tiered_options(dir.store(), &tier, 1));
    InodeId ino = 0;
    {
        Attr a;
        REQUIRE(e->lookup(kRootInode, "f", &a).is_ok());
        ino = a.ino;
    }
    REQUIRE(read_all(*e, ino) == data);
    const nlohmann::json status = nlohmann::json::parse(e->status_json());
    INFO(status.dump());
    CHECK(status.at("backend") == "memory tier");
    CHECK(status.at("tier").at("cache_misses").get<std::uint64_t>() >= 3);
    CHECK(status.at("tier").at("fetched_bytes").get<std::uint64_t>() >= data.size());
    REQUIRE(e->close().is_ok());
}

TEST_CASE("engine with a tier: FORMAT refuses a read-write open without it, or with another",
          "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    {
        auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
        make_file(*e, "f");
        REQUIRE(e->close().is_ok());
    }
    std::unique_ptr<Engine> e;
    Status st = Engine::open(options_for(dir.store(), ChunkingParams::fixed(4096)), &e);
    REQUIRE(st.err() == EINVAL);
    CHECK(st.message().find("keeps its segments in memory tier: mount it as memory tier") != std::string::npos);

    class OtherTier : public MemoryTier {
    public:
        std::string describe() const override { return "another tier"; }
    } other;
    st = Engine::open(tiered_options(dir.store(), &other, 1ull << 30), &e);
    REQUIRE(st.err() == EINVAL);
    CHECK(st.message().find("not in another tier") != std::string::npos);

    // Read-only tools (hiodsfs-stat, counters) open it without the tier.
    EngineOptions ro = options_for(dir.store(), ChunkingParams::fixed(4096));
    ro.read_only = true;
    e = open_engine(ro);
    SpaceCounters c;
    REQUIRE(e->counters(&c).is_ok());
    const nlohmann::json status = nlohmann::json::parse(e->status_json());
    CHECK(status.at("backend") == "memory tier");
    CHECK_FALSE(status.contains("tier"));  // its figures only while a tier is there
}

TEST_CASE("engine: stop() refuses every later change and fsync with EIO", "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
    const Attr f = make_file(*e, "f");
    std::mt19937_64 rng(16);
    write_all(*e, f.ino, 0, random_bytes(rng, 8192));
    REQUIRE(e->fsync(f.ino, false).is_ok());
    e->stop("the lock on the store was lost");
    NewNode n;
    n.mode = S_IFREG | 0644;
    Attr a;
    Status st = e->create(kRootInode, "g", n, &a);
    REQUIRE(st.err() == EIO);
    CHECK(st.message() == "the lock on the store was lost");
    REQUIRE(e->fsync(f.ino, false).err() == EIO);
    CHECK(nlohmann::json::parse(e->status_json()).at("store_error") == "the lock on the store was lost");
}

// The metadata invariants of a closed store (hiodsfs-fsck does not read a
// tier yet, so its verdict is left out).
std::vector<std::string> meta_problems(const std::string& store) {
    std::vector<std::string> out;
    for (const std::string& p : check_invariants(store))
        if (p.rfind("fsck: ", 0) != 0) out.push_back(p);
    return out;
}

TEST_CASE("engine with a tier: after a crash, an empty directory recovers every fsynced file from the tier",
          "[engine][tier][journal]") {
    TempDir first, second, third;
    MemoryTier tier;
    std::mt19937_64 rng(17);
    const std::vector<std::uint8_t> big = random_bytes(rng, 9 << 20);  // past two 4 MiB segments
    const std::vector<std::uint8_t> small = random_bytes(rng, 6000);
    {
        auto e = open_engine(tiered_options(first.store(), &tier, 1ull << 30));
        const Attr f = write_synced(*e, "big", big);
        write_synced(*e, "small", small);
        // Overwritten and renamed after: the journal carries every change.
        write_all(*e, f.ino, 4096, small);
        REQUIRE(e->rename(kRootInode, "small", kRootInode, "renamed", 0).is_ok());
        REQUIRE(e->fsync(f.ino, false).is_ok());
        make_file(*e, "never-synced");
        abandon_engine(*e);  // kill -9: nothing of the directory is read again
    }
    CHECK(tier.named_with_prefix("journal.") >= 1);
    CHECK(tier.named_with_prefix("meta") == 0);  // no snapshot yet: the journal from record 1
    std::vector<std::uint8_t> big_now = big;
    std::copy(small.begin(), small.end(), big_now.begin() + 4096);

    std::vector<std::string> log;
    EngineOptions o = tiered_options(second.store(), &tier, 1ull << 30);
    o.log = [&log](const std::string& line) { log.push_back(line); };
    {
        auto e = open_engine(o);
        REQUIRE(read_named(*e, "big") == big_now);
        REQUIRE(read_named(*e, "renamed") == small);
        Attr a;
        CHECK(e->lookup(kRootInode, "small", &a).err() == ENOENT);
        // And it goes on: a write and a clean close (a snapshot).
        const Attr h = make_file(*e, "after");
        write_all(*e, h.ino, 0, small);
        REQUIRE(e->close().is_ok());
    }
    REQUIRE_FALSE(log.empty());
    CHECK(log.front().find("recovered the metadata of memory tier") != std::string::npos);
    CHECK(log.front().find("no snapshot") != std::string::npos);
    CHECK(meta_problems(second.store()) == std::vector<std::string>{});
    CHECK(tier.named_with_prefix("meta.") >= 1);
    CHECK(tier.named_with_prefix("journal.") == 0);  // all in the snapshot

    // From the snapshot alone, in yet another directory.
    log.clear();
    o = tiered_options(third.store(), &tier, 1);
    o.log = [&log](const std::string& line) { log.push_back(line); };
    {
        auto e = open_engine(o);
        REQUIRE(read_named(*e, "big") == big_now);
        REQUIRE(read_named(*e, "renamed") == small);
        REQUIRE(read_named(*e, "after") == small);
        REQUIRE(e->close().is_ok());
    }
    REQUIRE_FALSE(log.empty());
    CHECK(log.front().find("snapshot of record") != std::string::npos);
    CHECK(log.front().find(", 0 journal records replayed") != std::string::npos);

    // The first directory is older than the tier's copy: refused, never used.
    std::unique_ptr<Engine> e;
    Status st = Engine::open(tiered_options(first.store(), &tier, 1ull << 30), &e);
    INFO(st.to_string());
    REQUIRE(st.err() == EUCLEAN);
    CHECK(st.message().find("holds an older copy of the store") != std::string::npos);
    CHECK(st.message().find("mount with an empty cache_dir") != std::string::npos);
}

TEST_CASE("engine with a tier: the tier's records a directory missed are replayed at open",
          "[engine][tier][journal]") {
    TempDir dir;
    MemoryTier tier;
    std::mt19937_64 rng(18);
    const std::vector<std::uint8_t> data = random_bytes(rng, 20000);
    std::string saved_meta;
    {
        auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
        make_file(*e, "old");
        REQUIRE(e->sync_all().is_ok());
        // The directory's metadata as it is now: a crash between the journal
        // write and the local commit leaves it so.
        saved_meta = dir.store() + "/../meta-copy";
        std::filesystem::remove_all(saved_meta);
        std::filesystem::copy(dir.store() + "/meta", saved_meta);
        write_synced(*e, "new", data);
        abandon_engine(*e);
    }
    std::filesystem::remove_all(dir.store() + "/meta");
    std::filesystem::copy(saved_meta, dir.store() + "/meta");
    std::filesystem::remove_all(saved_meta);
    std::vector<std::string> log;
    EngineOptions o = tiered_options(dir.store(), &tier, 1ull << 30);
    o.log = [&log](const std::string& line) { log.push_back(line); };
    auto e = open_engine(o);
    REQUIRE(read_named(*e, "new") == data);
    REQUIRE_FALSE(log.empty());
    CHECK(log.front().find("journal records from memory tier that") != std::string::npos);
    REQUIRE(e->close().is_ok());
    CHECK(meta_problems(dir.store()) == std::vector<std::string>{});
}

TEST_CASE("engine with a tier: a journal write that fails fails fsync with EIO; the next commit writes it",
          "[engine][tier][journal]") {
    // Whether the failed appends landed (a timeout after the write) or not,
    // the store goes on, and what fsync later confirms is in the journal.
    for (bool landed : {false, true}) {
        INFO("failed appends land: " << landed);
        TempDir dir, fresh, fresh2;
        MemoryTier tier;
        tier.failed_appends_land = landed;
        std::mt19937_64 rng(19);
        const std::vector<std::uint8_t> kept = random_bytes(rng, 50000), retried = random_bytes(rng, 30000),
                                        during = random_bytes(rng, 20000);
        {
            auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
            write_synced(*e, "kept", kept);
            const Attr g = make_file(*e, "retried");
            write_all(*e, g.ino, 0, retried);
            tier.set_objects_failing(ETIMEDOUT);
            Status st = e->fsync(g.ino, false);
            INFO(st.to_string());
            REQUIRE(st.err() == EIO);
            CHECK(st.message().find("journal") != std::string::npos);
            // Not stopped: changes go on, and fail to be made durable too.
            const Attr d = make_file(*e, "during");
            write_all(*e, d.ino, 0, during);
            CHECK(e->fsync(d.ino, false).err() == EIO);
            // What another host would recover from the tier now: the last
            // good commit, and (if they landed) the failed records' changes.
            MemoryTier now;
            {
                std::lock_guard lock(tier.mu);
                now.objects = tier.objects;
                now.named = tier.named;
            }
            auto early = open_engine(tiered_options(fresh2.store(), &now, 1ull << 30));
            CHECK(read_named(*early, "kept") == kept);
            Attr a;
            if (!landed) CHECK(early->lookup(kRootInode, "retried", &a).err() == ENOENT);
            if (landed) CHECK(read_named(*early, "retried") == retried);
            REQUIRE(early->close().is_ok());
            // The cluster is back: the next fsync commits everything.
            tier.set_objects_failing(0);
            REQUIRE(e->fsync(d.ino, false).is_ok());
            REQUIRE(e->close().is_ok());
        }
        // The same directory, and an empty one recovering from the tier.
        for (const std::string& store : {dir.store(), fresh.store()}) {
            INFO(store);
            auto e = open_engine(tiered_options(store, &tier, 1ull << 30));
            CHECK(read_named(*e, "kept") == kept);
            CHECK(read_named(*e, "retried") == retried);
            CHECK(read_named(*e, "during") == during);
            REQUIRE(e->close().is_ok());
            CHECK(meta_problems(store) == std::vector<std::string>{});
        }
    }
}

TEST_CASE("engine with a tier: after a lapse, the tier is as it left it unless another wrote a record",
          "[engine][tier][journal]") {
    TempDir dir;
    MemoryTier tier;
    tier.failed_appends_land = true;
    std::mt19937_64 rng(23);
    auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
    write_synced(*e, "a", random_bytes(rng, 20000));
    CHECK(e->check_tier_unchanged().is_ok());
    // Its own appends that failed but landed are its own.
    const Attr f = make_file(*e, "b");
    write_all(*e, f.ino, 0, random_bytes(rng, 10000));
    tier.set_objects_failing(ETIMEDOUT);
    REQUIRE(e->fsync(f.ino, false).err() == EIO);
    tier.set_objects_failing(0);
    Status st = e->check_tier_unchanged();
    INFO(st.to_string());
    CHECK(st.is_ok());
    REQUIRE(e->fsync(f.ino, false).is_ok());
    CHECK(e->check_tier_unchanged().is_ok());
    // A record it did not write: another client had the store.
    std::uint64_t last = 0;
    {
        std::vector<std::vector<char>> bytes;
        std::vector<JournalRecord> recs;
        REQUIRE(read_journal(&tier, 0, &bytes, &recs, &last).is_ok());
        REQUIRE(last >= 2);
    }
    const std::string foreign = encode_journal_record(last + 1, "someone else's", "");
    REQUIRE(tier.append_object(journal_object_name(last + 1, tier.epoch() + 1), foreign.data(),
                               foreign.size())
                .is_ok());
    st = e->check_tier_unchanged();
    CHECK(st.err() == ESTALE);
    CHECK(st.message().find("did not write") != std::string::npos);
    abandon_engine(*e);
}

TEST_CASE("engine with a tier: a block rewritten by many writes of a group is journaled once",
          "[engine][tier][journal]") {
    // 2048 new chunks of 4 KiB, one write each: every write rewrites its
    // chunk block (16 records) and the file's extent block and inode; the
    // group's record keeps only the last of them.
    TempDir dir;
    MemoryTier tier;
    std::mt19937_64 rng(21);
    const std::size_t chunks = 2048;
    const std::vector<std::uint8_t> data = random_bytes(rng, chunks * 4096);
    EngineOptions o = tiered_options(dir.store(), &tier, 1ull << 30);
    o.background_threads = 0;
    // One group for all of it, however slow the build (a sanitizer's): the
    // interval would otherwise cut it in as many groups as it lasts.
    o.commit_interval_ms = 3600 * 1000;
    o.commit_writes = 0;
    auto e = open_engine(o);
    const Attr f = make_file(*e, "f");
    for (std::size_t i = 0; i < chunks; ++i) {
        const std::vector<std::uint8_t> piece(data.begin() + i * 4096, data.begin() + (i + 1) * 4096);
        write_all(*e, f.ino, i * 4096, piece);
    }
    REQUIRE(e->fsync(f.ino, false).is_ok());
    std::size_t journal_bytes = 0;
    {
        std::lock_guard lock(tier.mu);
        for (const auto& [name, bytes] : tier.named)
            if (name.rfind("journal.", 0) == 0) journal_bytes += bytes.size();
    }
    INFO("journal bytes per chunk: " << journal_bytes / chunks);
    // A chunk's own share: its record (about 40 bytes with the digest), its
    // index entry and its extent; a block journaled per write would be
    // hundreds.
    CHECK(journal_bytes / chunks < 120);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("engine without a tier writes no journal", "[engine][tier][journal]") {
    TempDir dir;
    auto e = open_engine(options_for(dir.store(), ChunkingParams::fixed(4096)));
    make_file(*e, "f");
    REQUIRE(e->close().is_ok());
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m).is_ok());
    CHECK(m->committed_journal_seq() == 0);
}

TEST_CASE("the tier's metadata: a snapshot in many parts, the journal after it, and what it deletes",
          "[engine][tier][journal]") {
    TempDir src, dst, dst2;
    for (const TempDir* d : {&src, &dst, &dst2}) std::filesystem::create_directories(d->store());
    MemoryTier tier;
    TierJournal journal(&tier);
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(src.store() + "/meta", 1ull << 32, false, &m).is_ok());
    m->set_journal(&journal);
    auto put_many = [&](int from, int to) {
        for (int i = from; i < to; ++i) {
            std::unique_ptr<Txn> t;
            REQUIRE(m->begin(&t).is_ok());
            REQUIRE(t->put(Db::kXattrs, key_u64_str(1, "k" + std::to_string(i)), std::string(300, 'a' + i % 26)).is_ok());
            REQUIRE(t->commit().is_ok());
            t.reset();
            if (i % 50 == 0) REQUIRE(m->commit_group(nullptr).is_ok());
        }
        REQUIRE(m->commit_group(nullptr).is_ok());
    };
    put_many(0, 500);
    std::uint64_t seq = 0;
    REQUIRE(put_snapshot(Env::posix(), &tier, *m, &journal, src.store() + "/snap.tmp", false, &seq, 16384).is_ok());
    CHECK(seq == m->committed_journal_seq());
    const std::size_t parts = tier.named_with_prefix("meta.");
    CHECK(parts > 3);  // 150 KiB of records in 16 KiB parts
    // The current journal object stays (a background snapshot; more may follow).
    CHECK(tier.named_with_prefix("journal.") == 1);
    put_many(500, 600);
    std::string summary;
    REQUIRE(recover_metadata(Env::posix(), &tier, dst.store() + "/meta", 1ull << 32, &summary).is_ok());
    CHECK(summary.find("snapshot of record " + std::to_string(seq)) != std::string::npos);
    {
        std::unique_ptr<MetaStore> r;
        REQUIRE(MetaStore::open(dst.store() + "/meta", 1ull << 32, true, &r).is_ok());
        CHECK(r->committed_journal_seq() == m->committed_journal_seq());
        std::unique_ptr<Txn> t;
        REQUIRE(r->begin_read(&t).is_ok());
        std::string_view v;
        bool found = false;
        REQUIRE(t->get(Db::kXattrs, key_u64_str(1, "k599"), &v, &found).is_ok());
        CHECK(found);
    }
    // A second snapshot at close: the first one's parts and every journal
    // object go.
    REQUIRE(put_snapshot(Env::posix(), &tier, *m, &journal, src.store() + "/snap.tmp", true, &seq, 16384).is_ok());
    CHECK(tier.named_with_prefix("journal.") == 0);
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(seq));
    CHECK(tier.named_with_prefix(std::string("meta.") + hex + ".") == tier.named_with_prefix("meta."));
    REQUIRE(recover_metadata(Env::posix(), &tier, dst2.store() + "/meta", 1ull << 32, &summary).is_ok());
    CHECK(summary.find(", 0 journal records replayed") != std::string::npos);
}

TEST_CASE("the tier's journal: a torn tail ends it, damage before the tail or a gap is refused, late appends "
          "of an earlier run are ignored",
          "[engine][tier][journal]") {
    MemoryTier tier;
    auto rec = [](std::uint64_t seq) { return encode_journal_record(seq, "s" + std::to_string(seq), ""); };
    auto append = [&](std::uint64_t first, std::uint32_t epoch, const std::string& bytes) {
        REQUIRE(tier.append_object(journal_object_name(first, epoch), bytes.data(), bytes.size())
                    .is_ok());
    };
    // Run 1 (holder 1) wrote 1..3; its record 4 landed late, after run 2
    // (holder 2) began an object at 4.
    append(1, 1, rec(1) + rec(2) + rec(3));
    append(4, 2, rec(4) + rec(5));
    append(1, 1, rec(4));
    const std::string torn = rec(6);
    append(4, 2, torn.substr(0, torn.size() / 2));  // a commit that failed half-way
    std::vector<std::vector<char>> bytes;
    std::vector<JournalRecord> recs;
    std::uint64_t last = 0;
    REQUIRE(read_journal(&tier, 0, &bytes, &recs, &last).is_ok());
    REQUIRE(recs.size() == 5);
    CHECK(last == 5);
    for (std::size_t i = 0; i < recs.size(); ++i) CHECK(recs[i].super == "s" + std::to_string(i + 1));
    // From a later point: only what follows.
    recs.clear();
    REQUIRE(read_journal(&tier, 3, &bytes, &recs, &last).is_ok());
    REQUIRE(recs.size() == 2);
    CHECK(recs.front().seq == 4);

    // Two holders' objects that start at one seq (the first opened one and
    // was taken over before its append landed): the later holder's has it.
    // And a store from before holder epochs (names without one) reads as
    // epoch 0, before any holder's.
    {
        MemoryTier both;
        const std::string old_names = rec(1) + rec(2);
        REQUIRE(both.append_object(journal_object_name(1, 0), old_names.data(), old_names.size())
                    .is_ok());
        const std::string stale = encode_journal_record(3, "stale", std::string(40, 's'));
        const std::string newer = encode_journal_record(3, "newer", "") + rec(4);
        REQUIRE(both.append_object(journal_object_name(3, 5), stale.data(), stale.size()).is_ok());
        REQUIRE(both.append_object(journal_object_name(3, 6), newer.data(), newer.size()).is_ok());
        std::vector<std::uint32_t> epochs;
        recs.clear();
        REQUIRE(read_journal(&both, 0, &bytes, &recs, &last, &epochs).is_ok());
        REQUIRE(recs.size() == 4);
        CHECK(recs[2].super == "newer");
        CHECK(epochs == std::vector<std::uint32_t>{0, 0, 6, 6});
        CHECK(last == 4);
    }

    // A commit written again under its seq after an append that failed:
    // the longest record of the seq wins, in whichever order they landed.
    for (bool late : {false, true}) {
        MemoryTier retried;
        const std::string shorter = encode_journal_record(2, "short", std::string(10, 'a'));
        const std::string longer = encode_journal_record(2, "long", std::string(30, 'b'));
        const std::string bytes3 = rec(1) + (late ? longer + rec(3) + shorter : shorter + longer + rec(3));
        REQUIRE(
            retried.append_object(journal_object_name(1, 1), bytes3.data(), bytes3.size()).is_ok());
        recs.clear();
        REQUIRE(read_journal(&retried, 0, &bytes, &recs, &last).is_ok());
        REQUIRE(recs.size() == 3);
        CHECK(recs[1].super == "long");
        CHECK(recs[2].seq == 3);
        CHECK(last == 3);
    }

    // Damage in an object that is not the last: the records after it are
    // acknowledged commits, so this is not a torn tail.
    MemoryTier damaged;
    std::string first = rec(1) + rec(2);
    first[first.size() - 3] ^= 0x10;
    REQUIRE(damaged.append_object(journal_object_name(1, 1), first.data(), first.size()).is_ok());
    const std::string second = rec(3);
    REQUIRE(damaged.append_object(journal_object_name(3, 1), second.data(), second.size()).is_ok());
    recs.clear();
    Status st = read_journal(&damaged, 0, &bytes, &recs, &last);
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("is damaged") != std::string::npos);

    // A gap: refused.
    MemoryTier gap;
    const std::string g = rec(1) + rec(3);
    REQUIRE(gap.append_object(journal_object_name(1, 1), g.data(), g.size()).is_ok());
    recs.clear();
    st = read_journal(&gap, 0, &bytes, &recs, &last);
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("has no record 2") != std::string::npos);
}

}  // namespace
}  // namespace hiodsfs
