#include "vfs/vfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "vfs/posix_acl.h"

namespace hiodsfs::vfs {

namespace {

Status check_name(std::string_view name) {
    if (name.empty()) return Status::error(ENOENT, "empty file name");
    // The engine's limit; FUSE itself lets up to 1024 bytes through.
    if (name.size() > Vfs::kNameMax) return Status::error(ENAMETOOLONG, "file name too long");
    return Status::ok();
}

bool in_group(const Caller& caller, std::uint32_t gid) {
    return caller.gid == gid || (caller.in_group && caller.in_group(gid));
}

// Engines answer a missing xattr with ENODATA; a missing ACL is no error.
bool is_no_data(const Status& st) { return st.err() == ENODATA; }

// FUSE passes every xattr name through; local file systems know four
// namespaces (and in system.* only the ACLs) and refuse the rest.
Status check_xattr_name(std::string_view name) {
    for (std::string_view ns : {"user.", "trusted.", "security."})
        if (name.size() > ns.size() && name.substr(0, ns.size()) == ns) return Status::ok();
    if (name == kAclAccessXattr || name == kAclDefaultXattr) return Status::ok();
    return Status::error(EOPNOTSUPP, "unsupported xattr namespace");
}

}  // namespace

Vfs::Vfs(Engine& engine, VfsOptions options) : engine_(engine), options_(options) {}

// The root is never unlinked and the kernel holds it without a lookup
// count, so it takes no part in pinning.
void Vfs::pin(InodeId ino) {
    if (ino == kRootInode) return;
    pins_.add(ino, 1);
    engine_.pin(ino, 1);
}

void Vfs::unpin(InodeId ino, std::uint64_t n) {
    std::uint64_t held = pins_.take(ino, n);
    if (held > 0) engine_.unpin(ino, held);
}

void Vfs::unpin_all() {
    for (const auto& [ino, n] : pins_.take_all()) engine_.unpin(ino, n);
}

Status Vfs::lookup(InodeId parent, std::string_view name, Attr* out) {
    HIODSFS_TRY(check_name(name));
    // The kernel resolves "." and ".." itself except when reconnecting
    // exported file handles; the engine has no such entries.
    if (name == "." || name == "..") {
        InodeId target = parent;
        if (name == "..") HIODSFS_TRY(engine_.parent_of(parent, &target));
        HIODSFS_TRY(engine_.getattr(target, out));
    } else {
        HIODSFS_TRY(engine_.lookup(parent, name, out));
    }
    pin(out->ino);
    return Status::ok();
}

void Vfs::forget(InodeId ino, std::uint64_t nlookup) { unpin(ino, nlookup); }

Status Vfs::getattr(InodeId ino, Attr* out) { return engine_.getattr(ino, out); }

Status Vfs::setattr(InodeId ino, const SetAttr& changes, Attr* out) {
    HIODSFS_TRY(engine_.setattr(ino, changes, out));
    if (!(changes.valid & SetAttr::kMode) || !options_.posix_acl) return Status::ok();
    // chmod rewrites the access ACL's owner, mask and other entries.
    std::string value;
    Status st = engine_.getxattr(ino, kAclAccessXattr, &value);
    if (is_no_data(st)) return Status::ok();
    HIODSFS_TRY(st);
    PosixAcl acl;
    if (!PosixAcl::parse(value, &acl).is_ok())
        return Status::error(EIO,
                             "stored access ACL of inode " + std::to_string(ino) + " is corrupt");
    if (acl.empty()) return Status::ok();
    acl.apply_chmod(out->mode);
    return engine_.setxattr(ino, kAclAccessXattr, acl.serialize(), 0);
}

Status Vfs::drop_setid(const Caller& caller, InodeId ino) {
    Attr a;
    HIODSFS_TRY(engine_.getattr(ino, &a));
    if (S_ISDIR(a.mode) || !(a.mode & (S_ISUID | S_ISGID))) return Status::ok();
    std::uint32_t drop = S_ISUID;
    // The kernel flags a chown by root too; root counts as in every group.
    if ((a.mode & S_ISGID) && ((a.mode & S_IXGRP) || (caller.uid != 0 && !in_group(caller, a.gid))))
        drop |= S_ISGID;
    if (!(a.mode & drop)) return Status::ok();
    SetAttr c;
    c.valid = SetAttr::kMode;
    c.mode = a.mode & 07777 & ~drop;
    return setattr(ino, c, &a);
}

Status Vfs::prepare_node(const Caller& caller, InodeId parent, std::uint32_t mode, NewNode* node) {
    Attr dir;
    HIODSFS_TRY(engine_.getattr(parent, &dir));
    if (!S_ISDIR(dir.mode)) return Status::error(ENOTDIR, "parent is not a directory");
    node->uid = caller.uid;
    node->gid = caller.gid;
    if (dir.mode & S_ISGID) {
        node->gid = dir.gid;
        if (S_ISDIR(mode)) mode |= S_ISGID;
    }
    if (S_ISLNK(mode)) {
        node->mode = mode;
        return Status::ok();
    }
    bool inherited = false;
    if (options_.posix_acl) {
        std::string value;
        Status st = engine_.getxattr(parent, kAclDefaultXattr, &value);
        if (!is_no_data(st)) {
            HIODSFS_TRY(st);
            PosixAcl def;
            if (!PosixAcl::parse(value, &def).is_ok())
                return Status::error(
                    EIO, "stored default ACL of inode " + std::to_string(parent) + " is corrupt");
            if (!def.empty()) {
                // A default ACL replaces the umask (POSIX.1e); the node's
                // access ACL is the default masked by the requested mode.
                PosixAcl access = def;
                if (access.apply_create_mode(&mode))
                    node->xattrs.emplace_back(kAclAccessXattr, access.serialize());
                if (S_ISDIR(mode)) node->xattrs.emplace_back(kAclDefaultXattr, def.serialize());
                inherited = true;
            }
        }
    }
    if (!inherited) mode &= ~(caller.umask & 0777u);
    node->mode = mode;
    return Status::ok();
}

Status Vfs::create_node(const Caller& caller, InodeId parent, std::string_view name,
                        std::uint32_t mode, std::uint64_t rdev, std::string_view target,
                        Attr* out) {
    HIODSFS_TRY(check_name(name));
    NewNode node;
    HIODSFS_TRY(prepare_node(caller, parent, mode, &node));
    node.rdev = rdev;
    node.symlink_target = std::string(target);
    HIODSFS_TRY(engine_.create(parent, name, node, out));
    pin(out->ino);
    return Status::ok();
}

Status Vfs::mknod(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                  std::uint64_t rdev, Attr* out) {
    std::uint32_t type = mode & S_IFMT;
    if (type == 0) type = S_IFREG;  // mknod(2): a zero type means a regular file
    if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
        type != S_IFBLK)
        return Status::error(EINVAL, "mknod of an unsupported file type");
    bool device = type == S_IFCHR || type == S_IFBLK;
    return create_node(caller, parent, name, type | (mode & 07777u), device ? rdev : 0, {}, out);
}

Status Vfs::mkdir(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                  Attr* out) {
    return create_node(caller, parent, name, S_IFDIR | (mode & 07777u), 0, {}, out);
}

Status Vfs::symlink(const Caller& caller, InodeId parent, std::string_view name,
                    std::string_view target, Attr* out) {
    if (target.empty()) return Status::error(ENOENT, "empty symlink target");
    return create_node(caller, parent, name, S_IFLNK | 0777u, 0, target, out);
}

Status Vfs::link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out) {
    HIODSFS_TRY(check_name(new_name));
    HIODSFS_TRY(engine_.link(ino, new_parent, new_name, out));
    pin(out->ino);
    return Status::ok();
}

Status Vfs::unlink(InodeId parent, std::string_view name) {
    HIODSFS_TRY(check_name(name));
    return engine_.unlink(parent, name);
}

Status Vfs::rmdir(InodeId parent, std::string_view name) {
    HIODSFS_TRY(check_name(name));
    return engine_.rmdir(parent, name);
}

Status Vfs::rename(InodeId parent, std::string_view name, InodeId new_parent,
                   std::string_view new_name, unsigned flags) {
    HIODSFS_TRY(check_name(name));
    HIODSFS_TRY(check_name(new_name));
    // RENAME_WHITEOUT belongs to overlay/union file systems; and the two
    // supported flags exclude each other.
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
        return Status::error(EINVAL, "unsupported rename flags");
    if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
        return Status::error(EINVAL, "RENAME_NOREPLACE and RENAME_EXCHANGE together");
    return engine_.rename(parent, name, new_parent, new_name, flags);
}

Status Vfs::readlink(InodeId ino, std::string* target) { return engine_.readlink(ino, target); }

Status Vfs::create(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                   int flags, Attr* out, std::uint64_t* fh) {
    // The kernel holds the directory locked from its negative lookup to
    // here, so EEXIST only means O_EXCL lost a race and is the right answer.
    HIODSFS_TRY(create_node(caller, parent, name, S_IFREG | (mode & 07777u), 0, {}, out));
    Status st = open_handle(out->ino, flags & ~O_TRUNC, fh);
    if (!st.is_ok()) unpin(out->ino, 1);
    return st;
}

Status Vfs::open(InodeId ino, int flags, std::uint64_t* fh) { return open_handle(ino, flags, fh); }

bool Vfs::write_through(int flags) {
    // Without the writeback cache every write(2) reaches the engine already.
    if (!options_.writeback_cache || (flags & O_ACCMODE) == O_RDONLY) return false;
    return engine_.data_room() < kWriteThroughRoom;
}

Status Vfs::open_handle(InodeId ino, int flags, std::uint64_t* fh) {
    // With FUSE_CAP_ATOMIC_O_TRUNC the kernel leaves O_TRUNC to open.
    if (flags & O_TRUNC) {
        SetAttr trunc;
        trunc.valid = SetAttr::kSize | SetAttr::kMtimeNow;
        trunc.size = 0;
        Attr attr;
        HIODSFS_TRY(engine_.setattr(ino, trunc, &attr));
    }
    pin(ino);
    *fh = files_.insert(
        std::make_shared<OpenFile>(OpenFile{ino, flags, engine_.write_error_cursor(ino)}));
    return Status::ok();
}

Status Vfs::flush(std::uint64_t fh, InodeId ino) {
    std::shared_ptr<OpenFile> file = files_.get(fh);
    if (!file) return Status::error(EBADF, "flush of an unknown file handle");
    // A reader has nothing of its own to write, and its close must not
    // take a lost write's error from the writers (Linux tells it at close
    // only to those who wrote through the file).
    if ((file->flags & O_ACCMODE) == O_RDONLY) return Status::ok();
    return engine_.flush(ino, &file->seen);
}

Status Vfs::release(std::uint64_t fh) {
    std::shared_ptr<OpenFile> file = files_.remove(fh);
    if (!file) return Status::error(EBADF, "release of an unknown file handle");
    Status st;
    if ((file->flags & O_ACCMODE) != O_RDONLY) st = engine_.flush(file->ino, &file->seen);
    unpin(file->ino, 1);
    return st;
}

Status Vfs::read(InodeId ino, std::uint64_t offset, std::size_t size, void* buf, std::size_t* got) {
    return engine_.read(ino, offset, size, buf, got);
}

Status Vfs::write(std::uint64_t fh, InodeId ino, std::uint64_t offset, const void* data,
                  std::size_t len, bool writeback) {
    if (!options_.writeback_cache) {
        std::shared_ptr<OpenFile> file = files_.get(fh);
        if (file && (file->flags & O_APPEND)) {
            // The kernel's idea of the size may be stale; the engine's is not.
            std::lock_guard lock(append_lock(ino));
            Attr attr;
            HIODSFS_TRY(engine_.getattr(ino, &attr));
            return engine_.write(ino, attr.size, data, len);
        }
    }
    // The cache stamped mtime and ctime when write(2) ran; stamping them
    // again here, later, would make them move at the next mount (a truncate
    // and a write in the same clock tick send no times after the write).
    const bool kernel_times = writeback && options_.writeback_cache;
    return engine_.write(ino, offset, data, len,
                         kernel_times ? WriteTimes::kKeep : WriteTimes::kSet);
}

Status Vfs::fsync(std::uint64_t fh, InodeId ino, bool datasync) {
    std::shared_ptr<OpenFile> file = files_.get(fh);
    if (!file) return Status::error(EBADF, "fsync of an unknown file handle");
    return engine_.fsync(ino, datasync, &file->seen);
}

Status Vfs::fsyncdir(InodeId ino, bool datasync) { return engine_.fsync(ino, datasync); }

Status Vfs::fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len) {
    return engine_.fallocate(ino, mode, offset, len);
}

Status Vfs::lseek(InodeId ino, std::uint64_t offset, int whence, std::uint64_t* out) {
    // The kernel sends FUSE_LSEEK without writing back dirty pages first,
    // so with the writeback cache the engine would call unwritten data a
    // hole (and cp would copy zeros). ENOSYS makes the kernel answer from
    // its own size for this connection: all data, no holes.
    if (options_.writeback_cache)
        return Status::error(ENOSYS, "SEEK_DATA/SEEK_HOLE with the writeback cache");
    if (whence != SEEK_DATA && whence != SEEK_HOLE)
        return Status::error(EINVAL, "lseek whence other than SEEK_DATA/SEEK_HOLE");
    return engine_.seek(ino, offset, whence == SEEK_DATA ? SeekWhence::kData : SeekWhence::kHole,
                        out);
}

Status Vfs::copy_file_range(InodeId src, std::uint64_t src_off, InodeId dst, std::uint64_t dst_off,
                            std::uint64_t len, unsigned flags, std::uint64_t* copied) {
    if (flags != 0) return Status::error(EINVAL, "copy_file_range flags must be 0");
    Status st = engine_.clone_range(src, src_off, dst, dst_off, len, copied);
    if (st.err() == EOPNOTSUPP || st.err() == ENOSYS || st.err() == EXDEV)
        return copy_through(src, src_off, dst, dst_off, len, copied);
    return st;
}

Status Vfs::copy_through(InodeId src, std::uint64_t src_off, InodeId dst, std::uint64_t dst_off,
                         std::uint64_t len, std::uint64_t* copied) {
    constexpr std::size_t kBuf = 1 << 20;
    std::vector<char> buf(static_cast<std::size_t>(std::min<std::uint64_t>(len, kBuf)));
    std::uint64_t done = 0;
    while (done < len) {
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, kBuf));
        std::size_t got = 0;
        Status st = engine_.read(src, src_off + done, want, buf.data(), &got);
        if (st.is_ok() && got > 0) st = engine_.write(dst, dst_off + done, buf.data(), got);
        if (!st.is_ok()) {
            // Like write(2): report what was done, the error only if nothing was.
            if (done == 0) return st;
            break;
        }
        if (got == 0) break;
        done += got;
    }
    *copied = done;
    return Status::ok();
}

Status Vfs::opendir(InodeId ino, std::uint64_t* fh) {
    auto dir = std::make_shared<OpenDir>();
    dir->ino = ino;
    HIODSFS_TRY(snapshot(dir.get()));
    pin(ino);
    *fh = dirs_.insert(std::move(dir));
    return Status::ok();
}

Status Vfs::snapshot(OpenDir* dir) {
    std::vector<DirEntry> listed;
    Status st = engine_.readdir(dir->ino, &listed);
    if (st.err() == ENOENT) {
        // Removed while open: reads as empty, as on local file systems.
        dir->entries.clear();
        return Status::ok();
    }
    HIODSFS_TRY(st);
    InodeId parent = dir->ino;
    if (!engine_.parent_of(dir->ino, &parent).is_ok()) parent = dir->ino;
    std::vector<DirEntry> entries;
    entries.reserve(listed.size() + 2);
    entries.push_back(DirEntry{".", dir->ino, S_IFDIR});
    entries.push_back(DirEntry{"..", parent, S_IFDIR});
    std::move(listed.begin(), listed.end(), std::back_inserter(entries));
    dir->entries = std::move(entries);
    return Status::ok();
}

Status Vfs::readdir(std::uint64_t fh, std::uint64_t offset, bool plus,
                    const std::function<bool(const DirItem&)>& emit) {
    std::shared_ptr<OpenDir> dir = dirs_.get(fh);
    if (!dir) return Status::error(EBADF, "readdir of an unknown directory handle");
    std::lock_guard lock(dir->mu);
    // Offset 0 after reading is rewinddir(): POSIX wants current contents.
    if (offset == 0 && dir->started) HIODSFS_TRY(snapshot(dir.get()));
    dir->started = true;
    bool emitted = false;
    for (std::size_t i = static_cast<std::size_t>(offset); i < dir->entries.size(); ++i) {
        const DirEntry& e = dir->entries[i];
        DirItem item{e.name, e.ino, e.type, i + 1, nullptr};
        Attr attr;
        bool dot = e.name == "." || e.name == "..";
        if (plus && !dot) {
            // Look the name up now rather than trusting the snapshot's inode,
            // so the dentry the kernel builds matches the current directory.
            Status st = engine_.lookup(dir->ino, e.name, &attr);
            if (st.is_ok()) {
                item.attr = &attr;
                item.ino = attr.ino;
                item.type = attr.mode & S_IFMT;
            } else if (st.err() != ENOENT) {
                // What was emitted is still worth replying; the next call
                // reports the error.
                return emitted ? Status::ok() : st;
            }
        }
        if (!emit(item)) break;
        emitted = true;
        if (item.attr) pin(item.ino);
    }
    return Status::ok();
}

Status Vfs::releasedir(std::uint64_t fh) {
    std::shared_ptr<OpenDir> dir = dirs_.remove(fh);
    if (!dir) return Status::error(EBADF, "releasedir of an unknown directory handle");
    unpin(dir->ino, 1);
    return Status::ok();
}

Status Vfs::statfs(FsStats* out) { return engine_.statfs(out); }

Status Vfs::setxattr(const Caller& caller, InodeId ino, std::string_view name,
                     std::string_view value, int flags) {
    HIODSFS_TRY(check_xattr_name(name));
    if (options_.posix_acl) {
        if (name == kAclAccessXattr) return set_access_acl(caller, ino, value, flags);
        if (name == kAclDefaultXattr) {
            PosixAcl acl;
            HIODSFS_TRY(PosixAcl::parse(value, &acl));
            if (acl.empty()) {
                Status st = engine_.removexattr(ino, name);
                return is_no_data(st) ? Status::ok() : st;
            }
            return engine_.setxattr(ino, name, acl.serialize(), flags);
        }
    }
    return engine_.setxattr(ino, name, value, flags);
}

// What posix_acl_update_mode() does for local file systems; the FUSE kernel
// module leaves it to the file system.
Status Vfs::set_access_acl(const Caller& caller, InodeId ino, std::string_view value, int flags) {
    PosixAcl acl;
    HIODSFS_TRY(PosixAcl::parse(value, &acl));
    Attr attr;
    HIODSFS_TRY(engine_.getattr(ino, &attr));
    std::uint32_t mode = attr.mode;
    bool equivalent = acl.empty() || acl.equivalent_mode(&mode);
    // Only a member of the file's group (or root) may leave S_ISGID set.
    if ((mode & S_ISGID) && caller.uid != 0 && !in_group(caller, attr.gid)) mode &= ~S_ISGID;
    if (mode != attr.mode) {
        SetAttr change;
        change.valid = SetAttr::kMode;
        change.mode = mode;
        Attr after;
        HIODSFS_TRY(engine_.setattr(ino, change, &after));
    }
    // An ACL the mode fully expresses is not stored, as on ext4 or xfs.
    if (equivalent) {
        Status st = engine_.removexattr(ino, kAclAccessXattr);
        return is_no_data(st) ? Status::ok() : st;
    }
    return engine_.setxattr(ino, kAclAccessXattr, acl.serialize(), flags);
}

Status Vfs::getxattr(InodeId ino, std::string_view name, std::string* value) {
    HIODSFS_TRY(check_xattr_name(name));
    return engine_.getxattr(ino, name, value);
}

Status Vfs::listxattr(InodeId ino, std::vector<std::string>* names) {
    return engine_.listxattr(ino, names);
}

Status Vfs::removexattr(InodeId ino, std::string_view name) {
    HIODSFS_TRY(check_xattr_name(name));
    return engine_.removexattr(ino, name);
}

}  // namespace hiodsfs::vfs
