// RandomPages: the estimate of the pages a group dirties in the databases
// written at random places, alone and as MetaStore bounds a group by it
// (group_dirty_bytes, on_group_full).
#include "meta/random_pages.h"

#include <catch2/catch.hpp>
#include <malloc.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <random>
#include <string>

#include "meta/fingerprint_index.h"
#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

TEST_CASE("each leaf a write lands in counts once, with the splits of the writes and the branches above",
          "[meta][random-pages]") {
    MDB_stat st{};
    st.ms_psize = 4096;
    st.ms_leaf_pages = 128;
    st.ms_branch_pages = 3;
    st.ms_entries = 128 * 50;
    RandomPages p;
    p.reset(st, 40);
    CHECK(p.per_leaf == 50);  // from the tree's own entries per leaf
    CHECK(p.pages() == 0);
    const std::uint64_t leaf = ~std::uint64_t{0} / 128 + 1;  // the key space one leaf covers
    p.note(0);
    p.note(leaf - 1);  // the same first leaf
    CHECK(p.distinct == 1);
    CHECK(p.pages() == 1 + 0 + 1);
    for (std::uint64_t i = 0; i < 128; ++i) p.note(i * leaf + leaf / 2);
    CHECK(p.distinct == 128);
    CHECK(p.writes == 130);
    CHECK(p.pages() == 128 + 130 / 50 + 3);  // every branch page, no more
    // A new group starts from nothing.
    p.reset(st, 40);
    CHECK(p.pages() == 0);
    p.note(~std::uint64_t{0});  // the last leaf
    CHECK(p.distinct == 1);
    // A tree of a few pages: entries per leaf from the page and entry sizes.
    st.ms_leaf_pages = 2;
    st.ms_entries = 3;
    p.reset(st, 40, 16);
    CHECK(p.per_leaf == 4096 / 40);
}

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;

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
TEST_CASE("a group's dirty pages of the fingerprint index are estimated from where its keys fall", "[meta][random-pages]") {
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

TEST_CASE("a group that dirties group_dirty_bytes of index pages asks to be committed, once", "[meta][random-pages]") {
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
