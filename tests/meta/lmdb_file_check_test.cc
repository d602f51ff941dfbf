// check_lmdb_file: LMDB's own files pass it, whatever was done to them, and
// a page of other bytes in any page the state uses, or a file cut short, is
// refused with one line.
#include "meta/lmdb_file_check.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;

// An LMDB environment driven through LMDB's API alone, as a reference that
// owes nothing to MetaStore: named databases, random puts and deletes of
// values small and large (past one page), in transactions of random size.
class RawEnv {
public:
    explicit RawEnv(const std::string& dir) {
        std::filesystem::create_directories(dir);
        REQUIRE(mdb_env_create(&env_) == 0);
        REQUIRE(mdb_env_set_maxdbs(env_, 8) == 0);
        REQUIRE(mdb_env_set_mapsize(env_, 1ull << 30) == 0);
        REQUIRE(mdb_env_open(env_, dir.c_str(), MDB_NOLOCK, 0600) == 0);
    }
    ~RawEnv() { mdb_env_close(env_); }
    RawEnv(const RawEnv&) = delete;
    RawEnv& operator=(const RawEnv&) = delete;

    // One transaction of `ops` random changes over databases db0..db3.
    void churn(std::mt19937_64& rng, int ops) {
        MDB_txn* txn = nullptr;
        REQUIRE(mdb_txn_begin(env_, nullptr, 0, &txn) == 0);
        MDB_dbi dbi[4];
        for (int d = 0; d < 4; ++d)
            REQUIRE(mdb_dbi_open(txn, ("db" + std::to_string(d)).c_str(), MDB_CREATE, &dbi[d]) ==
                    0);
        for (int i = 0; i < ops; ++i) {
            const auto d = rng() % 4;
            const std::string key = "k" + std::to_string(rng() % 3000);
            MDB_val k{key.size(), const_cast<char*>(key.data())};
            if (rng() % 3 == 0) {
                const int rc = mdb_del(txn, dbi[d], &k, nullptr);
                REQUIRE((rc == 0 || rc == MDB_NOTFOUND));
                continue;
            }
            const std::size_t sizes[] = {1, 40, 300, 1500, 2100, 5000, 13000};
            std::string value(sizes[rng() % std::size(sizes)], static_cast<char>('a' + rng() % 26));
            MDB_val v{value.size(), value.data()};
            REQUIRE(mdb_put(txn, dbi[d], &k, &v, 0) == 0);
        }
        REQUIRE(mdb_txn_commit(txn) == 0);
    }

    MDB_env* env() { return env_; }

private:
    MDB_env* env_ = nullptr;
};

// Pages LMDB counts as used, by its own statistics.
std::uint64_t lmdb_used_pages(MDB_env* env, const std::vector<std::string>& names) {
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0);
    std::uint64_t used = 2;
    MDB_stat st{};
    for (MDB_dbi core : {0u, 1u}) {
        REQUIRE(mdb_stat(txn, core, &st) == 0);
        used += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
    }
    for (const std::string& n : names) {
        MDB_dbi dbi = 0;
        if (mdb_dbi_open(txn, n.c_str(), 0, &dbi) != 0) continue;
        REQUIRE(mdb_stat(txn, dbi, &st) == 0);
        used += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
    }
    mdb_txn_abort(txn);
    return used;
}

void write_page(const std::string& file, std::uint64_t page, const std::string& bytes) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    CHECK(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(page * bytes.size())) ==
          static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

}  // namespace

TEST_CASE("LMDB's own files pass the check after every commit of random churn",
          "[meta][lmdb-check]") {
    TempDir dir;
    RawEnv env(dir.meta());
    std::mt19937_64 rng(GENERATE(1, 2, 3));
    const std::vector<std::string> names = {"db0", "db1", "db2", "db3"};
    std::uint64_t leaked_max = 0;
    for (int txn = 0; txn < 60; ++txn) {
        env.churn(rng, 1 + static_cast<int>(rng() % 400));
        LmdbFileSummary whole, ends;
        Status st = check_lmdb_file(dir.meta() + "/data.mdb", LmdbCheckOptions{}, &whole);
        INFO("after transaction " << txn << ": " << st.to_string());
        REQUIRE(st.is_ok());
        CHECK(whole.whole);
        CHECK(whole.used_pages == lmdb_used_pages(env.env(), names));
        leaked_max = std::max(leaked_max, whole.pages - whole.used_pages - whole.free_pages);
        LmdbCheckOptions tight;
        tight.walk_bytes = 0;  // the paths to the first and last records only
        REQUIRE(check_lmdb_file(dir.meta() + "/data.mdb", tight, &ends).is_ok());
        CHECK_FALSE(ends.whole);
    }
    // Every page LMDB's file holds is in a tree or on the free list.
    CHECK(leaked_max == 0);
}

// LMDB's file may end before the last page of its state when that page is
// free (mdb.c says so of mm_last_pg, and mdb_env_copy allows for it): the
// file without its free last pages passes and LMDB reads it whole; one page
// less than that is cut short.
TEST_CASE("a file may end before its last pages if they are free, and not before a page in use",
          "[meta][lmdb-check]") {
    TempDir dir;
    const std::string data = dir.meta() + "/data.mdb";
    std::mt19937_64 rng(11);
    std::set<std::uint64_t> used;
    LmdbFileSummary s;
    {
        RawEnv env(dir.meta());
        LmdbCheckOptions o;
        o.on_page = [&used](std::uint64_t page, std::string_view, LmdbPageKind) {
            used.insert(page);
        };
        for (int txn = 0; txn < 200; ++txn) {
            env.churn(rng, 200);
            used.clear();
            REQUIRE(check_lmdb_file(data, o, &s).is_ok());
            if (used.count(s.pages - 1) == 0) break;  // the last page is free
        }
    }
    REQUIRE(used.count(s.pages - 1) == 0);
    const std::uint64_t last_used = *used.rbegin();
    INFO("pages " << s.pages << ", the last in use " << last_used);
    REQUIRE(::truncate(data.c_str(), static_cast<off_t>((last_used + 1) * s.page_bytes)) == 0);
    Status st = check_lmdb_file(data, LmdbCheckOptions{}, &s);
    INFO(st.to_string());
    CHECK(st.is_ok());
    {
        RawEnv env(dir.meta());
        MDB_txn* txn = nullptr;
        REQUIRE(mdb_txn_begin(env.env(), nullptr, MDB_RDONLY, &txn) == 0);
        for (int d = 0; d < 4; ++d) {
            MDB_dbi dbi = 0;
            if (mdb_dbi_open(txn, ("db" + std::to_string(d)).c_str(), 0, &dbi) != 0) continue;
            MDB_cursor* c = nullptr;
            REQUIRE(mdb_cursor_open(txn, dbi, &c) == 0);
            MDB_val k{}, v{};
            int rc = 0;
            while ((rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
            }
            CHECK(rc == MDB_NOTFOUND);
            mdb_cursor_close(c);
        }
        mdb_txn_abort(txn);
    }
    REQUIRE(::truncate(data.c_str(), static_cast<off_t>(last_used * s.page_bytes)) == 0);
    st = check_lmdb_file(data, LmdbCheckOptions{}, &s);
    INFO(st.to_string());
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("cut short") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
}

// Every page in turn, as random bytes, zeros or ones: refused, in one line,
// exactly when the state uses it. The one blind spot: the bytes of a
// value's run past its first page have no structure to check.
TEST_CASE("every page the state uses, overwritten, is refused; a free one is not",
          "[meta][lmdb-check]") {
    TempDir dir;
    const std::string data = dir.meta() + "/data.mdb";
    {
        RawEnv env(dir.meta());
        std::mt19937_64 rng(5);
        for (int txn = 0; txn < 6; ++txn) env.churn(rng, 60);
    }
    std::map<std::uint64_t, LmdbPageKind> used;
    std::set<std::uint64_t> continued;  // past the first page of a run
    LmdbCheckOptions o;
    std::uint64_t last_run_page = 0;
    o.on_page = [&](std::uint64_t page, std::string_view, LmdbPageKind kind) {
        if (kind == LmdbPageKind::kOverflow && page == last_run_page + 1 &&
            used.count(last_run_page) != 0 && used[last_run_page] == LmdbPageKind::kOverflow)
            continued.insert(page);
        used[page] = kind;
        last_run_page = page;
    };
    LmdbFileSummary s;
    REQUIRE(check_lmdb_file(data, o, &s).is_ok());
    o.on_page = nullptr;
    INFO("pages " << s.pages << ", used " << s.used_pages << ", free " << s.free_pages);
    REQUIRE(s.free_pages > 0);
    REQUIRE_FALSE(continued.empty());
    const std::string pristine = [&] {
        std::ifstream in(data, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }();
    std::mt19937_64 rng(9);
    for (const char* fill : {"random", "zeros", "ones"}) {
        for (std::uint64_t page = 0; page < s.pages; ++page) {
            INFO(fill << " over page " << page);
            std::string bytes(s.page_bytes, '\0');
            for (char& c : bytes)
                c = fill[0] == 'r' ? static_cast<char>(rng()) : fill[0] == 'z' ? '\0' : '\xff';
            write_page(data, page, bytes);
            Status st = check_lmdb_file(data, LmdbCheckOptions{});
            INFO(st.to_string());
            write_page(data, page, pristine.substr(page * s.page_bytes, s.page_bytes));
            const bool in_use = used.count(page) != 0 && continued.count(page) == 0;
            if (in_use) {
                CHECK(st.err() == EUCLEAN);
                CHECK(st.message().find('\n') == std::string::npos);
            } else {
                CHECK(st.is_ok());
            }
        }
    }
}
