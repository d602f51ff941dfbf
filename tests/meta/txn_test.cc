// Txn: an operation's changes go straight into the open group with an undo
// log, so one that is not committed, or whose change LMDB refused, is put
// back alone; one that leaves LMDB's transaction unusable stops the store.
#include "meta/txn.h"

#include <catch2/catch.hpp>

#include <cerrno>
#include <map>
#include <random>
#include <string>

#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::has;
using test::open_meta;

}  // namespace

TEST_CASE("an operation that is not committed rolls back alone", "[meta][txn]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kChunks, key_u64(1), "kept").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();  // a Txn holds the store's lock until it is destroyed
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kChunks, key_u64(2), "dropped").is_ok());
    REQUIRE(t->del(Db::kChunks, key_u64(1)).is_ok());
    t->super().counters.stored_bytes = 12345;
    t.reset();  // aborted
    CHECK(has(*m, Db::kChunks, key_u64(1)));
    CHECK_FALSE(has(*m, Db::kChunks, key_u64(2)));
    REQUIRE(m->begin(&t).is_ok());
    CHECK(t->super().counters.stored_bytes == 0);
    t.reset();
}

// An operation changes the open group directly and keeps what each change
// overwrote: aborting puts it all back, newest first, whatever the mix of
// puts, overwrites and deletes of the same keys, beside operations of the
// same group that committed. Checked against a model, across group commits
// and a reopen.
TEST_CASE("operations aborted at random among committed ones leave exactly the committed changes", "[meta][txn]") {
    TempDir dir;
    std::map<std::string, std::string> model;  // what the store must hold
    std::mt19937_64 rng(77);
    auto key = [&] { return key_u64(rng() % 40); };
    auto check_model = [&](MetaStore& m) {
        std::unique_ptr<Txn> t;
        REQUIRE(m.begin_read(&t).is_ok());
        std::map<std::string, std::string> seen;
        Cursor c = t->cursor(Db::kInodes);
        for (bool ok = c.first(); ok; ok = c.next()) seen.emplace(std::string(c.key()), std::string(c.value()));
        REQUIRE(c.status().is_ok());
        CHECK(seen == model);
    };
    {
        auto m = open_meta(dir.meta());
        for (int op = 0; op < 2000; ++op) {
            std::map<std::string, std::string> mine = model;
            std::unique_ptr<Txn> t;
            REQUIRE(m->begin(&t).is_ok());
            const int changes = 1 + static_cast<int>(rng() % 8);
            for (int i = 0; i < changes; ++i) {
                const std::string k = key();
                if (rng() % 3 == 0) {
                    bool existed = true;
                    REQUIRE(t->del(Db::kInodes, k, &existed).is_ok());
                    CHECK(existed == (mine.erase(k) == 1));
                } else {
                    const std::string v(1 + rng() % 300, static_cast<char>('a' + rng() % 26));
                    REQUIRE(t->put(Db::kInodes, k, v).is_ok());
                    mine[k] = v;
                }
                // The operation reads its own changes.
                std::string_view got;
                bool found = false;
                REQUIRE(t->get(Db::kInodes, k, &got, &found).is_ok());
                CHECK(found == (mine.count(k) == 1));
                if (found) CHECK(std::string(got) == mine[k]);
            }
            if (rng() % 2 == 0) {
                REQUIRE(t->commit().is_ok());
                model = std::move(mine);
            }
            t.reset();
            if (rng() % 100 == 0) REQUIRE(m->commit_group(nullptr).is_ok());
            if (op % 250 == 0) check_model(*m);
        }
        check_model(*m);
        REQUIRE(m->commit_group(nullptr).is_ok());
    }
    auto m = open_meta(dir.meta());
    check_model(*m);
}

// LMDB refuses some changes before touching anything (a key longer than it
// allows): the operation goes on, and commits the rest.
TEST_CASE("a change LMDB refuses without harm leaves the operation and the group usable", "[meta][txn]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kInodes, key_u64(1), "one").is_ok());
    CHECK_FALSE(t->put(Db::kInodes, std::string(600, 'k'), "too long a key").is_ok());
    REQUIRE(t->put(Db::kInodes, key_u64(2), "two").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->commit_group(nullptr).is_ok());
    CHECK(has(*m, Db::kInodes, key_u64(1)));
    CHECK(has(*m, Db::kInodes, key_u64(2)));
}

// A full map (or a damaged page, or no memory) leaves LMDB's transaction
// unusable: the group cannot be committed nor the operation undone, so the
// group is lost and the store stops, as after a failed commit; what was
// committed before is intact.
TEST_CASE("a change that leaves the group unusable (the map full) stops the store; committed data is intact",
          "[meta][txn]") {
    TempDir dir;
    {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir.meta(), 1ull << 20, false, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(1), "committed").is_ok());
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->commit_group(nullptr).is_ok());
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(2), "acknowledged, not committed").is_ok());
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->begin(&t).is_ok());
        Status st;
        for (std::uint64_t k = 100; st.is_ok() && k < 10000; ++k) st = t->put(Db::kInodes, key_u64(k), std::string(1000, 'x'));
        INFO(st.to_string());
        CHECK(st.err() == ENOSPC);
        CHECK_FALSE(t->commit().is_ok());
        t.reset();
        Status after = m->begin(&t);
        INFO(after.to_string());
        CHECK(after.err() == EIO);
        CHECK(after.message().find("operations of the last interval are lost") != std::string::npos);
        CHECK(m->commit_group(nullptr).err() == EIO);
    }
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 20, false, &m).is_ok());
    std::string v;
    CHECK(has(*m, Db::kInodes, key_u64(1), &v));
    CHECK(v == "committed");
    CHECK_FALSE(has(*m, Db::kInodes, key_u64(2)));
}

