// StoreDir and Env::beneath(): a store directory opened once, whose files
// are reached from its descriptor without following a link at any level;
// the owner and mode rule; the metadata directory LMDB is given; a store
// inside a mount point, found by device and inode.
#include "store/store_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::TempDir;

std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE(out.good());
}

bool mentions(const Status& st, const std::string& text) {
    INFO(st.to_string());
    return st.message().find(text) != std::string::npos;
}

// A store directory (0700) and, beside it, a file and a directory that
// links planted in the store point at.
struct Planted {
    TempDir tmp;
    std::string store = tmp / "store", outside = tmp / "outside", victim = tmp / "outside/victim";
    std::unique_ptr<StoreDir> dir;
    Planted() {
        REQUIRE(::mkdir(store.c_str(), 0700) == 0);
        REQUIRE(::mkdir(outside.c_str(), 0700) == 0);
        write(victim, "precious");
        REQUIRE_OK(StoreDir::open(store, StoreDirOptions{}, &dir));
    }
    Env* env() const { return dir->env(); }
};

}  // namespace

TEST_CASE("Env::beneath follows no symbolic link at any level and names files by the store's path",
          "[env][store-dir]") {
    Planted p;
    Env* env = p.env();
    std::unique_ptr<File> f;
    REQUIRE_OK(env->open(p.store + "/a", OpenMode::kReadWrite, &f));
    REQUIRE_OK(f->pwrite("abc", 3, 0));
    f.reset();
    REQUIRE(::symlink(p.victim.c_str(), (p.store + "/link").c_str()) == 0);
    REQUIRE(::symlink(p.outside.c_str(), (p.store + "/dir").c_str()) == 0);

    for (OpenMode mode : {OpenMode::kRead, OpenMode::kReadWrite, OpenMode::kCreateNew}) {
        Status st = env->open(p.store + "/link", mode, &f);
        CHECK(st.err() == ELOOP);
        CHECK(mentions(st, p.store + "/link is a symbolic link"));
        st = env->open(p.store + "/dir/victim", mode, &f);
        CHECK(st.err() == ELOOP);
        CHECK(mentions(st, p.store + "/dir is a symbolic link"));
    }
    std::vector<std::string> names;
    CHECK(env->list_dir(p.store + "/dir", &names).err() == ELOOP);
    CHECK(env->mkdir(p.store + "/dir").err() == ELOOP);
    CHECK(env->sync_dir(p.store + "/dir").err() == ELOOP);
    CHECK_FALSE(env->exists(p.store + "/dir/victim"));
    CHECK(env->exists(p.store + "/link"));  // the link itself is there
    CHECK(env->rename(p.store + "/a", p.store + "/dir/a").err() == ELOOP);
    CHECK(contents(p.victim) == "precious");
    // Removing or renaming a link acts on the link, never on what it names.
    REQUIRE_OK(env->rename(p.store + "/link", p.store + "/link2"));
    REQUIRE_OK(env->unlink(p.store + "/link2"));
    CHECK(contents(p.victim) == "precious");

    // The store itself, and the same files through the descriptor's path.
    REQUIRE_OK(env->list_dir(p.store, &names));
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"a", "dir"});
    REQUIRE_OK(env->sync_dir(p.store));
    REQUIRE_OK(env->open(p.dir->via_fd() + "/a", OpenMode::kRead, &f));
    CHECK(p.dir->via_fd().rfind("/proc/self/fd/", 0) == 0);
    // Nothing outside the store, nor a way out of it.
    CHECK(env->open(p.victim, OpenMode::kRead, &f).err() == EXDEV);
    CHECK(env->open(p.store + "/../outside/victim", OpenMode::kRead, &f).err() == EINVAL);
    CHECK(env->open(p.store + "-other/a", OpenMode::kRead, &f).err() == EXDEV);
}

TEST_CASE("Env::beneath writes no file of more than one link and waits on no FIFO",
          "[env][store-dir]") {
    Planted p;
    REQUIRE(::link(p.victim.c_str(), (p.store + "/hard").c_str()) == 0);
    std::unique_ptr<File> f;
    Status st = p.env()->open(p.store + "/hard", OpenMode::kReadWrite, &f);
    CHECK(st.err() == EMLINK);
    CHECK(mentions(st, p.store + "/hard has 2 links"));
    REQUIRE_OK(p.env()->open(p.store + "/hard", OpenMode::kRead, &f));  // reading changes nothing
    REQUIRE(::mkfifo((p.store + "/fifo").c_str(), 0600) == 0);
    st = p.env()->open(p.store + "/fifo", OpenMode::kRead, &f);
    CHECK(st.err() == EINVAL);
    CHECK(mentions(st, "is not a regular file"));
}

TEST_CASE("Env::posix opens no symbolic link as a path's last component", "[env][store-dir]") {
    Planted p;
    REQUIRE(::symlink(p.victim.c_str(), (p.store + "/link").c_str()) == 0);
    std::unique_ptr<File> f;
    CHECK(Env::posix()->open(p.store + "/link", OpenMode::kReadWrite, &f).err() == ELOOP);
}

TEST_CASE("a store directory that is another user's or that others may write is refused",
          "[store-dir]") {
    TempDir tmp;
    const std::string store = tmp / "store";
    REQUIRE(::mkdir(store.c_str(), 0700) == 0);
    StoreDirOptions o;
    o.waiver = "-o unsafe_store_dir accepts it";
    std::unique_ptr<StoreDir> dir;
    for (mode_t mode : {0700, 0750, 0755, 01755}) {
        REQUIRE(::chmod(store.c_str(), mode) == 0);
        CHECK(StoreDir::open(store, o, &dir).is_ok());
    }
    struct Case {
        mode_t mode;
        const char* says;
    };
    for (const Case& c :
         {Case{0770, "writable by group (mode 0770)"}, Case{0757, "writable by others (mode 0757)"},
          Case{0777, "writable by group and others (mode 0777)"},
          Case{01777, "writable by group and others (mode 1777)"}}) {
        REQUIRE(::chmod(store.c_str(), c.mode) == 0);
        Status st = StoreDir::open(store, o, &dir);
        CHECK(st.err() == EPERM);
        CHECK(mentions(st, "store " + store + " is " + c.says));
        CHECK(mentions(st, "-o unsafe_store_dir accepts it"));
        StoreDirOptions waived = o;
        waived.check_owner = false;
        CHECK(StoreDir::open(store, waived, &dir).is_ok());
    }
    REQUIRE(::chmod(store.c_str(), 0700) == 0);
    if (::geteuid() == 0) {
        REQUIRE(::chown(store.c_str(), 65534, 65534) == 0);
        Status st = StoreDir::open(store, o, &dir);
        CHECK(st.err() == EPERM);
        CHECK(mentions(st, "store " + store + " is owned by uid 65534, not by root"));
    }
    // Made when asked, 0700 whatever the umask; named when it is not a directory.
    o.create = true;
    const mode_t old_umask = ::umask(0);
    Status made = StoreDir::open(tmp / "new", o, &dir);
    ::umask(old_umask);
    REQUIRE_OK(made);
    struct stat st {};
    REQUIRE(::stat((tmp / "new").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
    write(tmp / "file", "x");
    CHECK(StoreDir::open(tmp / "file", o, &dir).err() == ENOTDIR);
    o.create = false;
    CHECK(mentions(StoreDir::open(tmp / "missing", o, &dir),
                   "store " + tmp / "missing" + ": No such file"));
}

TEST_CASE("library_dir gives LMDB its directory through a descriptor: checked and made private",
          "[store-dir]") {
    Planted p;
    std::string path;
    // Made 0700, named through its own descriptor.
    REQUIRE_OK(p.dir->library_dir("meta", true, &path));
    CHECK(path.rfind("/proc/self/fd/", 0) == 0);
    write(path + "/data.mdb", "x");
    CHECK(contents(p.store + "/meta/data.mdb") == "x");
    // Errors about it speak of the store's path.
    Status named = p.dir->named(
        Status::error(EIO, "open " + path + "/data.mdb and " + p.dir->via_fd() + "/lock"));
    CHECK(named.message() == "open " + p.store + "/meta/data.mdb and " + p.store + "/lock");
    CHECK(named.err() == EIO);
    CHECK(p.dir->named(Status::error(EIO, path + "0/x")).message() == path + "0/x");

    // A loose directory is tightened before LMDB sees it, unless read-only.
    REQUIRE(::chmod((p.store + "/meta").c_str(), 0777) == 0);
    std::unique_ptr<StoreDir> ro;
    StoreDirOptions read_only;
    read_only.read_only = true;
    REQUIRE_OK(StoreDir::open(p.store, read_only, &ro));
    REQUIRE_OK(ro->library_dir("meta", false, &path));
    struct stat st {};
    REQUIRE(::stat((p.store + "/meta").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0777);
    REQUIRE_OK(p.dir->library_dir("meta", false, &path));
    REQUIRE(::stat((p.store + "/meta").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);

    // data.mdb as a link or a second name of another file; meta as a link.
    REQUIRE(::unlink((p.store + "/meta/data.mdb").c_str()) == 0);
    REQUIRE(::symlink(p.victim.c_str(), (p.store + "/meta/data.mdb").c_str()) == 0);
    Status st1 = p.dir->library_dir("meta", false, &path);
    CHECK(st1.err() == ELOOP);
    CHECK(mentions(st1, p.store + "/meta/data.mdb is a symbolic link"));
    REQUIRE(::unlink((p.store + "/meta/data.mdb").c_str()) == 0);
    REQUIRE(::link(p.victim.c_str(), (p.store + "/meta/data.mdb").c_str()) == 0);
    CHECK(p.dir->library_dir("meta", false, &path).err() == EMLINK);
    REQUIRE(::symlink(p.outside.c_str(), (p.store + "/meta2").c_str()) == 0);
    Status st2 = p.dir->library_dir("meta2", true, &path);
    CHECK(st2.err() == ELOOP);
    CHECK(mentions(st2, p.store + "/meta2 is a symbolic link"));
    CHECK(contents(p.victim) == "precious");
}

TEST_CASE("a store at or below a mount point is found by device and inode however it is spelled",
          "[store-dir]") {
    TempDir tmp;
    const std::string mnt = tmp / "mnt";
    REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
    REQUIRE(::mkdir((mnt + "/a").c_str(), 0755) == 0);
    REQUIRE(::symlink(mnt.c_str(), (tmp / "link").c_str()) == 0);
    for (const std::string& inside : {mnt, mnt + "/", mnt + "/inner", mnt + "/a", mnt + "/a/b/c",
                                      mnt + "/./a/../x", tmp / "link", tmp / "link/inner"}) {
        INFO(inside);
        Status st = check_outside_mount(inside, "store", mnt);
        CHECK(st.err() == EINVAL);
        CHECK(mentions(st, "mount point " + mnt));
        CHECK(mentions(st, "wait on itself"));
    }
    CHECK(mentions(check_outside_mount(mnt, "cache_dir", tmp / "link"),
                   "cache_dir " + mnt + " is the mount point"));
    CHECK(mentions(check_outside_mount(mnt + "/x", "store", mnt),
                   "store " + mnt + "/x lies inside the mount point"));
    for (const std::string& outside : {tmp.path(), mnt + "-store", tmp / "elsewhere/deeper"}) {
        INFO(outside);
        CHECK(check_outside_mount(outside, "store", mnt).is_ok());
    }
}

}  // namespace hiodsfs
