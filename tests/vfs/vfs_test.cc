// The Vfs over a real engine: pins, handles, directory snapshots and the
// POSIX rules for new nodes, ACLs, O_APPEND and O_TRUNC.
#include "vfs/vfs.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "temp_store.h"
#include "vfs/posix_acl.h"

using namespace hiodsfs;
using hiodsfs::vfs::Caller;
using hiodsfs::vfs::DirItem;
using hiodsfs::vfs::PosixAcl;
using hiodsfs::vfs::Vfs;

namespace {

struct Fixture {
    test::TempStore dir;
    std::unique_ptr<Engine> engine = dir.open();
    Vfs vfs{*engine, {.writeback_cache = false, .posix_acl = true}};
    Caller user{.uid = 1000, .gid = 1000, .umask = 022, .in_group = {}};

    ~Fixture() { engine->close(); }

    Attr mkfile(const std::string& name, InodeId parent = kRootInode, std::uint32_t mode = 0644) {
        Attr a;
        Status st = vfs.mknod(user, parent, name, S_IFREG | mode, 0, &a);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        return a;
    }
    Attr mkdir(const std::string& name, InodeId parent = kRootInode, std::uint32_t mode = 0755) {
        Attr a;
        Status st = vfs.mkdir(user, parent, name, mode, &a);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        return a;
    }
    std::vector<std::string> list(std::uint64_t fh, std::uint64_t offset = 0) {
        std::vector<std::string> names;
        REQUIRE(vfs.readdir(fh, offset, false,
                            [&](const DirItem& item) {
                                names.emplace_back(item.name);
                                return true;
                            })
                    .is_ok());
        return names;
    }
    std::string contents(InodeId ino) {
        Attr a;
        REQUIRE(vfs.getattr(ino, &a).is_ok());
        std::string buf(a.size, '\0');
        std::size_t got = 0;
        REQUIRE(vfs.read(ino, 0, buf.size(), buf.data(), &got).is_ok());
        buf.resize(got);
        return buf;
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "every handed-out inode is pinned once and forget gives it back") {
    Attr f = mkfile("f");
    CHECK(vfs.pins(f.ino) == 1);
    Attr again;
    REQUIRE(vfs.lookup(kRootInode, "f", &again).is_ok());
    CHECK(vfs.pins(f.ino) == 2);
    std::uint64_t fh = 0;
    REQUIRE(vfs.open(f.ino, O_RDWR, &fh).is_ok());
    CHECK(vfs.pins(f.ino) == 3);
    REQUIRE(vfs.release(fh).is_ok());
    CHECK(vfs.release(fh).err() == EBADF);
    vfs.forget(f.ino, 2);
    CHECK(vfs.pinned_inodes() == 0);

    Attr c;
    REQUIRE(vfs.create(user, kRootInode, "c", 0644, O_WRONLY | O_CREAT, &c, &fh).is_ok());
    CHECK(vfs.pins(c.ino) == 2);  // the entry and the open handle
    REQUIRE(vfs.release(fh).is_ok());
    Attr l;
    REQUIRE(vfs.link(c.ino, kRootInode, "c2", &l).is_ok());
    CHECK(vfs.pins(c.ino) == 2);
    CHECK(vfs.open_files() == 0);
}

TEST_CASE_METHOD(Fixture, "an unlinked file stays readable while open") {
    Attr f = mkfile("f");
    std::uint64_t fh = 0;
    REQUIRE(vfs.open(f.ino, O_RDWR, &fh).is_ok());
    REQUIRE(vfs.write(fh, f.ino, 0, "data", 4).is_ok());
    REQUIRE(vfs.unlink(kRootInode, "f").is_ok());
    CHECK(contents(f.ino) == "data");
    REQUIRE(vfs.release(fh).is_ok());
    vfs.forget(f.ino, 1);
}

TEST_CASE_METHOD(Fixture, "forgets never give back more than was taken") {
    Attr f = mkfile("f");
    vfs.forget(f.ino, 3);
    CHECK(vfs.pins(f.ino) == 0);
    vfs.forget(kRootInode, 1);
    vfs.forget(987654321, 1);
    CHECK(vfs.pinned_inodes() == 0);
}

TEST_CASE_METHOD(Fixture, "unpin_all at unmount frees files unlinked while open") {
    Attr f = mkfile("f");
    std::uint64_t fh = 0;
    REQUIRE(vfs.open(f.ino, O_RDWR, &fh).is_ok());
    REQUIRE(vfs.write(fh, f.ino, 0, "data", 4).is_ok());
    REQUIRE(vfs.unlink(kRootInode, "f").is_ok());
    SpaceCounters before, after;
    REQUIRE(engine->counters(&before).is_ok());
    vfs.unpin_all();
    CHECK(vfs.pinned_inodes() == 0);
    REQUIRE(engine->counters(&after).is_ok());
    CHECK(after.inode_count == before.inode_count - 1);
}

TEST_CASE_METHOD(Fixture, "dot and dot-dot lookups") {
    Attr d = mkdir("d");
    Attr dot, dotdot;
    REQUIRE(vfs.lookup(d.ino, ".", &dot).is_ok());
    REQUIRE(vfs.lookup(d.ino, "..", &dotdot).is_ok());
    CHECK(dot.ino == d.ino);
    CHECK(dotdot.ino == kRootInode);
    CHECK(vfs.pins(d.ino) == 2);
}

TEST_CASE_METHOD(Fixture, "names longer than 255 bytes are ENAMETOOLONG") {
    std::string longest(255, 'x'), too_long(256, 'x');
    mkfile(longest);
    Attr a;
    CHECK(vfs.lookup(kRootInode, too_long, &a).err() == ENAMETOOLONG);
    CHECK(vfs.mknod(user, kRootInode, too_long, S_IFREG | 0644, 0, &a).err() == ENAMETOOLONG);
    CHECK(vfs.mkdir(user, kRootInode, too_long, 0755, &a).err() == ENAMETOOLONG);
    CHECK(vfs.rename(kRootInode, longest, kRootInode, too_long, 0).err() == ENAMETOOLONG);
}

TEST_CASE_METHOD(Fixture, "rename flags: NOREPLACE and EXCHANGE work, others are EINVAL") {
    Attr a = mkfile("a"), b = mkfile("b");
    CHECK(vfs.rename(kRootInode, "a", kRootInode, "b", RENAME_NOREPLACE).err() == EEXIST);
    REQUIRE(vfs.rename(kRootInode, "a", kRootInode, "b", RENAME_EXCHANGE).is_ok());
    Attr now;
    REQUIRE(vfs.lookup(kRootInode, "a", &now).is_ok());
    CHECK(now.ino == b.ino);
    CHECK(vfs.rename(kRootInode, "a", kRootInode, "c", RENAME_WHITEOUT).err() == EINVAL);
    CHECK(vfs.rename(kRootInode, "a", kRootInode, "c", RENAME_NOREPLACE | RENAME_EXCHANGE).err() ==
          EINVAL);
    (void)a;
}

TEST_CASE_METHOD(Fixture, "a directory handle reads its snapshot with stable offsets") {
    Attr d = mkdir("d");
    for (int i = 0; i < 1000; ++i) mkfile("f" + std::to_string(i), d.ino);
    std::uint64_t fh = 0;
    REQUIRE(vfs.opendir(d.ino, &fh).is_ok());
    CHECK(vfs.pins(d.ino) == 2);

    // Read in small batches while the directory changes underneath.
    std::vector<std::string> seen;
    std::uint64_t offset = 0;
    bool changed = false;
    for (;;) {
        int batch = 0;
        std::uint64_t next = offset;
        REQUIRE(vfs.readdir(fh, offset, false,
                            [&](const DirItem& item) {
                                if (batch == 37) return false;
                                ++batch;
                                seen.emplace_back(item.name);
                                next = item.next_offset;
                                return true;
                            })
                    .is_ok());
        if (batch == 0) break;
        offset = next;
        if (!changed) {
            REQUIRE(vfs.unlink(d.ino, "f999").is_ok());
            mkfile("zzz-new", d.ino);
            changed = true;
        }
    }
    REQUIRE(seen.size() == 1002);
    CHECK(seen[0] == ".");
    CHECK(seen[1] == "..");
    CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == seen.size());
    CHECK(std::count(seen.begin(), seen.end(), "f999") == 1);
    CHECK(std::count(seen.begin(), seen.end(), "zzz-new") == 0);

    // Continuing from an offset in the middle gives the rest.
    CHECK(list(fh, 500).size() == 502);
    // Offset 0 again is rewinddir: the current contents.
    std::vector<std::string> rewound = list(fh, 0);
    CHECK(std::count(rewound.begin(), rewound.end(), "f999") == 0);
    CHECK(std::count(rewound.begin(), rewound.end(), "zzz-new") == 1);
    REQUIRE(vfs.releasedir(fh).is_ok());
    CHECK(vfs.pins(d.ino) == 1);
}

TEST_CASE_METHOD(Fixture, "readdirplus pins exactly the entries the consumer took") {
    Attr d = mkdir("d");
    Attr a = mkfile("a", d.ino), b = mkfile("b", d.ino);
    vfs.forget(a.ino, 1);
    vfs.forget(b.ino, 1);
    std::uint64_t fh = 0;
    REQUIRE(vfs.opendir(d.ino, &fh).is_ok());
    REQUIRE(vfs.unlink(d.ino, "b").is_ok());  // gone since the snapshot
    std::vector<std::pair<std::string, bool>> items;
    REQUIRE(vfs.readdir(fh, 0, true,
                        [&](const DirItem& item) {
                            items.emplace_back(std::string(item.name), item.attr != nullptr);
                            return true;
                        })
                .is_ok());
    REQUIRE(items.size() == 4);
    CHECK(items[0] == std::pair<std::string, bool>{".", false});
    CHECK(items[2] == std::pair<std::string, bool>{"a", true});
    CHECK(items[3] == std::pair<std::string, bool>{"b", false});
    CHECK(vfs.pins(a.ino) == 1);
    CHECK(vfs.pins(b.ino) == 0);

    // A full buffer after "." takes nothing else.
    int n = 0;
    REQUIRE(vfs.readdir(fh, 2, true, [&](const DirItem&) { return n++ < 0; }).is_ok());
    CHECK(vfs.pins(a.ino) == 1);
    REQUIRE(vfs.releasedir(fh).is_ok());
}

TEST_CASE_METHOD(Fixture, "new nodes belong to the caller and get the umask") {
    Attr f = mkfile("f", kRootInode, 0666);
    CHECK(f.uid == 1000);
    CHECK(f.gid == 1000);
    CHECK((f.mode & 07777) == 0644);
    Attr d = mkdir("d", kRootInode, 0777);
    CHECK(d.mode == (S_IFDIR | 0755));
    Attr s;
    REQUIRE(vfs.symlink(user, kRootInode, "s", "f", &s).is_ok());
    CHECK(s.mode == (S_IFLNK | 0777));
    std::string target;
    REQUIRE(vfs.readlink(s.ino, &target).is_ok());
    CHECK(target == "f");
    Attr p;
    REQUIRE(vfs.mknod(user, kRootInode, "p", S_IFIFO | 0666, 0, &p).is_ok());
    CHECK(p.mode == (S_IFIFO | 0644));
    Attr c;
    REQUIRE(vfs.mknod(user, kRootInode, "c", S_IFCHR | 0600, makedev(1, 3), &c).is_ok());
    CHECK(c.rdev == makedev(1, 3));
}

TEST_CASE_METHOD(Fixture, "a setgid directory passes on its group, and S_ISGID to directories") {
    Attr d = mkdir("d", kRootInode, 0775);
    SetAttr change;
    change.valid = SetAttr::kGid | SetAttr::kMode;
    change.gid = 50;
    change.mode = S_IFDIR | S_ISGID | 0775;
    REQUIRE(vfs.setattr(d.ino, change, &d).is_ok());
    Attr f = mkfile("f", d.ino);
    CHECK(f.gid == 50);
    CHECK_FALSE(f.mode & S_ISGID);
    Attr sub = mkdir("sub", d.ino);
    CHECK(sub.gid == 50);
    CHECK(sub.mode & S_ISGID);
}

TEST_CASE_METHOD(Fixture, "a default ACL is inherited and replaces the umask") {
    Attr d = mkdir("d", kRootInode, 0755);
    PosixAcl def({{PosixAcl::kUserObj, 7, PosixAcl::kUndefinedId},
                  {PosixAcl::kUser, 7, 2000},
                  {PosixAcl::kGroupObj, 5, PosixAcl::kUndefinedId},
                  {PosixAcl::kMask, 7, PosixAcl::kUndefinedId},
                  {PosixAcl::kOther, 0, PosixAcl::kUndefinedId}});
    REQUIRE(vfs.setxattr(user, d.ino, vfs::kAclDefaultXattr, def.serialize(), 0).is_ok());

    Attr f = mkfile("f", d.ino, 0666);
    CHECK((f.mode & 0777) == 0660);  // umask 022 would have left 0644
    std::string value;
    REQUIRE(vfs.getxattr(f.ino, vfs::kAclAccessXattr, &value).is_ok());
    PosixAcl access;
    REQUIRE(PosixAcl::parse(value, &access).is_ok());
    CHECK(access.entries()[1] == PosixAcl::Entry{PosixAcl::kUser, 7, 2000});
    CHECK(access.entries()[3].perm == 6);
    CHECK(vfs.getxattr(f.ino, vfs::kAclDefaultXattr, &value).err() == ENODATA);

    Attr sub = mkdir("sub", d.ino, 0777);
    CHECK((sub.mode & 0777) == 0770);
    REQUIRE(vfs.getxattr(sub.ino, vfs::kAclDefaultXattr, &value).is_ok());
    CHECK(value == def.serialize());

    // chmod moves the mask with the group bits.
    SetAttr change;
    change.valid = SetAttr::kMode;
    change.mode = S_IFREG | 0640;
    Attr after;
    REQUIRE(vfs.setattr(f.ino, change, &after).is_ok());
    REQUIRE(vfs.getxattr(f.ino, vfs::kAclAccessXattr, &value).is_ok());
    REQUIRE(PosixAcl::parse(value, &access).is_ok());
    CHECK(access.entries()[3].perm == 4);
    CHECK(access.entries()[1].perm == 7);
}

TEST_CASE_METHOD(Fixture, "setting an access ACL sets the mode; an equivalent one is not stored") {
    Attr f = mkfile("f", kRootInode, 0644);
    PosixAcl named({{PosixAcl::kUserObj, 6, PosixAcl::kUndefinedId},
                    {PosixAcl::kUser, 4, 2000},
                    {PosixAcl::kGroupObj, 4, PosixAcl::kUndefinedId},
                    {PosixAcl::kMask, 6, PosixAcl::kUndefinedId},
                    {PosixAcl::kOther, 0, PosixAcl::kUndefinedId}});
    REQUIRE(vfs.setxattr(user, f.ino, vfs::kAclAccessXattr, named.serialize(), 0).is_ok());
    Attr a;
    REQUIRE(vfs.getattr(f.ino, &a).is_ok());
    CHECK((a.mode & 0777) == 0660);

    REQUIRE(
        vfs.setxattr(user, f.ino, vfs::kAclAccessXattr, PosixAcl::from_mode(0600).serialize(), 0)
            .is_ok());
    REQUIRE(vfs.getattr(f.ino, &a).is_ok());
    CHECK((a.mode & 0777) == 0600);
    std::string value;
    CHECK(vfs.getxattr(f.ino, vfs::kAclAccessXattr, &value).err() == ENODATA);

    CHECK(vfs.setxattr(user, f.ino, vfs::kAclAccessXattr, "junk", 0).err() == EINVAL);
}

TEST_CASE_METHOD(Fixture, "an ACL set by someone outside the file's group drops S_ISGID") {
    Attr f = mkfile("f", kRootInode, 0755);
    SetAttr change;
    change.valid = SetAttr::kMode | SetAttr::kGid;
    change.mode = S_IFREG | S_ISGID | 0755;
    change.gid = 50;
    REQUIRE(vfs.setattr(f.ino, change, &f).is_ok());
    REQUIRE(
        vfs.setxattr(user, f.ino, vfs::kAclAccessXattr, PosixAcl::from_mode(0750).serialize(), 0)
            .is_ok());
    Attr a;
    REQUIRE(vfs.getattr(f.ino, &a).is_ok());
    CHECK(a.mode == (S_IFREG | 0750));

    REQUIRE(vfs.setattr(f.ino, change, &f).is_ok());
    Caller member = user;
    member.in_group = [](std::uint32_t gid) { return gid == 50; };
    REQUIRE(
        vfs.setxattr(member, f.ino, vfs::kAclAccessXattr, PosixAcl::from_mode(0750).serialize(), 0)
            .is_ok());
    REQUIRE(vfs.getattr(f.ino, &a).is_ok());
    CHECK(a.mode == (S_IFREG | S_ISGID | 0750));
}

TEST_CASE_METHOD(Fixture, "O_APPEND without the writeback cache writes at the end") {
    Attr f = mkfile("f");
    std::uint64_t a = 0, b = 0;
    REQUIRE(vfs.open(f.ino, O_WRONLY | O_APPEND, &a).is_ok());
    REQUIRE(vfs.open(f.ino, O_WRONLY | O_APPEND, &b).is_ok());
    REQUIRE(vfs.write(a, f.ino, 0, "aaa", 3).is_ok());
    REQUIRE(vfs.write(b, f.ino, 0, "bbb", 3).is_ok());  // the kernel's stale offset
    REQUIRE(vfs.write(a, f.ino, 3, "ccc", 3).is_ok());
    CHECK(contents(f.ino) == "aaabbbccc");
    REQUIRE(vfs.release(a).is_ok());
    REQUIRE(vfs.release(b).is_ok());
}

TEST_CASE_METHOD(Fixture, "with the writeback cache the kernel's offsets stand") {
    vfs.set_options({.writeback_cache = true, .posix_acl = true});
    Attr f = mkfile("f");
    std::uint64_t a = 0;
    REQUIRE(vfs.open(f.ino, O_WRONLY | O_APPEND, &a).is_ok());
    REQUIRE(vfs.write(a, f.ino, 0, "aaa", 3).is_ok());
    REQUIRE(vfs.write(a, f.ino, 0, "b", 1).is_ok());
    CHECK(contents(f.ino) == "baa");
    // Dirty pages may not have reached the engine: the kernel must answer.
    std::uint64_t pos = 0;
    CHECK(vfs.lseek(f.ino, 0, SEEK_DATA, &pos).err() == ENOSYS);
    REQUIRE(vfs.release(a).is_ok());
}

TEST_CASE_METHOD(Fixture, "O_TRUNC on open empties the file") {
    Attr f = mkfile("f");
    std::uint64_t fh = 0;
    REQUIRE(vfs.open(f.ino, O_WRONLY, &fh).is_ok());
    REQUIRE(vfs.write(fh, f.ino, 0, "12345", 5).is_ok());
    REQUIRE(vfs.release(fh).is_ok());
    REQUIRE(vfs.open(f.ino, O_WRONLY | O_TRUNC, &fh).is_ok());
    Attr a;
    REQUIRE(vfs.getattr(f.ino, &a).is_ok());
    CHECK(a.size == 0);
    REQUIRE(vfs.release(fh).is_ok());
}

TEST_CASE_METHOD(Fixture, "copy_file_range clones; lseek takes only SEEK_DATA and SEEK_HOLE") {
    Attr src = mkfile("src"), dst = mkfile("dst");
    std::string data(300000, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 251);
    std::uint64_t fh = 0;
    REQUIRE(vfs.open(src.ino, O_WRONLY, &fh).is_ok());
    REQUIRE(vfs.write(fh, src.ino, 0, data.data(), data.size()).is_ok());
    REQUIRE(vfs.release(fh).is_ok());
    std::uint64_t copied = 0;
    REQUIRE(vfs.copy_file_range(src.ino, 0, dst.ino, 0, 1ull << 40, 0, &copied).is_ok());
    CHECK(copied == data.size());
    CHECK(contents(dst.ino) == data);
    CHECK(vfs.copy_file_range(src.ino, 0, dst.ino, 0, 10, 1, &copied).err() == EINVAL);

    std::uint64_t pos = 0;
    REQUIRE(vfs.lseek(src.ino, 0, SEEK_DATA, &pos).is_ok());
    CHECK(pos == 0);
    REQUIRE(vfs.lseek(src.ino, 0, SEEK_HOLE, &pos).is_ok());
    CHECK(pos == data.size());
    CHECK(vfs.lseek(src.ino, 0, SEEK_END, &pos).err() == EINVAL);
    CHECK(vfs.lseek(src.ino, data.size() + 1, SEEK_DATA, &pos).err() == ENXIO);
}

TEST_CASE_METHOD(Fixture, "statfs reports the backing file system") {
    FsStats s;
    REQUIRE(vfs.statfs(&s).is_ok());
    CHECK(s.blocks > 0);
    CHECK(s.name_max == 255);
}

TEST_CASE_METHOD(Fixture, "xattrs outside user, trusted, security and the ACLs are EOPNOTSUPP") {
    Attr f = mkfile("f");
    CHECK(vfs.setxattr(user, f.ino, "user.a", "1", 0).is_ok());
    CHECK(vfs.setxattr(user, f.ino, "trusted.t", "1", 0).is_ok());
    CHECK(vfs.setxattr(user, f.ino, "security.s", "1", 0).is_ok());
    std::string value;
    for (const char* bad : {"bogus.ns", "system.nfs4_acl", "user.", "user", "os2.x"}) {
        INFO(bad);
        CHECK(vfs.setxattr(user, f.ino, bad, "1", 0).err() == EOPNOTSUPP);
        CHECK(vfs.getxattr(f.ino, bad, &value).err() == EOPNOTSUPP);
        CHECK(vfs.removexattr(f.ino, bad).err() == EOPNOTSUPP);
    }
    std::vector<std::string> names;
    REQUIRE(vfs.listxattr(f.ino, &names).is_ok());
    CHECK(names.size() == 3);
}

TEST_CASE("files opened for writing bypass the writeback cache only when the store is nearly full") {
    test::TempStore dir;
    {
        // Far from full (no reserve, and the temporary directory has more
        // than 64 MiB free): the cache stays.
        auto e = dir.open(0);
        REQUIRE(e->data_room() >= Vfs::kWriteThroughRoom);
        Vfs v{*e, {.writeback_cache = true, .posix_acl = false}};
        CHECK_FALSE(v.write_through(O_WRONLY));
        CHECK_FALSE(v.write_through(O_RDWR | O_TRUNC));
        REQUIRE(e->close().is_ok());
    }
    // A reserve larger than the disk: no room left for file data.
    auto e = dir.open(UINT64_MAX - 1);
    CHECK(e->data_room() == 0);
    Vfs v{*e, {.writeback_cache = true, .posix_acl = false}};
    CHECK(v.write_through(O_WRONLY));
    CHECK(v.write_through(O_RDWR));
    CHECK(v.write_through(O_WRONLY | O_APPEND | O_CREAT));
    CHECK_FALSE(v.write_through(O_RDONLY));  // reading needs no check
    // Without the writeback cache every write reaches the engine anyway.
    Vfs direct{*e, {.writeback_cache = false, .posix_acl = false}};
    CHECK_FALSE(direct.write_through(O_WRONLY));
    // And the engine refuses file data, but not the namespace.
    Attr a;
    REQUIRE(v.mknod(Caller{}, kRootInode, "f", S_IFREG | 0644, 0, &a).is_ok());
    CHECK(e->write(a.ino, 0, "x", 1).err() == ENOSPC);
    REQUIRE(e->close().is_ok());
}
