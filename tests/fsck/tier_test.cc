// hiodsfs-fsck on a store whose sealed segments live in a tier (the
// in-memory one here; tests/mount/rados_test.cc runs the tool against
// RADOS): a clean store checks clean without downloading an object, an
// object gone names the files it held, a flipped byte in one is found by
// --scrub only, a cache_dir is recovered or caught up from the tier first,
// and a repair commits through the tier's journal, so that the tier stays
// the store's authority and the next open finds the directory its copy.
#include <atomic>
#include <filesystem>

#include "../engine/engine_test_util.h"
#include "../store/memory_tier.h"
#include "engine/meta_tier.h"
#include "fsck/fsck.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// Counts whole-segment reads: a plain check must make none.
class CountingTier : public MemoryTier {
public:
    Status get(SegmentId id, std::vector<char>* out) override {
        ++gets;
        return MemoryTier::get(id, out);
    }
    std::atomic<int> gets{0};
};

bool any_contains(const std::vector<std::string>& lines, const std::string& s) {
    for (const auto& l : lines)
        if (l.find(s) != std::string::npos) return true;
    return false;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

std::vector<std::string> problem_lines(const FsckReport& r) {
    std::vector<std::string> out;
    for (const auto& p : r.problems) out.push_back(p.what);
    return out;
}

std::size_t segment_files(const std::string& store) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(store + "/segments"))
        n += e.path().extension() == ".seg" ? 1 : 0;
    return n;
}

// A store over the tier: "big" (9 MiB, written first, so segment 1 holds
// its first 4 MiB) and "small", closed cleanly (so snapshotted).
struct TieredStore {
    TempDir dir;
    CountingTier tier;
    std::vector<std::uint8_t> big, small;

    TieredStore() {
        std::mt19937_64 rng(15);
        big = random_bytes(rng, 9 << 20);
        small = random_bytes(rng, 20000);
        auto e = open_engine(engine_options(dir.store()));
        const Attr b = make_file(*e, "big");
        write_all(*e, b.ino, 0, big);
        const Attr s = make_file(*e, "small");
        write_all(*e, s.ino, 0, small);
        REQUIRE(e->close().is_ok());
        REQUIRE(tier.objects.size() >= 3);
        tier.gets = 0;
    }

    EngineOptions engine_options(const std::string& store) {
        EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
        o.segments.tier = &tier;
        o.background_threads = 0;
        return o;
    }

    // Without the directory's copies every segment is the tier's alone.
    void empty_cache() {
        for (const auto& e : std::filesystem::directory_iterator(dir.store() + "/segments"))
            std::filesystem::remove(e.path());
    }

    FsckReport check(const std::string& store, bool scrub = false, bool repair = false) {
        FsckOptions o;
        o.store = store;
        o.tier = &tier;
        o.scrub = scrub;
        o.repair = repair;
        FsckReport r;
        Status st = run_fsck(o, &r);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        return r;
    }
};

}  // namespace

TEST_CASE("fsck with a tier: a clean store checks clean; a plain check downloads no object, --scrub each once",
          "[fsck][tier]") {
    TieredStore s;
    s.empty_cache();
    FsckReport r = s.check(s.dir.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 0);
    CHECK(r.problems.empty());
    CHECK(r.segments == s.tier.objects.size());
    CHECK(s.tier.gets == 0);

    r = s.check(s.dir.store(), true);
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 0);
    CHECK(r.scrubbed_bytes >= s.big.size() + s.small.size());
    // Every object read once, into memory: the cache directory stays empty.
    CHECK(s.tier.gets == static_cast<int>(s.tier.objects.size()));
    CHECK(segment_files(s.dir.store()) == 0);
}

TEST_CASE("fsck with a tier: objects the metadata does not know are reported and kept", "[fsck][tier]") {
    TieredStore s;
    // A journal object the snapshot covers (a snapshot interrupted before
    // it removed it: a later object starts at or before its seq + 1), and
    // a segment object written after the last commit.
    const std::string stale = journal_object_name(1, 1), newest = journal_object_name(2, 1);
    s.tier.named[stale] = {};
    s.tier.named[newest] = {};
    s.tier.objects[99] = std::vector<char>(1000, 'x');
    FsckReport r = s.check(s.dir.store());
    INFO(joined(problem_lines(r)) << joined(r.notes));
    CHECK(r.exit_code() == 0);
    CHECK(any_contains(r.notes, "object " + stale + " holds nothing the metadata snapshot of record"));
    CHECK_FALSE(any_contains(r.notes, newest));
    CHECK(any_contains(r.notes, "segment 99 (1000 bytes, only in memory tier) holds no chunk the metadata refers to: "
                                "written after the last commit"));
    r = s.check(s.dir.store(), false, true);
    CHECK(r.exit_code() == 0);
    CHECK(s.tier.named.count(stale) == 1);
    CHECK(s.tier.objects.count(99) == 1);
}

TEST_CASE("fsck with a tier: an object removed from the tier names the chunks and files it held", "[fsck][tier]") {
    TieredStore s;
    s.empty_cache();
    REQUIRE(s.tier.remove(1).is_ok());
    FsckReport r = s.check(s.dir.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 4);
    CHECK(any_contains(problem_lines(r), "lives in segment 1, which is missing; it holds /big bytes 0-4095"));
    CHECK_FALSE(any_contains(problem_lines(r), "/small"));

    // A segment whose object lost its tail: the chunks past its end.
    TieredStore t;
    t.empty_cache();
    t.tier.objects[2].resize(t.tier.objects[2].size() / 2);
    r = t.check(t.dir.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 4);
    CHECK(any_contains(problem_lines(r), "lies beyond them (truncated?); it holds /big bytes"));
    CHECK(t.tier.gets == 0);
}

TEST_CASE("fsck with a tier: a flipped byte in an object is found by --scrub only, naming the file",
          "[fsck][tier]") {
    TieredStore s;
    s.empty_cache();
    s.tier.objects[1][SegmentStore::kHeaderBytes + 100] ^= 0x5a;  // the payload of /big's first chunk
    FsckReport r = s.check(s.dir.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 0);
    r = s.check(s.dir.store(), true);
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 4);
    CHECK(any_contains(problem_lines(r), "payload checksum mismatch"));
    CHECK(any_contains(problem_lines(r), "it holds /big bytes 0-4095"));
}

TEST_CASE("fsck with a tier: an empty cache_dir is recovered from the tier, one behind is caught up, an older one "
          "refused",
          "[fsck][tier]") {
    TieredStore s;
    TempDir fresh;
    FsckReport r = s.check(fresh.store());
    INFO(joined(r.notes));
    CHECK(r.exit_code() == 0);
    CHECK(any_contains(r.notes, "recovered the metadata of memory tier into " + fresh.store()));
    CHECK(s.tier.gets == 0);
    // The recovered directory is the store: the engine opens it and reads it all.
    {
        auto e = open_engine(s.engine_options(fresh.store()));
        Attr a;
        REQUIRE(e->lookup(kRootInode, "big", &a).is_ok());
        CHECK(read_all(*e, a.ino) == s.big);
        write_all(*e, make_file(*e, "later").ino, 0, s.small);
        REQUIRE(e->close().is_ok());
    }
    // The first directory is older than the tier's snapshot now.
    FsckOptions o;
    o.store = s.dir.store();
    o.tier = &s.tier;
    FsckReport refused;
    Status st = run_fsck(o, &refused);
    INFO(st.to_string());
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("holds an older copy of the store than memory tier") != std::string::npos);

    // Without its tier a tiered store is not checked at all.
    o.tier = nullptr;
    st = run_fsck(o, &refused);
    CHECK(st.err() == EOPNOTSUPP);
    CHECK(st.message().find("keeps its sealed segments in memory tier") != std::string::npos);
}

TEST_CASE("fsck with a tier: --repair commits through the tier's journal", "[fsck][tier][journal]") {
    TieredStore s;
    // Damage that is in the tier too: committed through its journal, as
    // a daemon's bug would.
    {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(s.dir.store() + "/meta", 1ull << 32, false, &m).is_ok());
        TierJournal journal(&s.tier);
        m->set_journal(&journal);
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        t->super().counters.stored_bytes += 123;
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->commit_group(nullptr).is_ok());
    }
    TempDir before, after;
    FsckReport r = s.check(before.store());  // recovered from the tier: the damage is there
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 4);
    CHECK(any_contains(problem_lines(r), "counter of stored bytes"));

    std::uint64_t seq_before = 0;
    {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(s.dir.store() + "/meta", 1ull << 32, true, &m).is_ok());
        seq_before = m->committed_journal_seq();
    }
    r = s.check(s.dir.store(), false, true);
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 1);
    std::vector<std::vector<char>> bytes;
    std::vector<JournalRecord> records;
    std::uint64_t last = 0;
    REQUIRE(read_journal(&s.tier, seq_before, &bytes, &records, &last).is_ok());
    CHECK(records.size() == 1);  // the repair's
    CHECK(last == seq_before + 1);

    // A fresh directory gets the repaired store; the one a record behind
    // catches up; the repaired one opens (not "ahead of the pool").
    r = s.check(after.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 0);
    r = s.check(before.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 0);
    CHECK(any_contains(r.notes, "replayed 1 journal records from memory tier"));
    auto e = open_engine(s.engine_options(s.dir.store()));
    REQUIRE(e->close().is_ok());
}

TEST_CASE("fsck with a tier: an object missing while the cache_dir holds its segment is "
          "reported; --repair uploads it, and a mount that does says so",
          "[fsck][tier]") {
    TieredStore s;
    // `rados rm` of segment 1's object; the cache directory still has it.
    const std::vector<char> kept = s.tier.objects.at(1);
    REQUIRE(std::filesystem::exists(s.dir.store() + "/segments/00000001.seg"));
    s.tier.objects.erase(1);
    FsckReport r = s.check(s.dir.store());
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 4);
    CHECK(any_contains(problem_lines(r),
                       "segment 1 holds bytes the metadata refers to (up to byte "));
    CHECK(any_contains(problem_lines(r), "but memory tier has no object of it"));
    CHECK(r.repairable() == 1);
    CHECK_FALSE(s.tier.holds(1));  // a check changes nothing

    r = s.check(s.dir.store(), false, true);
    INFO(joined(problem_lines(r)));
    CHECK(r.exit_code() == 1);
    REQUIRE(s.tier.holds(1));
    CHECK(s.tier.objects.at(1) == kept);
    r = s.check(s.dir.store());
    CHECK(r.exit_code() == 0);

    // Gone again: a mount uploads it from the cache, and says so.
    s.tier.objects.erase(1);
    std::vector<std::string> log;
    EngineOptions o = s.engine_options(s.dir.store());
    o.log = [&log](const std::string& line) { log.push_back(line); };
    {
        auto e = open_engine(o);
        REQUIRE(e->close().is_ok());
    }
    INFO(joined(log));
    CHECK(any_contains(
        log,
        "segment 1 holds bytes the metadata refers to, but memory tier has no object of it: "
        "uploading it again from " +
            s.dir.store() + "/segments"));
    REQUIRE(s.tier.holds(1));
    CHECK(s.tier.objects.at(1) == kept);
    CHECK(s.check(s.dir.store()).exit_code() == 0);
}
