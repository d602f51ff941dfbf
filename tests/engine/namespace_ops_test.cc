// The engine's namespace operations (src/engine/namespace_ops.cc), driven
// directly, without a mount: POSIX rules of create, link, unlink, rmdir,
// rename and readdir; extended attributes; an unlinked file kept while
// pinned.
#include <sys/stat.h>
#include <sys/xattr.h>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

TEST_CASE("namespace operations follow POSIX rules", "[engine]") {
    TempDir dir;
    auto e = open_engine(options_for(dir.store(), kCdc));
    Attr f = make_file(*e, "a");
    Attr a;
    REQUIRE(e->create(kRootInode, "a", NewNode{S_IFREG | 0644}, &a).err() == EEXIST);
    REQUIRE(e->create(kRootInode, std::string(256, 'x'), NewNode{S_IFREG | 0644}, &a).err() == ENAMETOOLONG);
    REQUIRE(e->create(kRootInode, std::string(255, 'x'), NewNode{S_IFREG | 0644}, &a).is_ok());
    REQUIRE(e->create(kRootInode, "bad/name", NewNode{S_IFREG | 0644}, &a).err() == EINVAL);

    Attr d;
    REQUIRE(e->create(kRootInode, "d", NewNode{S_IFDIR | 0755}, &d).is_ok());
    Attr root;
    REQUIRE(e->getattr(kRootInode, &root).is_ok());
    CHECK(root.nlink == 3);
    REQUIRE(e->create(d.ino, "inner", NewNode{S_IFREG | 0600}, &a).is_ok());
    CHECK(e->rmdir(kRootInode, "d").err() == ENOTEMPTY);
    CHECK(e->unlink(kRootInode, "d").err() == EISDIR);
    CHECK(e->rmdir(kRootInode, "a").err() == ENOTDIR);
    CHECK(e->create(f.ino, "x", NewNode{S_IFREG | 0644}, &a).err() == ENOTDIR);

    // Hard links count.
    Attr l;
    REQUIRE(e->link(f.ino, d.ino, "hard", &l).is_ok());
    CHECK(l.nlink == 2);
    CHECK(e->link(d.ino, kRootInode, "dirlink", &l).err() == EPERM);

    // Rename: over a file, NOREPLACE, EXCHANGE, into own subtree.
    Attr b = make_file(*e, "b");
    REQUIRE(e->rename(kRootInode, "a", kRootInode, "b", 0).is_ok());
    REQUIRE(e->lookup(kRootInode, "b", &a).is_ok());
    CHECK(a.ino == f.ino);
    CHECK(e->lookup(kRootInode, "a", &a).err() == ENOENT);
    Attr c = make_file(*e, "c");
    CHECK(e->rename(kRootInode, "c", kRootInode, "b", RENAME_NOREPLACE).err() == EEXIST);
    REQUIRE(e->rename(kRootInode, "c", kRootInode, "b", RENAME_EXCHANGE).is_ok());
    REQUIRE(e->lookup(kRootInode, "b", &a).is_ok());
    CHECK(a.ino == c.ino);
    REQUIRE(e->lookup(kRootInode, "c", &a).is_ok());
    CHECK(a.ino == f.ino);
    Attr sub;
    REQUIRE(e->create(d.ino, "sub", NewNode{S_IFDIR | 0755}, &sub).is_ok());
    CHECK(e->rename(kRootInode, "d", sub.ino, "loop", 0).err() == EINVAL);
    CHECK(e->rename(kRootInode, "b", kRootInode, "d", 0).err() == EISDIR);
    CHECK(e->rename(kRootInode, "d", kRootInode, "b", 0).err() == ENOTDIR);
    // Moving a directory updates both parents' link counts and its parent.
    Attr d2;
    REQUIRE(e->create(kRootInode, "d2", NewNode{S_IFDIR | 0755}, &d2).is_ok());
    REQUIRE(e->rename(d.ino, "sub", d2.ino, "moved", 0).is_ok());
    InodeId parent = 0;
    REQUIRE(e->parent_of(sub.ino, &parent).is_ok());
    CHECK(parent == d2.ino);
    REQUIRE(e->getattr(d.ino, &a).is_ok());
    CHECK(a.nlink == 2);
    REQUIRE(e->getattr(d2.ino, &a).is_ok());
    CHECK(a.nlink == 3);
    (void)b;

    // Symlinks.
    NewNode sl{S_IFLNK | 0777};
    sl.symlink_target = "target/path";
    REQUIRE(e->create(kRootInode, "ln", sl, &a).is_ok());
    std::string target;
    REQUIRE(e->readlink(a.ino, &target).is_ok());
    CHECK(target == "target/path");
    CHECK(a.size == target.size());

    // readdir lists each entry once, sorted by name.
    std::vector<DirEntry> entries;
    REQUIRE(e->readdir(kRootInode, &entries).is_ok());
    std::vector<std::string> names;
    for (auto& en : entries) names.push_back(en.name);
    CHECK(std::is_sorted(names.begin(), names.end()));
    CHECK(std::count(names.begin(), names.end(), "b") == 1);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("xattrs: create, replace, list, remove", "[engine]") {
    TempDir dir;
    auto e = open_engine(options_for(dir.store(), kCdc));
    Attr f = make_file(*e, "f");
    REQUIRE(e->setxattr(f.ino, "user.a", "1", 0).is_ok());
    CHECK(e->setxattr(f.ino, "user.a", "2", XATTR_CREATE).err() == EEXIST);
    CHECK(e->setxattr(f.ino, "user.b", "2", XATTR_REPLACE).err() == ENODATA);
    REQUIRE(e->setxattr(f.ino, "user.a", "3", XATTR_REPLACE).is_ok());
    std::string v;
    REQUIRE(e->getxattr(f.ino, "user.a", &v).is_ok());
    CHECK(v == "3");
    REQUIRE(e->setxattr(f.ino, "trusted.t", std::string(1000, 'z'), 0).is_ok());
    std::vector<std::string> names;
    REQUIRE(e->listxattr(f.ino, &names).is_ok());
    CHECK(names == std::vector<std::string>{"trusted.t", "user.a"});
    REQUIRE(e->removexattr(f.ino, "user.a").is_ok());
    CHECK(e->removexattr(f.ino, "user.a").err() == ENODATA);
    CHECK(e->getxattr(f.ino, "user.a", &v).err() == ENODATA);
}

TEST_CASE("an unlinked file stays readable while pinned and is freed on the last unpin", "[engine]") {
    TempDir dir;
    std::mt19937_64 rng(9);
    auto d = random_bytes(rng, 500000);
    auto e = open_engine(options_for(dir.store(), kCdc));
    Attr f = make_file(*e, "f");
    write_all(*e, f.ino, 0, d);
    e->pin(f.ino, 2);
    REQUIRE(e->unlink(kRootInode, "f").is_ok());
    CHECK(read_all(*e, f.ino) == d);
    e->unpin(f.ino, 1);
    CHECK(read_all(*e, f.ino) == d);
    e->unpin(f.ino, 1);
    Attr a;
    CHECK(e->getattr(f.ino, &a).err() == ENOENT);
    SpaceCounters c;
    REQUIRE(e->counters(&c).is_ok());
    CHECK(c.stored_bytes == 0);

    // Still pinned when the store closes (as in a crash): freed on next open.
    Attr g = make_file(*e, "g");
    write_all(*e, g.ino, 0, d);
    e->pin(g.ino);
    REQUIRE(e->unlink(kRootInode, "g").is_ok());
    REQUIRE(e->sync_all().is_ok());
    abandon_engine(*e);
    e = open_engine(options_for(dir.store(), kCdc));
    CHECK(e->getattr(g.ino, &a).err() == ENOENT);
    REQUIRE(e->counters(&c).is_ok());
    CHECK(c.stored_bytes == 0);
    REQUIRE(e->close().is_ok());
    CHECK(check_invariants(dir.store()).empty());
}
