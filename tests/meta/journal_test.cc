// The metadata journal (meta/journal.h): records encode and decode, a torn
// or damaged tail stops decoding at the last whole record, a journaled
// MetaStore captures exactly the changes of the operations it commits, a
// replay of its records rebuilds the same databases, and a journal write
// that fails fails the commit as a failed LMDB commit does.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "common/little_endian.h"
#include "meta/journal.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;

// Records kept in memory; write fails with fail_errno while it is set.
struct MemoryJournal : MetaJournal {
    std::vector<std::string> records;
    int fail_errno = 0;
    Status write(std::uint64_t seq, std::string_view record) override {
        if (fail_errno != 0) return Status::error(fail_errno, "journal write refused");
        CHECK(seq == records.size() + 1);
        records.emplace_back(record);
        return Status::ok();
    }
};

// Every record of every database, for comparing two environments.
std::map<std::pair<int, std::string>, std::string> dump(MetaStore& m) {
    std::map<std::pair<int, std::string>, std::string> out;
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin_read(&t).is_ok());
    for (int db = 0; db < static_cast<int>(Db::kCount); ++db) {
        Cursor c = t->cursor(static_cast<Db>(db));
        for (bool ok = c.first(); ok; ok = c.next()) out[{db, std::string(c.key())}] = std::string(c.value());
    }
    return out;
}

void put(MetaStore& m, Db db, const std::string& key, const std::string& value) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    REQUIRE(t->put(db, key, value).is_ok());
    REQUIRE(t->commit().is_ok());
}

}  // namespace

TEST_CASE("journal records decode as encoded, and a torn or damaged tail ends them", "[meta][journal]") {
    std::string ops;
    journal_put(&ops, Db::kInodes, key_u64(7), "seven");
    journal_del(&ops, Db::kChunks, key_u64(3));
    journal_put(&ops, Db::kXattrs, "k", std::string(1000, 'x'));
    std::string data;
    std::vector<std::size_t> ends;
    for (std::uint64_t seq = 1; seq <= 3; ++seq) {
        data += encode_journal_record(seq, "super" + std::to_string(seq), seq == 2 ? "" : ops);
        ends.push_back(data.size());
    }
    std::vector<JournalRecord> recs;
    std::size_t end = 0;
    decode_journal(data, &recs, &end);
    REQUIRE(recs.size() == 3);
    CHECK(end == data.size());
    CHECK(recs[1].seq == 2);
    CHECK(recs[1].super == "super2");
    CHECK(recs[1].ops.empty());
    std::vector<JournalOp> seen;
    REQUIRE(for_each_journal_op(recs[0].ops, [&](const JournalOp& op) {
        seen.push_back(op);
        return true;
    }));
    REQUIRE(seen.size() == 3);
    CHECK((seen[0].put && seen[0].db == Db::kInodes && seen[0].key == key_u64(7) && seen[0].value == "seven"));
    CHECK((!seen[1].put && seen[1].db == Db::kChunks && seen[1].key == key_u64(3)));
    CHECK(seen[2].value.size() == 1000);

    // Cut at every length: exactly the whole records before the cut.
    for (std::size_t cut = 0; cut <= data.size(); ++cut) {
        recs.clear();
        decode_journal(std::string_view(data).substr(0, cut), &recs, &end);
        std::size_t whole = 0;
        while (whole < ends.size() && ends[whole] <= cut) ++whole;
        INFO("cut at " << cut);
        REQUIRE(recs.size() == whole);
        CHECK(end == (whole == 0 ? 0 : ends[whole - 1]));
    }
    // A flipped byte anywhere in the last record: the first two stand.
    for (std::size_t at = ends[1]; at < ends[2]; at += 7) {
        std::string bad = data;
        bad[at] = static_cast<char>(bad[at] ^ 0x40);
        recs.clear();
        decode_journal(bad, &recs, &end);
        INFO("flipped byte " << at);
        CHECK(recs.size() == 2);
        CHECK(end == ends[1]);
    }
    // Ops that do not parse are refused.
    CHECK_FALSE(for_each_journal_op(ops.substr(0, ops.size() - 1), [](const JournalOp&) { return true; }));
}

TEST_CASE("a group's ops are journaled with each key's last change only", "[meta][journal]") {
    std::string ops;
    journal_put(&ops, Db::kChunks, key_u64(1), "block v1");
    journal_put(&ops, Db::kInodes, key_u64(1), "inode");
    journal_put(&ops, Db::kChunks, key_u64(1), "block v2");
    journal_del(&ops, Db::kInodes, key_u64(1));
    journal_put(&ops, Db::kXattrs, key_u64(1), "same key, another database");
    journal_put(&ops, Db::kChunks, key_u64(1), "block v3");
    std::vector<std::string> seen;
    REQUIRE(for_each_journal_op(coalesce_journal_ops(ops), [&](const JournalOp& op) {
        seen.push_back(std::to_string(int(op.db)) + (op.put ? " put " : " del ") + std::string(op.value));
        return true;
    }));
    const std::vector<std::string> want = {std::to_string(int(Db::kInodes)) + " del ",
                                           std::to_string(int(Db::kXattrs)) + " put same key, another database",
                                           std::to_string(int(Db::kChunks)) + " put block v3"};
    CHECK(seen == want);
    // Nothing repeated: the same bytes.
    std::string once;
    journal_put(&once, Db::kChunks, key_u64(1), "a");
    journal_del(&once, Db::kChunks, key_u64(2));
    CHECK(coalesce_journal_ops(once) == once);
}

TEST_CASE("a journaled store captures its committed changes, and replaying them rebuilds it",
          "[meta][journal]") {
    TempDir src, copy;
    MemoryJournal journal;
    auto m = open_meta(src.meta());
    m->set_journal(&journal);
    put(*m, Db::kInodes, key_u64(1), "root");
    put(*m, Db::kChunks, key_u64(9), "chunk");
    {
        // An operation that aborts: none of its changes reach the journal.
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(2), "dropped").is_ok());
        REQUIRE(t->del(Db::kChunks, key_u64(9)).is_ok());
    }
    REQUIRE(m->commit_group(nullptr).is_ok());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->del(Db::kChunks, key_u64(9)).is_ok());
        REQUIRE(t->del(Db::kChunks, key_u64(12345)).is_ok());  // absent: nothing to journal
        t->super().next_ino = 42;
        REQUIRE(t->commit().is_ok());
    }
    put(*m, Db::kXattrs, key_u64_str(1, "user.a"), "v0");
    put(*m, Db::kXattrs, key_u64_str(1, "user.a"), "v");  // journaled once, as "v"
    REQUIRE(m->commit_group(nullptr).is_ok());
    REQUIRE(journal.records.size() == 2);
    CHECK(m->committed_journal_seq() == 2);

    std::vector<JournalRecord> recs;
    std::size_t end = 0;
    decode_journal(journal.records[0], &recs, &end);
    REQUIRE(recs.size() == 1);
    int ops = 0;
    REQUIRE(for_each_journal_op(recs[0].ops, [&](const JournalOp& op) {
        CHECK(op.put);
        CHECK(op.value != "dropped");
        ++ops;
        return true;
    }));
    CHECK(ops == 2);
    recs.clear();
    decode_journal(journal.records[1], &recs, &end);
    REQUIRE(recs.size() == 1);
    std::vector<std::string> values;
    REQUIRE(for_each_journal_op(recs[0].ops, [&](const JournalOp& op) {
        values.emplace_back(op.value);
        return true;
    }));
    CHECK(values == std::vector<std::string>{"", "v"});  // the delete, the xattr's last value

    auto r = open_meta(copy.meta());
    for (const std::string& rec : journal.records) {
        recs.clear();
        decode_journal(rec, &recs, &end);
        REQUIRE(recs.size() == 1);
        REQUIRE(r->replay(recs[0]).is_ok());
    }
    CHECK(dump(*r) == dump(*m));
    CHECK(r->super_snapshot().next_ino == 42);
    CHECK(r->committed_journal_seq() == 2);
    // Out of order: refused.
    CHECK_FALSE(r->replay(recs[0]).is_ok());

    // A snapshot is the committed state, with its seq.
    const std::string snap = src.meta() + "/../snap.mdb";
    std::uint64_t seq = 0;
    put(*m, Db::kInodes, key_u64(3), "uncommitted");
    REQUIRE(m->snapshot(snap, &seq).is_ok());
    CHECK(seq == 2);
}

TEST_CASE("a journal write that fails fails the commit; the group stays open and goes with the next",
          "[meta][journal]") {
    TempDir dir, copy;
    MemoryJournal journal;
    {
        auto m = open_meta(dir.meta());
        m->set_journal(&journal);
        put(*m, Db::kInodes, key_u64(1), "acknowledged");
        REQUIRE(m->commit_group(nullptr).is_ok());
        put(*m, Db::kInodes, key_u64(2), "retried");
        journal.fail_errno = ETIMEDOUT;
        Status st = m->commit_group(nullptr);
        CHECK(st.err() == EIO);
        CHECK(st.message().find("journal") != std::string::npos);
        CHECK(m->committed_journal_seq() == 1);
        // Still running: the group takes more, and commits under seq 2.
        put(*m, Db::kInodes, key_u64(3), "later");
        journal.fail_errno = 0;
        REQUIRE(m->commit_group(nullptr).is_ok());
        CHECK(m->committed_journal_seq() == 2);
        REQUIRE(journal.records.size() == 2);
    }
    auto m = open_meta(dir.meta());
    auto all = dump(*m);
    CHECK(all.count({static_cast<int>(Db::kInodes), key_u64(1)}) == 1);
    CHECK(all.count({static_cast<int>(Db::kInodes), key_u64(2)}) == 1);
    CHECK(all.count({static_cast<int>(Db::kInodes), key_u64(3)}) == 1);
    CHECK(m->committed_journal_seq() == 2);
    // The journal alone makes the same state.
    auto r = open_meta(copy.meta());
    for (const std::string& rec : journal.records) {
        std::vector<JournalRecord> recs;
        std::size_t end = 0;
        decode_journal(rec, &recs, &end);
        REQUIRE(recs.size() == 1);
        REQUIRE(r->replay(recs[0]).is_ok());
    }
    CHECK(dump(*r) == all);
}

TEST_CASE("a store without a journal writes no journal seq into its super record", "[meta][journal]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    put(*m, Db::kInodes, key_u64(1), "x");
    REQUIRE(m->commit_group(nullptr).is_ok());
    std::string_view v;
    bool found = false;
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    REQUIRE(t->get(Db::kSuper, "state", &v, &found).is_ok());
    REQUIRE(found);
    // 12 counters, next ids, the frontier, journal seq 0, content_bytes.
    REQUIRE(v.size() == 19 * 8);
    CHECK(get_le64(v.data() + 17 * 8) == 0);
    t.reset();
    CHECK(m->committed_journal_seq() == 0);
}

// The fsync log's records (engine/fsync_log.h) come from prepare_log(); the
// engine appends each to the segment stream and then calls logged().
TEST_CASE("fsync log records follow each other once logged; one made again under its seq replays over it",
          "[meta][journal][log]") {
    TempDir dir, copy;
    auto decode_one = [](const std::string& bytes) {
        std::vector<JournalRecord> recs;
        std::size_t end = 0;
        decode_journal(bytes, &recs, &end);
        REQUIRE(recs.size() == 1);
        return recs[0];
    };
    auto no_frontier = [](SuperState*) { return Status::ok(); };
    std::string first, again, next;
    {
        auto m = open_meta(dir.meta());
        m->set_logging(true);
        LogMark mark;
        bool commit_instead = false;
        put(*m, Db::kInodes, key_u64(1), "one");
        REQUIRE(m->prepare_log(no_frontier, &first, &mark, &commit_instead).is_ok());
        REQUIRE_FALSE(commit_instead);
        // Not logged (its append failed): the next record takes the same
        // seq and holds both changes.
        put(*m, Db::kInodes, key_u64(2), "two");
        REQUIRE(m->prepare_log(no_frontier, &again, &mark, &commit_instead).is_ok());
        CHECK(decode_one(again).seq == decode_one(first).seq);
        m->logged(mark);
        put(*m, Db::kInodes, key_u64(3), "three");
        REQUIRE(m->prepare_log(no_frontier, &next, &mark, &commit_instead).is_ok());
        CHECK(decode_one(next).seq == decode_one(first).seq + 1);
        int ops = 0;
        REQUIRE(for_each_journal_op(decode_one(next).ops, [&](const JournalOp& op) {
            CHECK(op.key == key_u64(3));
            ++ops;
            return true;
        }));
        CHECK(ops == 1);  // what the logged record held is not repeated
    }
    auto r = open_meta(copy.meta());
    r->set_logging(true);
    for (const std::string* rec : {&first, &again, &next}) REQUIRE(r->replay(decode_one(*rec)).is_ok());
    auto all = dump(*r);
    for (std::uint64_t k : {1, 2, 3}) CHECK(all.count({static_cast<int>(Db::kInodes), key_u64(k)}) == 1);
    // One already applied, out of order, is refused.
    CHECK_FALSE(r->replay(decode_one(first)).is_ok());
}
