// MetaStore: group commit durability, per-operation rollback, key encoding.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;

std::unique_ptr<MetaStore> open_meta(const std::string& dir, bool read_only = false) {
    std::unique_ptr<MetaStore> m;
    Status st = MetaStore::open(dir, 1ull << 30, read_only, &m);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    return m;
}

bool has(MetaStore& m, Db db, const std::string& key, std::string* value = nullptr) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    std::string_view v;
    bool found = false;
    REQUIRE(t->get(db, key, &v, &found).is_ok());
    if (found && value != nullptr) value->assign(v);
    return found;
}

}  // namespace

TEST_CASE("keys sort numerically", "[meta]") {
    CHECK(key_u64(1) < key_u64(256));
    CHECK(key_u64_u64(1, 0xffffffff) < key_u64_u64(2, 0));
    CHECK(key_u64_str(7, "b") > key_u64_str(7, "a"));
    CHECK(get_be64(key_u64(0x0123456789abcdefull)) == 0x0123456789abcdefull);
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

TEST_CASE("an operation that is not committed rolls back alone", "[meta]") {
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

TEST_CASE("cursors walk a key range in order", "[meta]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    for (std::uint64_t off : {4096u, 0u, 8192u}) REQUIRE(t->put(Db::kExtents, key_u64_u64(3, off), "x").is_ok());
    REQUIRE(t->put(Db::kExtents, key_u64_u64(4, 0), "y").is_ok());
    Cursor c = t->cursor(Db::kExtents);
    std::vector<std::uint64_t> offs;
    for (bool ok = c.seek(key_u64_u64(3, 1)); ok && get_be64(c.key()) == 3; ok = c.next())
        offs.push_back(get_be64(c.key(), 8));
    CHECK(offs == std::vector<std::uint64_t>{4096, 8192});
    REQUIRE(c.last());
    CHECK(get_be64(c.key()) == 4);
}

TEST_CASE("a read-only store refuses writes", "[meta]") {
    TempDir dir;
    { auto m = open_meta(dir.meta()); }
    auto m = open_meta(dir.meta(), true);
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    CHECK(t->put(Db::kInodes, key_u64(1), "x").err() == EROFS);
}

TEST_CASE("verify finds a damaged page, and passes an intact store with any budget", "[meta]") {
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
        CHECK(m->verify().is_ok());
        CHECK(m->verify(0).is_ok());
    }
    // Overwrite a page in the middle of the chunks' tree: the whole walk finds it.
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
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, true, &m).is_ok());
    Status full = m->verify();
    INFO(full.to_string());
    CHECK(full.err() == EUCLEAN);
    CHECK(full.message().find("chunks") != std::string::npos);
}
