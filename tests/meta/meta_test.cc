// MetaStore: group commit durability, per-operation rollback, key encoding.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <malloc.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "meta/fingerprint_index.h"
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

namespace {

// n entries of random prefixes added to the fingerprint index, as the
// engine adds them, in one operation (ids unique within the process).
void add_fingerprints(MetaStore& m, int n, std::mt19937_64* rng) {
    static ChunkId next_id = 1;
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    for (int i = 0; i < n; ++i) REQUIRE(add_fingerprint(*t, (*rng)(), next_id++).is_ok());
    REQUIRE(t->commit().is_ok());
}

void put_keys(MetaStore& m, Db db, int n, const std::function<std::string()>& key) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    for (int i = 0; i < n; ++i) REQUIRE(t->put(db, key(), "").is_ok());
    REQUIRE(t->commit().is_ok());
}

// A store whose fingerprint index holds `keys` random entries, committed and
// opened anew with `o` (a fresh environment: no dirty pages to reuse).
std::unique_ptr<MetaStore> fingerprint_index(const std::string& dir, int keys, std::mt19937_64* rng,
                                             MetaStoreOptions o) {
    {
        auto m = open_meta(dir);
        for (int done = 0; done < keys; done += 10000)
            add_fingerprints(*m, 10000, rng);
        REQUIRE(m->commit_group(nullptr).is_ok());
    }
    o.map_bytes = 1ull << 30;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir, o, &m).is_ok());
    return m;
}

// Bytes the process has allocated (glibc), where the sanitizers' allocators
// do not replace it; -1 where they do.
long long allocated_bytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return -1;
#else
    const struct mallinfo2 mi = ::mallinfo2();
    return static_cast<long long>(mi.uordblks + mi.hblkhd);
#endif
}

}  // namespace

// LMDB copies every page a group changes into memory it allocates (and keeps
// for reuse), and does not say how many: the estimate must follow the real
// count, or meta_dirty bounds nothing. A fresh environment has no pages to
// reuse, so what it allocates during a group is that group's dirty pages.
TEST_CASE("a group's dirty pages of the fingerprint index are estimated from where its keys fall", "[meta]") {
    TempDir dir;
    std::mt19937_64 rng(5);
    MetaStoreOptions o;
    o.group_dirty_bytes = 1ull << 40;  // estimated, never reached
    auto m = fingerprint_index(dir.meta(), 100000, &rng, o);
    CHECK(m->dirty_pages_estimate() == 0);  // no group open

    const long long before = allocated_bytes();
    add_fingerprints(*m, 300, &rng);
    const std::uint64_t few = m->dirty_pages_estimate();
    // 100 000 keys fill some 500-900 leaves: 300 random keys land in 200-300 of them.
    CHECK(few >= 150);
    CHECK(few <= 320);
    // The overlay reads see (meta_store.h) is a heap of its own.
    const long long after_few = allocated_bytes() - static_cast<long long>(m->overlay_bytes());
    // Sequential keys elsewhere (inodes) are not what it counts.
    std::uint64_t ino = 1000;
    put_keys(*m, Db::kInodes, 2000, [&] { return key_u64(ino++); });
    CHECK(m->dirty_pages_estimate() == few);
    // Many more writes than leaves: every leaf is dirty, once, and the new
    // ones their splits made.
    add_fingerprints(*m, 20000, &rng);
    const std::uint64_t all = m->dirty_pages_estimate();
    CHECK(all > 2 * few);
    CHECK(all < 1500);
    add_fingerprints(*m, 20000, &rng);
    const long long after_all = allocated_bytes() - static_cast<long long>(m->overlay_bytes());
    const std::uint64_t saturated = m->dirty_pages_estimate();
    CHECK(saturated >= all);
    CHECK(static_cast<double>(saturated) <= 1.3 * static_cast<double>(all));
    if (before >= 0) {
        const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
        const double real_few = static_cast<double>(after_few - before) / page;
        const double real_all = static_cast<double>(after_all - before) / page;
        INFO("estimated " << few << " and " << saturated << " pages; LMDB allocated " << real_few << " and " << real_all);
        CHECK(static_cast<double>(few) == Approx(real_few).epsilon(0.2));
        CHECK(static_cast<double>(saturated) == Approx(real_all).epsilon(0.2));
    }
    REQUIRE(m->commit_group(nullptr).is_ok());
    CHECK(m->dirty_pages_estimate() == 0);
}

TEST_CASE("a group that dirties group_dirty_bytes of index pages asks to be committed, once", "[meta]") {
    TempDir dir;
    std::mt19937_64 rng(9);
    int told = 0;
    MetaStoreOptions o;
    o.group_dirty_bytes = 64 * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    o.on_group_full = [&] { ++told; };
    auto m = fingerprint_index(dir.meta(), 50000, &rng, o);
    // Writes of sequential keys: few pages, no early commit (their copies
    // in the overlay take less than the bound).
    std::uint64_t ino = 1;
    for (int i = 0; i < 10; ++i) put_keys(*m, Db::kInodes, 100, [&] { return key_u64(ino++); });
    CHECK(told == 0);
    CHECK(m->overlay_bytes() < o.group_dirty_bytes);
    int writes = 0;
    while (told == 0 && writes < 1000) {
        add_fingerprints(*m, 1, &rng);
        ++writes;
    }
    CHECK(told == 1);
    CHECK(m->dirty_pages_estimate() >= 64);
    CHECK(writes >= 40);   // a leaf each at most, and the branch pages above
    CHECK(writes <= 100);  // some 400 leaves: few writes share one
    for (int i = 0; i < 100; ++i) add_fingerprints(*m, 1, &rng);
    CHECK(told == 1);
    REQUIRE(m->commit_group(nullptr).is_ok());
    for (int i = 0; i < 100; ++i) add_fingerprints(*m, 1, &rng);
    CHECK(told == 2);
    // The overlay that reads see counts too: many small records of few
    // pages fill the bound by their copies there.
    REQUIRE(m->commit_group(nullptr).is_ok());
    int puts = 0;
    while (told == 2 && puts < 20000) {
        put_keys(*m, Db::kInodes, 100, [&] { return key_u64(ino++); });
        puts += 100;
    }
    CHECK(told == 3);
    CHECK(m->overlay_bytes() >= o.group_dirty_bytes);
    CHECK(m->dirty_pages_estimate() < 64);
}
