// Work the background pass or the reclaimer fails on is set aside, with its
// reason, and the rest goes on: one damaged file must not stop the
// deduplication of every other, nor one missing chunk record every delete
// and compaction. What was set aside is logged once, shown in status.json,
// kept in the metadata for hiodsfs-fsck to see, and tried again at the
// next read-write open.
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += "\n  " + l;
    return out;
}

nlohmann::json status_of(Engine& e) { return nlohmann::json::parse(e.status_json()); }

// Log lines, from whichever engine thread writes them.
struct Logged {
    std::mutex mu;
    std::vector<std::string> lines;
    std::function<void(const std::string&)> sink() {
        return [this](const std::string& line) {
            std::lock_guard<std::mutex> g(mu);
            lines.push_back(line);
        };
    }
    std::size_t count(const std::string& a, const std::string& b) {
        std::lock_guard<std::mutex> g(mu);
        return static_cast<std::size_t>(
            std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
                return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
            }));
    }
    std::string all() {
        std::lock_guard<std::mutex> g(mu);
        return joined(lines);
    }
};

// Edits a closed store's metadata.
void edit_meta(const std::string& store, const std::function<void(Txn&)>& fn) {
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(store + "/meta", 1ull << 32, false, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    fn(*t);
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->commit_group(nullptr).is_ok());
}

// The bytes of the chunk at the start of a closed store's file no longer
// read (a checksum failure: EIO).
void damage_first_chunk(const std::string& store, InodeId ino) {
    edit_meta(store, [&](Txn& t) {
        bool found = false;
        ChunkRecord rec;
        REQUIRE(get_chunk(t, extent_at(t, ino, 0).chunk, &rec, &found).is_ok());
        REQUIRE(found);
        flip_chunk_byte(store, rec, 100);
    });
}

std::vector<std::string> fsck_notes(const std::string& store) {
    FsckReport report;
    FsckOptions fo;
    fo.store = store;
    REQUIRE(run_fsck(fo, &report).is_ok());
    return report.notes;
}

bool any_has(const std::vector<std::string>& lines, const std::string& what) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

}  // namespace

TEST_CASE("the background pass sets aside a file it fails on and deduplicates the others",
          "[engine][quarantine]") {
    TempDir dir;
    Logged logged;
    EngineOptions o = options_for(dir.store(), kFixed);
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    o.background_commit = false;
    o.log = logged.sink();
    std::mt19937_64 rng(3);
    const std::vector<std::uint8_t> a_data = random_bytes(rng, 64 * 1024);
    std::vector<std::uint8_t> b_data = random_bytes(rng, 64 * 1024);
    b_data.insert(b_data.end(), b_data.begin(), b_data.end());  // half of it duplicates
    InodeId a = 0, b = 0;
    {
        auto e = open_engine(o);
        a = make_file(*e, "a").ino;
        write_all(*e, a, 0, a_data);
        b = make_file(*e, "b").ino;
        write_all(*e, b, 0, b_data);
        REQUIRE(e->close().is_ok());
    }
    // a's raw bytes no longer read: its re-chunking fails (EIO).
    damage_first_chunk(dir.store(), a);
    const std::string a_name = "inode " + std::to_string(a);
    {
        auto e = open_engine(o);
        const Status st = e->run_background();
        INFO(st.to_string() << "; logged:" << logged.all());
        CHECK(st.is_ok());
        auto s = status_of(*e);
        CHECK(s.at("backlog_records") == 0);
        CHECK(s.at("raw_bytes") == a_data.size());  // b's are deduplicated
        CHECK(s.at("dedup_hits").get<std::uint64_t>() >= 16);
        CHECK(s.at("quarantined_dirty_records").get<std::uint64_t>() >= 1);
        CHECK(s.at("quarantine_error").get<std::string>().find(a_name) != std::string::npos);
        CHECK(read_all(*e, b) == b_data);
        CHECK(logged.count("set aside", a_name) == 1);
        // Not taken again in this run, and not logged again.
        REQUIRE(e->run_background().is_ok());
        CHECK(logged.count("set aside", a_name) == 1);
        REQUIRE(e->close().is_ok());
    }
    // Kept for fsck to see, and out of the backlog it counts.
    const std::vector<std::string> notes = fsck_notes(dir.store());
    INFO("fsck notes: " << joined(notes));
    CHECK(any_has(notes, "set aside"));
    CHECK(any_has(notes, a_name));
    // The next read-write open tries it again: it fails again, alone.
    auto e = open_engine(o);
    CHECK(status_of(*e).at("backlog_records").get<std::uint64_t>() >= 1);
    CHECK(status_of(*e).at("quarantined_dirty_records") == 0);
    REQUIRE(e->run_background().is_ok());
    CHECK(status_of(*e).at("quarantined_dirty_records").get<std::uint64_t>() >= 1);
    CHECK(logged.count("set aside", a_name) == 2);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("the reclaimer sets aside a deleted file it cannot free and frees the others",
          "[engine][quarantine]") {
    TempDir dir;
    Logged logged;
    EngineOptions o = options_for(dir.store(), kFixed);
    o.reclaim = ReclaimMode::kManual;
    o.async_delete_bytes = 64 * 1024;  // both deletes go to the reclaimer
    o.background_commit = false;
    o.log = logged.sink();
    std::mt19937_64 rng(4);
    const std::vector<std::uint8_t> kept = random_bytes(rng, 64 * 1024);
    InodeId broken = 0;
    ChunkId missing = 0;
    {
        auto e = open_engine(o);
        broken = make_file(*e, "broken").ino;
        write_all(*e, broken, 0, random_bytes(rng, 256 * 1024));
        const InodeId other = make_file(*e, "other").ino;
        write_all(*e, other, 0, random_bytes(rng, 256 * 1024));
        write_all(*e, make_file(*e, "kept").ino, 0, kept);
        REQUIRE(e->close().is_ok());
        (void)other;
    }
    edit_meta(dir.store(), [&](Txn& t) {
        missing = extent_at(t, broken, 8192).chunk;
        REQUIRE(del_chunk(t, missing).is_ok());
    });
    const std::string broken_name = "inode " + std::to_string(broken);
    {
        auto e = open_engine(o);
        REQUIRE(e->unlink(kRootInode, "broken").is_ok());
        REQUIRE(e->unlink(kRootInode, "other").is_ok());
        const Status st = e->run_reclaim();
        INFO(st.to_string() << "; logged:" << logged.all());
        CHECK(st.is_ok());
        auto s = status_of(*e);
        CHECK(s.at("reclaim_deletes_done") == 1);  // "other"
        CHECK(s.at("quarantined_deletes") == 1);
        const std::string why = s.at("quarantine_error").get<std::string>();
        CHECK(why.find(broken_name) != std::string::npos);
        CHECK(why.find("chunk " + std::to_string(missing)) != std::string::npos);
        CHECK(logged.count("set aside", broken_name) == 1);
        REQUIRE(e->run_reclaim().is_ok());
        CHECK(logged.count("set aside", broken_name) == 1);
        Attr a;
        REQUIRE(e->lookup(kRootInode, "kept", &a).is_ok());
        CHECK(read_all(*e, a.ino) == kept);
        REQUIRE(e->close().is_ok());
    }
    const std::vector<std::string> notes = fsck_notes(dir.store());
    INFO("fsck notes: " << joined(notes));
    CHECK(any_has(notes, "set aside"));
    // Tried again by the next open, set aside again.
    auto e = open_engine(o);
    REQUIRE(e->run_reclaim().is_ok());
    CHECK(status_of(*e).at("quarantined_deletes") == 1);
    CHECK(logged.count("set aside", broken_name) == 2);
    REQUIRE(e->close().is_ok());
}

// A record whose cut lies far back over raw bytes waits at the back of the
// queue for their records to sweep them. The raw bytes of a file whose
// work was set aside are in no record until the next mount: a record behind
// them is swept from the far cut instead of coming back on every batch.
TEST_CASE("a record behind a file's set-aside raw bytes is not sent back behind them forever",
          "[engine][quarantine][deferred]") {
    TempDir dir;
    Logged logged;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(2048, 8192, 32768));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    o.log = logged.sink();
    std::mt19937_64 rng(5);
    const std::vector<std::uint8_t> data = random_bytes(rng, 8u << 20);
    InodeId a = 0;
    {
        auto e = open_engine(o);
        a = make_file(*e, "a").ino;
        write_all(*e, a, 0, data, 1 << 20);
        REQUIRE(e->close().is_ok());
    }
    damage_first_chunk(dir.store(), a);
    auto e = open_engine(o);
    REQUIRE(e->run_background().is_ok());
    REQUIRE(status_of(*e).at("quarantined_dirty_records").get<std::uint64_t>() >= 1);
    REQUIRE(status_of(*e).at("backlog_records") == 0);
    // Raw bytes of its own, more than the sweep's reach past those set aside.
    std::vector<std::uint8_t> tail = random_bytes(rng, 4096);
    write_all(*e, a, data.size() - 4096, tail);
    REQUIRE(status_of(*e).at("backlog_records") == 1);
    const Status st = e->run_background();  // returns only once the queue is empty
    INFO(st.to_string() << "; logged:" << logged.all());
    CHECK(st.is_ok());
    auto s = status_of(*e);
    CHECK(s.at("backlog_records") == 0);
    // Swept from the far cut, through the unreadable bytes: set aside too.
    CHECK(s.at("quarantined_dirty_records").get<std::uint64_t>() >= 2);
    REQUIRE(e->close().is_ok());
}
