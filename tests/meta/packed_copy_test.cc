// The packed copy of the metadata (meta/packed_copy.h), as the store's
// snapshot and compaction make it: every record of every database, the
// committed state only, in fewer pages than the store's own file.
#include "meta/packed_copy.h"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <lmdb.h>

#include <map>
#include <random>
#include <string>
#include <utility>

#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;
// Database name -> key -> value.
using Records = std::map<std::string, std::map<std::string, std::string>>;

// Every record of the environment at `path` (a directory, or a single file),
// read with LMDB itself.
Records packed_copy_records(const std::string& path, bool single_file) {
    MDB_env* env = nullptr;
    REQUIRE(mdb_env_create(&env) == 0);
    mdb_env_set_maxdbs(env, 16);
    REQUIRE(mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOLOCK | (single_file ? MDB_NOSUBDIR : 0u), 0600) ==
            0);
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0);
    Records out;
    for (const char* name : {"super", "inodes", "dirents", "extents", "chunks", "fingerprints", "dirty", "xattrs",
                             "orphans", "segments", "history"}) {
        MDB_dbi dbi = 0;
        REQUIRE(mdb_dbi_open(txn, name, 0, &dbi) == 0);
        MDB_cursor* c = nullptr;
        REQUIRE(mdb_cursor_open(txn, dbi, &c) == 0);
        MDB_val k{}, v{};
        auto& db = out[name];
        for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
            db.emplace(std::string(static_cast<const char*>(k.mv_data), k.mv_size),
                       std::string(static_cast<const char*>(v.mv_data), v.mv_size));
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return out;
}

std::uint64_t packed_copy_file_bytes(const std::string& file) {
    struct stat st {};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_size);
}

// Random keys in three databases, then most of one deleted: pages left part
// full and free, as a running store leaves them.
void packed_copy_fill(MetaStore& m) {
    std::mt19937_64 rng(5);
    for (int op = 0; op < 40; ++op) {
        std::unique_ptr<Txn> t;
        REQUIRE(m.begin(&t).is_ok());
        for (int i = 0; i < 250; ++i) {
            REQUIRE(t->put(Db::kChunks, key_u64(rng()), std::string(60, 'c')).is_ok());
            REQUIRE(t->put(Db::kInodes, key_u64(rng() % 100000), std::string(40, 'i')).is_ok());
        }
        REQUIRE(t->put(Db::kXattrs, key_u64(static_cast<std::uint64_t>(op)), "x").is_ok());
        REQUIRE(t->commit().is_ok());
    }
    REQUIRE(m.commit_group(nullptr).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    std::vector<std::string> doomed;
    {
        Cursor c = t->cursor(Db::kChunks);
        int n = 0;
        for (bool ok = c.first(); ok; ok = c.next())
            if (++n % 8 != 0) doomed.emplace_back(c.key());
    }
    for (const std::string& k : doomed) REQUIRE(t->del(Db::kChunks, k).is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m.commit_group(nullptr).is_ok());
}

}  // namespace

TEST_CASE("a snapshot is a packed copy of every committed record, without the open group",
          "[meta][packed-copy]") {
    TempDir dir;
    const std::string snap = dir.meta() + ".snap";
    Records committed;
    {
        auto m = open_meta(dir.meta());
        packed_copy_fill(*m);
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, "uncommitted", "in the open group").is_ok());
        REQUIRE(t->commit().is_ok());
        t.reset();
        std::uint64_t seq = 1;
        REQUIRE(m->snapshot(snap, &seq).is_ok());
        CHECK(seq == 0);  // no journal: the committed state's seq
    }
    // The store closed without committing the group: its file is the committed state.
    committed = packed_copy_records(dir.meta(), false);
    CHECK(committed["inodes"].count("uncommitted") == 0);
    CHECK(committed["chunks"].size() > 1000);
    CHECK(committed["xattrs"].size() == 40);
    CHECK(packed_copy_records(snap, true) == committed);
    CHECK(packed_copy_file_bytes(snap) < packed_copy_file_bytes(dir.meta() + "/data.mdb"));
}

TEST_CASE("compaction puts the packed copy in place of the file, only if it is small enough",
          "[meta][packed-copy]") {
    TempDir dir;
    {
        auto m = open_meta(dir.meta());
        packed_copy_fill(*m);
    }
    const Records records = packed_copy_records(dir.meta(), false);
    const std::uint64_t size = packed_copy_file_bytes(dir.meta() + "/data.mdb");
    std::uint64_t before = 0, after = 0;
    {
        // Not worth it below this ratio: the file stays, the store stays open.
        auto m = open_meta(dir.meta());
        REQUIRE(m->compact(0.01, &before, &after).is_ok());
        CHECK(before == size);
        CHECK(after == size);
        std::unique_ptr<Txn> t;
        CHECK(m->begin(&t).is_ok());
    }
    CHECK(packed_copy_file_bytes(dir.meta() + "/data.mdb") == size);
    {
        auto m = open_meta(dir.meta());
        REQUIRE(m->compact(1.0, &before, &after).is_ok());
        CHECK(after < before);
        std::unique_ptr<Txn> t;
        CHECK_FALSE(m->begin(&t).is_ok());  // closed
    }
    CHECK(packed_copy_file_bytes(dir.meta() + "/data.mdb") == after);
    CHECK(packed_copy_records(dir.meta(), false) == records);
    auto m = open_meta(dir.meta());
    CHECK(m->had_super());
}
