// Damaged metadata through the real programs (docs/architecture.md, "A
// damaged store"): meta/data.mdb cut short, and every page of a small
// store's overwritten in turn with random bytes. The daemon's read-write
// and read-only opens and hiodsfs-fsck (check and --repair) each end in one
// line, exit 1 (daemon) or 8 (fsck), with every file of the store as it
// was; a page that the metadata does not use opens, and shows the right
// data. A page that goes bad under a running daemon gives EIO and stops the
// store; the daemon never dies of it.
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {

// Names, sizes and checksums of every file of the store but its lock (which
// holds the pid of the last process that opened the store).
std::string store_digest(const std::string& store) {
    return sh("cd " + shq(store) +
              " && find . -type f ! -name lock | LC_ALL=C sort | xargs -d '\\n' cksum")
        .out;
}

// The pages of data.mdb as LMDB itself counts them (mdb_stat of the
// free-page tree, of the list of databases and of every database), and the
// pages its free list names: the sweep's independent account of which pages
// the metadata uses.
struct PageCount {
    std::uint64_t pages = 0;  // the file's length in pages
    std::uint64_t used = 0;   // the two meta pages and every tree page
    std::uint64_t free = 0;   // listed in the free list
    std::uint64_t branch = 0, overflow = 0;
};

PageCount count_pages(const std::string& meta_dir) {
    PageCount pc;
    MDB_env* env = nullptr;
    REQUIRE(mdb_env_create(&env) == 0);
    REQUIRE(mdb_env_set_maxdbs(env, 32) == 0);
    REQUIRE(mdb_env_open(env, meta_dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0600) == 0);
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0);
    auto add = [&pc](const MDB_stat& st) {
        pc.used += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
        pc.branch += st.ms_branch_pages;
        pc.overflow += st.ms_overflow_pages;
    };
    MDB_stat st{};
    REQUIRE(mdb_stat(txn, 0, &st) == 0);  // the free-page tree
    add(st);
    REQUIRE(mdb_stat(txn, 1, &st) == 0);  // the list of databases
    add(st);
    pc.used += 2;
    MDB_cursor* c = nullptr;
    REQUIRE(mdb_cursor_open(txn, 1, &c) == 0);
    MDB_val k{}, v{};
    std::vector<std::string> names;
    while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
        names.emplace_back(static_cast<char*>(k.mv_data), k.mv_size);
    mdb_cursor_close(c);
    for (const std::string& name : names) {
        MDB_dbi dbi = 0;
        REQUIRE(mdb_dbi_open(txn, name.c_str(), 0, &dbi) == 0);
        REQUIRE(mdb_stat(txn, dbi, &st) == 0);
        add(st);
    }
    REQUIRE(mdb_cursor_open(txn, 0, &c) == 0);
    while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
        pc.free += *static_cast<const std::size_t*>(v.mv_data);
    mdb_cursor_close(c);
    MDB_envinfo info{};
    REQUIRE(mdb_env_info(env, &info) == 0);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    pc.pages = info.me_last_pgno + 1;
    return pc;
}

// The files the sweep's store holds, and what each reads.
struct Content {
    std::map<std::string, std::string> files;  // path below the mount -> bytes
    std::string xattr;                         // user.big of "big", past one LMDB node
};

Content write_content(const MountFixture& fx) {
    Content c;
    make_dir(fx.path("d"));
    for (int i = 0; i < 120; ++i) {
        const std::string name = "d/file-with-a-longish-name-" + std::to_string(i);
        c.files[name] =
            random_bytes(1 + static_cast<std::size_t>(i) * 37, 500 + static_cast<std::uint64_t>(i));
        write_file(fx.path(name), c.files[name]);
    }
    c.files["big"] = random_bytes(300 * kKiB, 7);
    write_file(fx.path("big"), c.files["big"]);
    c.xattr = random_bytes(3000, 8);
    REQUIRE(::setxattr(fx.path("big").c_str(), "user.big", c.xattr.data(), c.xattr.size(), 0) == 0);
    return c;
}

// What a mount shows, against what was written: "" when it all matches.
std::string compare_content(const MountFixture& fx, const Content& c) {
    for (const auto& [name, data] : c.files) {
        std::ifstream in(fx.path(name), std::ios::binary);
        if (!in) return name + " does not open";
        const std::string got((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
        if (got != data) return name + " reads other bytes";
    }
    std::string x(c.xattr.size() + 1, '\0');
    const ssize_t n = ::getxattr(fx.path("big").c_str(), "user.big", x.data(), x.size());
    if (n < 0 || x.substr(0, static_cast<std::size_t>(n)) != c.xattr)
        return "user.big reads otherwise";
    CmdResult ls = run({"ls", fx.path("d")});
    if (line_count(ls.out) != 120) return "d lists " + std::to_string(line_count(ls.out)) + " names";
    return "";
}

// 0 if the file opens and reads to its end, else the errno that stopped it.
int read_errno(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    char buf[65536];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    }
    const int err = n < 0 ? errno : 0;
    ::close(fd);
    return err;
}

// Writes `bytes` at page `page` of the file.
void overwrite_page(const std::string& file, std::uint64_t page, const std::string& bytes) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const auto off = static_cast<off_t>(page * bytes.size());
    CHECK(::pwrite(fd, bytes.data(), bytes.size(), off) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

// A refusal as the programs must give it: the exit code, one line on
// stderr, nothing on stdout but fsck's report header, and no file changed.
void check_refused(const CmdResult& r, int code, const std::string& store,
                   const std::string& before) {
    INFO(r.describe());
    CHECK(r.status == code);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("hiodsfs-fsck") != std::string::npos);
    CHECK(store_digest(store) == before);
}

}  // namespace

TEST_CASE("a store whose data.mdb is cut short is refused in one line by mount, -o ro and fsck",
          "[mount][trust][damaged-meta]") {
    MountFixture fx({"meta_compact=0"});
    const Content c = write_content(fx);
    fx.unmount();
    const std::string data = fx.store() + "/meta/data.mdb";
    REQUIRE(::truncate(data.c_str(), stat_of(data).st_size / 2) == 0);
    const std::string before = store_digest(fx.store());
    const std::string bin = daemon_binary();
    CmdResult r = run({bin, fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(60));
    check_refused(r, 1, fx.store(), before);
    CHECK(r.err.find("cut short") != std::string::npos);
    check_refused(run({bin, fx.store(), fx.mnt(), "-f", "-o", "ro"}, {}, std::chrono::seconds(60)),
                  1, fx.store(), before);
    check_refused(run({HIODSFS_FSCK_BIN, fx.store()}), 8, fx.store(), before);
    check_refused(run({HIODSFS_FSCK_BIN, fx.store(), "--repair"}), 8, fx.store(), before);
}

// Every page in turn (the two meta pages, the trees' branch, leaf and
// overflow pages, and the free ones), each case from the same store.
TEST_CASE("every page of a small store's metadata, overwritten in turn, is refused or unused",
          "[mount][trust][damaged-meta]") {
    MountFixture fx({"meta_compact=0", "commit_interval=100"});
    const Content c = write_content(fx);
    fx.remount();
    // Changes after a commit leave pages the new state no longer uses.
    for (int i = 0; i < 120; i += 10)
        REQUIRE(::unlink(fx.path("d/file-with-a-longish-name-" + std::to_string(i)).c_str()) == 0);
    Content now = c;
    for (int i = 0; i < 120; i += 10) {
        const std::string name = "d/file-with-a-longish-name-" + std::to_string(i);
        now.files[name] = "again " + std::to_string(i);
        write_file(fx.path(name), now.files[name]);
    }
    fx.unmount();
    const std::string meta = fx.store() + "/meta";
    const PageCount pc = count_pages(meta);
    INFO("pages " << pc.pages << ", used " << pc.used << " (" << pc.branch << " branch, "
                  << pc.overflow << " overflow), free " << pc.free);
    // A sweep of every kind of page.
    REQUIRE(pc.branch > 0);
    REQUIRE(pc.overflow > 0);
    REQUIRE(pc.free > 0);
    REQUIRE(stat_of(meta + "/data.mdb").st_size == static_cast<off_t>(pc.pages * 4096));
    const std::string pristine = fx.scratch("pristine");
    REQUIRE(run({"cp", "-a", fx.store(), pristine}).ok());
    const long page_bytes = ::sysconf(_SC_PAGESIZE);
    REQUIRE(page_bytes == 4096);

    std::uint64_t refused = 0, opened = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t page = 0; page < pc.pages; ++page) {
        INFO("page " << page << " of " << pc.pages);
        REQUIRE(run({"rm", "-rf", fx.store()}).ok());
        REQUIRE(run({"cp", "-a", pristine, fx.store()}).ok());
        overwrite_page(meta + "/data.mdb", page, random_bytes(4096, 1000 + page));
        const std::string before = store_digest(fx.store());
        CmdResult check = run({HIODSFS_FSCK_BIN, fx.store()});
        if (check.status == 0) {
            // The state does not use this page: everything is there.
            ++opened;
            fx.mount();
            CHECK(compare_content(fx, now) == "");
            fx.unmount();
            fx.set_options({"meta_compact=0", "ro"});
            fx.mount();
            CHECK(compare_content(fx, now) == "");
            fx.unmount();
            fx.set_options({"meta_compact=0", "commit_interval=100"});
            CmdResult repair = run({HIODSFS_FSCK_BIN, fx.store(), "--repair"});
            INFO(repair.describe());
            CHECK(repair.status == 0);
            continue;
        }
        ++refused;
        check_refused(check, 8, fx.store(), before);
        check_refused(run({HIODSFS_FSCK_BIN, fx.store(), "--repair"}), 8, fx.store(), before);
        const std::string bin = daemon_binary();
        check_refused(run({bin, fx.store(), fx.mnt(), "-f"}, {}, std::chrono::seconds(60)), 1,
                      fx.store(), before);
        check_refused(
            run({bin, fx.store(), fx.mnt(), "-f", "-o", "ro"}, {}, std::chrono::seconds(60)), 1,
            fx.store(), before);
    }
    const double took = seconds_since(t0);
    WARN("damaged-page sweep: " << pc.pages << " pages (" << refused << " refused, " << opened
                                << " unused) in " << took << " s, "
                                << took / static_cast<double>(pc.pages) << " s a page");
    // Exactly the pages LMDB counts as used are refused.
    CHECK(refused == pc.used);
    CHECK(opened == pc.pages - pc.used);
}

// Under a running daemon (MAP_SHARED: it sees the new bytes at once): the
// file cut short to its meta pages (every read of a tree page faults with
// SIGBUS), zeros over every other page (no page of the right kind), and
// random bytes over them. A request that meets the damage gets EIO, the
// store stops (status.json says why), and the daemon lives on to its
// unmount. Random bytes that still parse may answer a lookup wrongly
// (ENOENT) before a request trips over them; never with other bytes.
TEST_CASE(
    "a page that goes bad under a running daemon gives EIO and stops the store, never a crash",
    "[mount][trust][damaged-meta]") {
    MountFixture fx({"meta_compact=0", "control_interval=100"});
    const Content c = write_content(fx);
    fx.unmount();
    const std::string pristine = fx.scratch("pristine");
    REQUIRE(run({"cp", "-a", fx.store(), pristine}).ok());
    const std::string data = fx.store() + "/meta/data.mdb";
    for (const std::string damage : {"cut short", "zeros", "random 1", "random 2", "random 3"}) {
        INFO(damage);
        REQUIRE(run({"rm", "-rf", fx.store()}).ok());
        REQUIRE(run({"cp", "-a", pristine, fx.store()}).ok());
        fx.mount();  // nothing of the store in the kernel's caches
        const std::uint64_t pages = static_cast<std::uint64_t>(stat_of(data).st_size) / 4096;
        if (damage == "cut short") {
            REQUIRE(::truncate(data.c_str(), 2 * 4096) == 0);
        } else {
            for (std::uint64_t page = 2; page < pages; ++page)
                overwrite_page(data, page,
                               damage == "zeros" ? std::string(4096, '\0')
                                                 : random_bytes(4096, damage.back() * 1000 + page));
        }
        int first_eio = -1;
        int i = 0;
        for (const auto& [name, bytes] : c.files) {
            const int fd = ::open(fx.path(name).c_str(), O_RDONLY | O_CLOEXEC);
            int err = fd < 0 ? errno : 0;
            std::string got;
            char buf[65536];
            ssize_t n = 0;
            while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0)
                got.append(buf, static_cast<std::size_t>(n));
            if (fd >= 0 && n < 0) err = errno;
            if (fd >= 0) ::close(fd);
            INFO(name);
            if (err == 0) CHECK(got == bytes);  // never other bytes
            if (err == EIO && first_eio < 0) first_eio = i;
            CHECK((err == 0 || err == EIO || err == ENOENT));
            ++i;
        }
        INFO("daemon output:\n" << fx.daemon_log());
        CHECK(first_eio >= 0);
        if (damage == "cut short" || damage == "zeros") CHECK(first_eio == 0);
        // Stopped: whatever comes next is EIO.
        CHECK(MT_ERRNO(::open(fx.path("new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) ==
              EIO);
        CHECK(read_errno(fx.path(c.files.begin()->first)) == EIO);
        CHECK(::kill(fx.daemon_pid(), 0) == 0);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (read_file_or_empty(fx.store() + "/status.json").find("\"store_error\": \"") ==
                   std::string::npos &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        // Random bytes may also parse far enough to fail an operation with
        // another LMDB error, which its undo cannot repair: the reason then
        // says so, with the error.
        const std::string reason = read_file_or_empty(fx.store() + "/status.json");
        const bool random = damage.rfind("random", 0) == 0;
        const std::string undone = "could not be undone after a metadata error";
        CHECK((reason.find("\"store_error\": \"metadata damaged") != std::string::npos ||
               (random && reason.find(undone) != std::string::npos)));
        CHECK((fx.daemon_log().find("metadata damaged") != std::string::npos ||
               (random && fx.daemon_log().find(undone) != std::string::npos)));
        const int status = fx.unmount_status();
        CHECK(status >= 0);
        CHECK(status < 128);  // not killed by a signal
    }
}
