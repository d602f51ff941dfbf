// MetaStore: group commit durability, per-operation rollback, key encoding.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "meta/meta_store.h"
#include "meta/records.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::has;
using test::open_meta;

}  // namespace

TEST_CASE("keys sort numerically", "[meta]") {
    CHECK(key_u64(1) < key_u64(256));
    CHECK(key_u64_u64(1, 0xffffffff) < key_u64_u64(2, 0));
    CHECK(key_u64_str(7, "b") > key_u64_str(7, "a"));
    std::uint64_t v = 0;
    CHECK((parse_key_u64(key_u64(0x0123456789abcdefull), &v) && v == 0x0123456789abcdefull));
}

TEST_CASE("operations are visible at once and durable after commit_group", "[meta]") {
    TempDir dir;
    {
        auto m = open_meta(dir.meta());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(5), "five").is_ok());
        t->super().next_ino = 77;
        REQUIRE(t->commit().is_ok());
        t.reset();
        CHECK(has(*m, Db::kInodes, key_u64(5)));
        CHECK(m->pending_ops() == 1);
        REQUIRE(m->commit_group(nullptr).is_ok());
        CHECK(m->pending_ops() == 0);

        // Folded in but never group-committed: lost, as in a crash.
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(6), "six").is_ok());
        t->super().next_ino = 99;
        REQUIRE(t->commit().is_ok());
    }
    auto m = open_meta(dir.meta());
    std::string v;
    CHECK(has(*m, Db::kInodes, key_u64(5), &v));
    CHECK(v == "five");
    CHECK_FALSE(has(*m, Db::kInodes, key_u64(6)));
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    CHECK(t->super().next_ino == 77);
    t.reset();
}

// The super record is the last thing a group commit puts into the group:
// with the map full just so, that put is what fails. The group is lost then
// as after a failed mdb_txn_commit, and the store stops; it is never left
// open with LMDB's transaction in error.
TEST_CASE("a group whose super record does not fit stops the store, as a failed commit does",
          "[meta]") {
    bool super_failed = false;
    for (int ops = 1; ops <= 400 && !super_failed; ++ops) {
        INFO("operations in the group: " << ops);
        TempDir dir;
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir.meta(), 128 * 1024, false, &m).is_ok());
        Status st;
        for (int i = 0; i < ops && st.is_ok(); ++i) {
            std::unique_ptr<Txn> t;
            REQUIRE(m->begin(&t).is_ok());
            st =
                t->put(Db::kInodes, key_u64(static_cast<std::uint64_t>(i)), std::string(1900, 'x'));
            if (st) st = t->commit();
        }
        if (!st) break;  // the map filled inside an operation: the test above
        st = m->commit_group(nullptr);
        if (st) continue;
        INFO(st.to_string());
        super_failed = st.message().find("super record") != std::string::npos;
        // Whatever step failed, the store has stopped: nothing goes on in
        // LMDB's errored transaction.
        Status failed = m->failure();
        INFO(failed.to_string());
        CHECK(failed.err() == EIO);
        CHECK(failed.message().find("operations of the last interval are lost") !=
              std::string::npos);
        {
            std::unique_ptr<Txn> t;
            CHECK(m->begin(&t).err() == EIO);
        }  // a Txn begun holds the store's lock
        CHECK(m->commit_group(nullptr).err() == EIO);
    }
    CHECK(super_failed);
}

TEST_CASE("a read-only operation sees the open group, or the committed state, and cannot write", "[meta]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    // No group open yet: it reads the committed state, and opens no group
    // (which would cost a commit).
    REQUIRE(m->begin_read(&t).is_ok());
    std::string_view v;
    bool found = true;
    REQUIRE(t->get(Db::kChunks, key_u64(1), &v, &found).is_ok());
    CHECK_FALSE(found);
    CHECK(t->put(Db::kChunks, key_u64(1), "x").err() == EINVAL);
    CHECK(t->del(Db::kChunks, key_u64(1)).err() == EINVAL);
    REQUIRE(t->commit().is_ok());
    t.reset();
    CHECK(m->pending_ops() == 0);
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kChunks, key_u64(1), "committed").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->commit_group(nullptr).is_ok());
    REQUIRE(m->begin_read(&t).is_ok());
    REQUIRE(t->get(Db::kChunks, key_u64(1), &v, &found).is_ok());
    CHECK((found && v == "committed"));
    t.reset();
    // An operation folded into the open group is seen at once.
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kChunks, key_u64(1), "pending").is_ok());
    REQUIRE(t->put(Db::kChunks, key_u64(2), "new").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->begin_read(&t).is_ok());
    REQUIRE(t->get(Db::kChunks, key_u64(1), &v, &found).is_ok());
    CHECK((found && v == "pending"));
    {
        // A cursor lives inside its operation: the group's commit closes it.
        Cursor c = t->cursor(Db::kChunks);
        int n = 0;
        for (bool ok = c.first(); ok; ok = c.next()) ++n;
        CHECK(n == 2);
    }
    CHECK(t->put(Db::kChunks, key_u64(3), "x").err() == EINVAL);
    t.reset();
    CHECK(m->pending_ops() == 1);  // reads added nothing to the group
    REQUIRE(m->commit_group(nullptr).is_ok());
    // A read-only store reads the same way.
    m.reset();
    m = open_meta(dir.meta(), true);
    REQUIRE(m->begin_read(&t).is_ok());
    REQUIRE(t->get(Db::kChunks, key_u64(2), &v, &found).is_ok());
    CHECK((found && v == "new"));
    t.reset();
}

TEST_CASE("commit_group runs the data sync first and keeps the group if it fails", "[meta]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(Db::kExtents, key_u64_u64(1, 0), "e").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    Status st = m->commit_group([](SuperState*) { return Status::error(EIO, "segment sync failed"); });
    CHECK(st.err() == EIO);
    CHECK(has(*m, Db::kExtents, key_u64_u64(1, 0)));  // still pending, not lost
    bool ran = false;
    REQUIRE(m->commit_group([&](SuperState*) {
                 ran = true;
                 return Status::ok();
             }).is_ok());
    CHECK(ran);
}

TEST_CASE("a read-only store refuses writes", "[meta]") {
    TempDir dir;
    { auto m = open_meta(dir.meta()); }
    auto m = open_meta(dir.meta(), true);
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    CHECK(t->put(Db::kInodes, key_u64(1), "x").err() == EROFS);
}

// The open checks data.mdb before LMDB maps it (meta/lmdb_file_check.h):
// a page overwritten in the middle of a tree is refused when the check
// reads that tree whole, and passes with a budget that reads only its ends.
TEST_CASE("an open refuses a damaged page of a tree it reads whole, and opens an intact store with any budget",
          "[meta]") {
    TempDir dir;
    {
        auto m = open_meta(dir.meta());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        for (std::uint64_t i = 0; i < 20000; ++i)
            REQUIRE(t->put(Db::kChunks, key_u64(i), std::string(48, 'c')).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(1), "i").is_ok());
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->commit_group(nullptr).is_ok());
    }
    auto open_with = [&dir](std::uint64_t check_bytes) {
        MetaStoreOptions o;
        o.map_bytes = 1ull << 30;
        o.read_only = true;
        o.create = false;
        o.check_bytes = check_bytes;
        std::unique_ptr<MetaStore> m;
        return MetaStore::open(dir.meta(), o, &m);
    };
    CHECK(open_with(MetaStoreOptions::kCheckBytes).is_ok());
    CHECK(open_with(0).is_ok());
    // Overwrite a page in the middle of the chunks' tree.
    const std::string data = dir.meta() + "/data.mdb";
    const long page = ::sysconf(_SC_PAGESIZE);
    struct stat st {};
    REQUIRE(::stat(data.c_str(), &st) == 0);
    const off_t middle = (st.st_size / page / 2) * page;
    int fd = ::open(data.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    std::string junk(static_cast<std::size_t>(page), '\x5a');
    REQUIRE(::pwrite(fd, junk.data(), junk.size(), middle) == page);
    ::close(fd);
    Status full = open_with(MetaStoreOptions::kCheckBytes);
    INFO(full.to_string());
    CHECK(full.err() == EUCLEAN);
    CHECK(full.message().find("(chunks)") != std::string::npos);
    CHECK(open_with(0).is_ok());  // the ends of the tree are intact
}
