// Pages that go bad under an open store (meta/lmdb_guard.h): LMDB's faults
// and assertions inside a guarded call come back as an error, the store
// stops with EIO, and nothing crashes; outside a guarded call a fault and
// an assertion still end the process as before (through ASan's or TSan's
// handler in a sanitizer build).
#include "meta/lmdb_guard.h"

#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "meta/lmdb_file_check.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;

constexpr std::size_t kPage = 4096;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

// Runs fn in a forked child (its stderr to a pipe) and returns how the child
// ended (waitpid's status) and what it wrote to stderr.
std::pair<int, std::string> in_child(const std::function<void()>& fn) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The test framework's own report of the signal goes to stdout.
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ::close(fds[0]);
        fn();
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string err;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return {status, err};
}

// The child died of `sig`, or, in a sanitizer build, its sanitizer
// reported the signal and ended it.
void check_died_of(const std::pair<int, std::string>& r, int sig) {
    INFO("status " << r.first << ", stderr: " << r.second.substr(0, 2000));
    const bool by_signal = WIFSIGNALED(r.first) && WTERMSIG(r.first) == sig;
    const bool by_sanitizer = kSanitizer && r.second.find("Sanitizer") != std::string::npos &&
                              !(WIFEXITED(r.first) && WEXITSTATUS(r.first) == 0);
    CHECK((by_signal || by_sanitizer));
}

void write_at(const std::string& file, std::uint64_t offset, const std::string& bytes) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
            static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

std::string read_at(const std::string& file, std::uint64_t offset, std::size_t n) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    std::string out(n, '\0');
    REQUIRE(::pread(fd, out.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n));
    ::close(fd);
    return out;
}

// The pages of data.mdb the state uses, by database and kind.
struct PageMap {
    std::map<std::string, std::vector<std::uint64_t>> branch, leaf;
    std::uint64_t pages = 0;
};

PageMap page_map(const std::string& data) {
    PageMap pm;
    LmdbCheckOptions o;
    o.on_page = [&pm](std::uint64_t page, std::string_view db, LmdbPageKind kind) {
        if (kind == LmdbPageKind::kBranch) pm.branch[std::string(db)].push_back(page);
        if (kind == LmdbPageKind::kLeaf) pm.leaf[std::string(db)].push_back(page);
    };
    LmdbFileSummary s;
    REQUIRE(check_lmdb_file(data, o, &s).is_ok());
    pm.pages = s.pages;
    return pm;
}

// Where in data.mdb the node for `key` lies, in a leaf page of `db`.
std::uint64_t node_offset(const std::string& data, const std::string& db, const std::string& key) {
    const PageMap pm = page_map(data);
    for (std::uint64_t page : pm.leaf.at(db)) {
        INFO("leaf page " << page << " of " << pm.pages << ", file "
                          << std::filesystem::file_size(data));
        const std::string p = read_at(data, page * kPage, kPage);
        std::uint16_t lower = 0;
        std::memcpy(&lower, p.data() + 12, 2);
        for (std::size_t i = 0; i < (lower - 16u) / 2; ++i) {
            std::uint16_t at = 0, ksize = 0;
            std::memcpy(&at, p.data() + 16 + 2 * i, 2);
            std::memcpy(&ksize, p.data() + at + 6, 2);
            if (p.compare(at + 8, ksize, key) == 0 && ksize == key.size()) return page * kPage + at;
        }
    }
    FAIL("no node for the key in " << db);
    return 0;
}

// A store of 3000 inode records (a branch page over several leaves) and a
// few of every other database the tests read.
void fill(MetaStore& m) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    for (std::uint64_t i = 0; i < 3000; ++i)
        REQUIRE(t->put(Db::kInodes, key_u64(i), std::string(60, 'i')).is_ok());
    for (std::uint64_t i = 0; i < 50; ++i)
        REQUIRE(t->put(Db::kDirents, key_u64(i), std::string(20, 'd')).is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m.commit_group(nullptr).is_ok());
}

// A store fill()ed and closed in dir; its data.mdb.
std::string filled_file(const TempDir& dir) {
    {
        auto m = open_meta(dir.meta());
        fill(*m);
    }
    return dir.meta() + "/data.mdb";
}

// Reads every record of the databases filled above, through a read beside
// the operations, the group's own read and an operation; each that fails
// must fail with EIO. Returns whether one did.
bool read_everything(MetaStore& m) {
    bool failed = false;
    for (int how = 0; how < 3; ++how) {
        std::unique_ptr<Txn> t;
        Status st = how == 0   ? m.begin_read(&t)
                    : how == 1 ? m.begin_read(&t, MetaStore::ReadFrom::kGroup)
                               : m.begin(&t);
        if (!st) {
            CHECK(st.err() == EIO);
            failed = true;
            continue;
        }
        for (Db db : {Db::kInodes, Db::kDirents}) {
            Cursor c = t->cursor(db);
            for (bool more = c.first(); more; more = c.next()) {
            }
            if (!c.status()) {
                CHECK(c.status().err() == EIO);
                failed = true;
            }
        }
        for (std::uint64_t i = 0; i < 3000; i += 97) {
            std::string_view v;
            bool found = false;
            Status got = t->get(Db::kInodes, key_u64(i), &v, &found);
            if (!got) {
                CHECK(got.err() == EIO);
                failed = true;
            }
        }
        if (how == 2) {
            Status put = t->put(Db::kInodes, key_u64(5), "changed");
            if (!put) failed = true;
            if (put) put = t->commit();
        }
    }
    return failed;
}

}  // namespace

TEST_CASE("a store whose file is cut short under it stops with EIO, reads and writes alike",
          "[meta][lmdb-guard]") {
    for (const bool write : {false, true}) {
        INFO((write ? "an operation" : "a read"));
        TempDir dir;
        auto m = open_meta(dir.meta());
        fill(*m);
        const std::string data = dir.meta() + "/data.mdb";
        REQUIRE(::truncate(data.c_str(), 2 * kPage) == 0);  // every tree page past the end: SIGBUS
        std::unique_ptr<Txn> t;
        std::string_view v;
        bool found = false;
        Status st;
        if (write) {
            REQUIRE(m->begin(&t).is_ok());
            st = t->put(Db::kInodes, key_u64(1), "x");
        } else {
            REQUIRE(m->begin_read(&t).is_ok());
            st = t->get(Db::kInodes, key_u64(1), &v, &found);
        }
        t.reset();
        INFO(st.to_string());
        CHECK(st.err() == EIO);
        CHECK(st.message().find("SIGBUS") != std::string::npos);
        CHECK(st.message().find('\n') == std::string::npos);
        CHECK(m->failure().err() == EIO);
        CHECK(m->begin(&t).err() == EIO);
        CHECK(m->begin_read(&t).err() == EIO);
        CHECK(m->commit_group(nullptr).err() == EIO);
    }
}

// A node's size, damaged under the open store, would send the caller to
// copy 2 GiB from a 4 KiB page: refused before it leaves the store.
TEST_CASE("a value whose size reaches past the file is refused, not handed back",
          "[meta][lmdb-guard]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    fill(*m);
    const std::string data = dir.meta() + "/data.mdb";
    const std::uint64_t node = node_offset(data, "inodes", key_u64(1234));
    write_at(data, node, std::string("\xff\xff\xff\x7f", 4));  // mn_lo, mn_hi: the data size
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    std::string_view v;
    bool found = false;
    Status st = t->get(Db::kInodes, key_u64(1234), &v, &found);
    INFO(st.to_string() << " (found " << found << ", " << v.size() << " bytes)");
    REQUIRE(st.err() == EIO);
    CHECK(st.message().find("outside the metadata file") != std::string::npos);
    t.reset();
    CHECK(m->failure().err() == EIO);
}

// LMDB asserts that a branch page of a named database has two keys at
// least (mdb_page_search_root); one with a single key is an assertion
// that aborts, unless the call is guarded.
TEST_CASE("an LMDB assertion in a guarded call is an error; outside one it aborts as before",
          "[meta][lmdb-guard]") {
    TempDir dir;
    const std::string data = filled_file(dir);
    const PageMap pm = page_map(data);
    REQUIRE(pm.branch.count("inodes") == 1);
    const std::uint64_t root = pm.branch.at("inodes").front();
    write_at(data, root * kPage + 12, std::string("\x12\x00", 2));  // lower: one key
    auto lookup = [&dir](bool guard) {
        MDB_env* env = nullptr;
        REQUIRE(mdb_env_create(&env) == 0);
        REQUIRE(mdb_env_set_maxdbs(env, 16) == 0);
        REQUIRE(mdb_env_open(env, dir.meta().c_str(), MDB_NOLOCK | MDB_RDONLY, 0600) == 0);
        REQUIRE(lmdb_guard_install(env).is_ok());
        MDB_txn* txn = nullptr;
        REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0);
        MDB_dbi dbi = 0;
        REQUIRE(mdb_dbi_open(txn, "inodes", 0, &dbi) == 0);
        const std::string key = key_u64(7);
        MDB_val k{key.size(), const_cast<char*>(key.data())}, v{};
        LmdbMap map;
        const int rc = guard ? guarded_get(txn, dbi, &k, &v, map, true) : mdb_get(txn, dbi, &k, &v);
        mdb_txn_abort(txn);
        mdb_env_close(env);
        return rc;
    };
    const int rc = lookup(true);
    CHECK(rc == kLmdbFault);
    CHECK(lmdb_damage_text(rc).find("Assertion") != std::string::npos);
    check_died_of(in_child([&] { lookup(false); }), SIGABRT);
}

TEST_CASE("a fault outside a guarded call still ends the process", "[meta][lmdb-guard]") {
    TempDir dir;
    auto m = open_meta(dir.meta());  // the handlers are in place
    auto r = in_child([] {
        void* p = ::mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        (void)*static_cast<volatile char*>(p);
    });
    check_died_of(r, SIGSEGV);
}

// Every page of a small store, in turn, overwritten under the open store
// with random bytes, zeros or ones: every read and operation either works
// or fails with EIO and stops the store; nothing crashes.
TEST_CASE("any page that goes bad under an open store gives EIO or nothing, never a crash",
          "[meta][lmdb-guard]") {
    TempDir dir;
    const std::string data = filled_file(dir);
    const std::string pristine =
        read_at(data, 0, static_cast<std::size_t>(std::filesystem::file_size(data)));
    const std::uint64_t pages = pristine.size() / kPage;
    std::mt19937_64 rng(3);
    int stopped = 0, cases = 0;
    for (const char fill_byte : {'r', '\0', '\xff'}) {
        for (std::uint64_t page = 2; page < pages; ++page) {
            INFO("page " << page << ", fill " << int(fill_byte));
            {
                std::ofstream out(data, std::ios::binary | std::ios::trunc);
                out.write(pristine.data(), static_cast<std::streamsize>(pristine.size()));
            }
            auto m = open_meta(dir.meta());
            std::string bytes(kPage, fill_byte);
            if (fill_byte == 'r')
                for (char& c : bytes) c = static_cast<char>(rng());
            write_at(data, page * kPage, bytes);
            const bool failed = read_everything(*m);
            const Status why = m->failure();
            if (failed) {
                INFO(why.to_string());
                CHECK(why.err() == EIO);
            }
            stopped += !why.is_ok();
            ++cases;
        }
    }
    WARN(stopped << " of " << cases << " damaged pages stopped the store");
}

// Another map of the same file in the process (a store whose write faulted
// keeps its environment and map to the end): a store opened on the file
// checks its reads against its own map. The other map lies lower in memory
// here, where /proc/self/maps names it first.
TEST_CASE("a store checks its reads against its own map of the file, not another one",
          "[meta][lmdb-guard]") {
    TempDir dir;
    const std::string data = filled_file(dir);
    const int fd = ::open(data.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    // 256 MiB: below every library and heap, and in application memory
    // under ASan (whose shadow takes 2 GiB to 16 TiB) and TSan alike.
    void* const low = reinterpret_cast<void*>(std::uintptr_t{1} << 28);
    void* other = ::mmap(low, 1 << 20, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    ::close(fd);
    REQUIRE(other == low);
    for (const bool read_only : {false, true}) {
        auto m = open_meta(dir.meta(), read_only);
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin_read(&t).is_ok());
        for (std::uint64_t k = 0; k < 3000; k += 7) {
            std::string_view v;
            bool found = false;
            Status st = t->get(Db::kInodes, key_u64(k), &v, &found);
            INFO(st.to_string());
            REQUIRE(st.is_ok());
            CHECK(found);
        }
        t.reset();
        CHECK(m->failure().is_ok());
    }
    ::munmap(other, 1 << 20);
}
