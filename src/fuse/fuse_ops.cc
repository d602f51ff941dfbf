#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "common/log_limiter.h"
#include "fuse/kernel_channel.h"

namespace hiodsfs::fuse {

namespace {

FuseState& state(fuse_req_t req) { return *static_cast<FuseState*>(fuse_req_userdata(req)); }
vfs::Vfs& vfs_of(fuse_req_t req) { return *state(req).vfs; }

// Runs one operation; an exception becomes the errno reply (the bodies
// reply last, so nothing can throw after a reply has gone out). libfuse
// disables thread cancellation while a request runs, so no forced unwind
// passes through here.
template <typename Body>
void guarded(fuse_req_t req, Body&& body) noexcept {
    try {
        body();
    } catch (const std::bad_alloc&) {
        fuse_reply_err(req, ENOMEM);
    } catch (const std::exception& e) {
        fuse_log(FUSE_LOG_ERR, "hiodsfs: internal error: %s\n", e.what());
        fuse_reply_err(req, EIO);
    } catch (...) {
        fuse_reply_err(req, EIO);
    }
}

// For forget, which has no reply but fuse_reply_none.
template <typename Body>
void guarded_none(fuse_req_t req, Body&& body) noexcept {
    try {
        body();
    } catch (...) {
    }
    fuse_reply_none(req);
}

int errno_of(const Status& st) {
    if (st.is_ok()) return 0;
    int err = st.err() > 0 ? st.err() : EIO;
    // Errors that mean "something is broken" go to the log with the
    // engine's words; the usual ones (ENOENT, EEXIST, ...) do not. A line
    // repeated within 10 s is counted, and the count logged with the next.
    if (err == EIO || err == EUCLEAN || err == ENOMEM || err == EFBIG) {
        static LogLimiter limiter;
        const std::string line = st.to_string();
        std::uint64_t held = 0;
        if (limiter.admit(line, LogLimiter::Clock::now(), &held)) {
            if (held > 0)
                fuse_log(FUSE_LOG_ERR, "hiodsfs: (the error before was answered %llu more times, not logged)\n",
                         static_cast<unsigned long long>(held));
            fuse_log(FUSE_LOG_ERR, "hiodsfs: %s\n", line.c_str());
        }
    }
    return err;
}

void reply_status(fuse_req_t req, const Status& st) { fuse_reply_err(req, errno_of(st)); }
void reply_err(fuse_req_t req, int err) { fuse_reply_err(req, err); }

struct stat to_stat(const Attr& a) {
    struct stat st {};
    st.st_ino = a.ino;
    st.st_mode = a.mode;
    st.st_nlink = a.nlink;
    st.st_uid = a.uid;
    st.st_gid = a.gid;
    st.st_rdev = a.rdev;
    st.st_size = static_cast<off_t>(a.size);
    st.st_blocks = static_cast<blkcnt_t>(a.blocks);
    st.st_atim = a.atime;
    st.st_mtim = a.mtime;
    st.st_ctim = a.ctime;
    return st;
}

fuse_entry_param to_entry(const FuseState& s, const Attr& a) {
    fuse_entry_param e{};
    e.ino = a.ino;
    e.generation = a.generation;
    e.attr = to_stat(a);
    e.attr_timeout = s.settings.attr_timeout;
    e.entry_timeout = s.settings.entry_timeout;
    return e;
}

// The new kernel reference was pinned by the Vfs; if the kernel never got
// the reply (interrupted request), it will never forget it either.
void reply_entry(fuse_req_t req, const Attr& a) {
    fuse_entry_param e = to_entry(state(req), a);
    if (fuse_reply_entry(req, &e) != 0) vfs_of(req).forget(a.ino, 1);
}

// The caller's /proc/PID/task/PID/status, read whole ("" when it is gone).
// libfuse's fuse_req_getgroups reads that file into a fixed buffer and
// searches it as a C string without terminating it (ASan reports the
// over-read when the file fills the buffer).
std::string caller_status(fuse_req_t req) {
    const pid_t pid = fuse_req_ctx(req)->pid;
    const std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/status";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    return text;
}

// The value of one "Name:" line of a status text ("" if it has none).
std::string status_line(const std::string& text, const char* name) {
    const std::string key = std::string("\n") + name + ":";
    const std::size_t at = text.find(key);
    if (at == std::string::npos) return "";
    const std::size_t end = text.find('\n', at + 1);
    return text.substr(at + key.size(),
                       end == std::string::npos ? std::string::npos : end - at - key.size());
}

// The caller's supplementary groups.
bool caller_in_group(fuse_req_t req, std::uint32_t gid) {
    std::istringstream groups(status_line(caller_status(req), "Groups"));
    for (unsigned long g; groups >> g;)
        if (g == gid) return true;
    return false;
}

// Whether the caller holds CAP_FSETID (the right to keep set-id bits when
// it changes a file), from its effective capabilities; a caller that is
// gone is taken not to.
bool caller_has_fsetid(fuse_req_t req) {
    const std::string caps = status_line(caller_status(req), "CapEff");
    const unsigned long long bits = std::strtoull(caps.c_str(), nullptr, 16);
    return (bits >> CAP_FSETID) & 1;
}

vfs::Caller caller_of(fuse_req_t req) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    vfs::Caller c;
    c.uid = ctx->uid;
    c.gid = ctx->gid;
    // Without FUSE_CAP_DONT_MASK the kernel has applied the umask already.
    c.umask = state(req).dont_mask ? ctx->umask : 0;
    c.in_group = [req](std::uint32_t gid) { return caller_in_group(req, gid); };
    return c;
}

// A WRITE, SETATTR or OPEN(O_TRUNC) the kernel flagged to kill setuid and
// setgid (FUSE_HANDLE_KILLPRIV_V2: the caller lacks CAP_FSETID).
Status drop_setid_if_asked(fuse_req_t req, fuse_ino_t ino) {
    if (!current_request().kill_suidgid) return Status::ok();
    return vfs_of(req).drop_setid(caller_of(req), ino);
}

// FALLOCATE and COPY_FILE_RANGE change a file's content as WRITE does, but
// the kernel flags neither to kill set-id bits (it leaves that to us with
// FUSE_HANDLE_KILLPRIV_V2): the same rule, with the caller's CAP_FSETID
// looked up here where a write's flag says the kernel checked it.
Status drop_setid_on_change(fuse_req_t req, fuse_ino_t ino) {
    if (caller_has_fsetid(req)) return Status::ok();
    return vfs_of(req).drop_setid(caller_of(req), ino);
}

void op_init(void* userdata, fuse_conn_info* conn) {
    auto& s = *static_cast<FuseState*>(userdata);
    // Clearing S_ISUID/S_ISGID on write, truncate and chown: with
    // FUSE_HANDLE_KILLPRIV_V2, which KernelChannel asks for, the kernel
    // flags the requests that must do it; otherwise it sends the mode
    // change itself. The first version of the flag is not wanted.
    conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
    // Splice only pays off when measured; plain buffers are simpler.
    conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
    // Without a lock implementation the kernel keeps flock and fcntl locks
    // itself, which is right for a single-host file system.
    conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
    if (conn->capable & FUSE_CAP_DONT_MASK) {
        conn->want |= FUSE_CAP_DONT_MASK;
        s.dont_mask = true;
    }
    if (conn->capable & FUSE_CAP_POSIX_ACL) {
        conn->want |= FUSE_CAP_POSIX_ACL;
        s.posix_acl = true;
    }
    if (s.settings.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
        s.writeback_cache = true;
    } else {
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
        s.writeback_cache = false;
    }
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    conn->max_write = std::min(conn->max_write, s.settings.max_write);
    vfs::VfsOptions vo;
    vo.writeback_cache = s.writeback_cache;
    vo.posix_acl = s.posix_acl;
    s.vfs->set_options(vo);
    s.initialized = true;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).lookup(parent, name, &a);
        if (st.err() == ENOENT) {
            // A negative entry lets the kernel cache the miss; every change
            // to the namespace goes through this kernel, so it stays true.
            fuse_entry_param e{};
            e.entry_timeout = state(req).settings.entry_timeout;
            fuse_reply_entry(req, &e);
        } else if (!st.is_ok()) {
            reply_status(req, st);
        } else {
            reply_entry(req, a);
        }
    });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    guarded_none(req, [&] { vfs_of(req).forget(ino, nlookup); });
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
    guarded_none(req, [&] {
        for (size_t i = 0; i < count; ++i) vfs_of(req).forget(forgets[i].ino, forgets[i].nlookup);
    });
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).getattr(ino, &a);
        if (!st.is_ok()) return reply_status(req, st);
        struct stat sb = to_stat(a);
        fuse_reply_attr(req, &sb, state(req).settings.attr_timeout);
    });
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
    guarded(req, [&] {
        SetAttr c;
        if (to_set & FUSE_SET_ATTR_MODE) {
            c.valid |= SetAttr::kMode;
            c.mode = attr->st_mode;
        }
        if (to_set & FUSE_SET_ATTR_UID) {
            c.valid |= SetAttr::kUid;
            c.uid = attr->st_uid;
        }
        if (to_set & FUSE_SET_ATTR_GID) {
            c.valid |= SetAttr::kGid;
            c.gid = attr->st_gid;
        }
        if (to_set & FUSE_SET_ATTR_SIZE) {
            if (attr->st_size < 0) return reply_err(req, EINVAL);
            c.valid |= SetAttr::kSize;
            c.size = static_cast<std::uint64_t>(attr->st_size);
        }
        if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
            c.valid |= SetAttr::kAtimeNow;
        } else if (to_set & FUSE_SET_ATTR_ATIME) {
            c.valid |= SetAttr::kAtime;
            c.atime = attr->st_atim;
        }
        if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
            c.valid |= SetAttr::kMtimeNow;
        } else if (to_set & FUSE_SET_ATTR_MTIME) {
            c.valid |= SetAttr::kMtime;
            c.mtime = attr->st_mtim;
        }
        if (to_set & FUSE_SET_ATTR_CTIME) {
            c.valid |= SetAttr::kCtime;
            c.ctime = attr->st_ctim;
        }
        Attr a;
        Status st = drop_setid_if_asked(req, ino);
        if (st.is_ok()) st = vfs_of(req).setattr(ino, c, &a);
        if (!st.is_ok()) return reply_status(req, st);
        struct stat sb = to_stat(a);
        fuse_reply_attr(req, &sb, state(req).settings.attr_timeout);
    });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
    guarded(req, [&] {
        std::string target;
        Status st = vfs_of(req).readlink(ino, &target);
        if (!st.is_ok()) return reply_status(req, st);
        fuse_reply_readlink(req, target.c_str());
    });
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).mknod(caller_of(req), parent, name, mode, rdev, &a);
        if (!st.is_ok()) return reply_status(req, st);
        reply_entry(req, a);
    });
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).mkdir(caller_of(req), parent, name, mode, &a);
        if (!st.is_ok()) return reply_status(req, st);
        reply_entry(req, a);
    });
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).symlink(caller_of(req), parent, name, link, &a);
        if (!st.is_ok()) return reply_status(req, st);
        reply_entry(req, a);
    });
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
    guarded(req, [&] {
        Attr a;
        Status st = vfs_of(req).link(ino, newparent, newname, &a);
        if (!st.is_ok()) return reply_status(req, st);
        reply_entry(req, a);
    });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
    guarded(req, [&] { reply_status(req, vfs_of(req).unlink(parent, name)); });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    guarded(req, [&] { reply_status(req, vfs_of(req).rmdir(parent, name)); });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
               const char* newname, unsigned int flags) {
    guarded(req, [&] {
        reply_status(req, vfs_of(req).rename(parent, name, newparent, newname, flags));
    });
}

// An O_DIRECT open asked for no caching: its reads and writes go straight
// to the daemon, and its writes inside the file may come in parallel
// (the engine runs them in windows of their own). Otherwise direct only
// while the store is nearly full (Vfs::write_through).
void set_direct_io(fuse_req_t req, fuse_file_info* fi) {
    if (fi->flags & O_DIRECT) {
        fi->direct_io = 1;
        allow_parallel_direct_writes();
        return;
    }
    fi->direct_io = vfs_of(req).write_through(fi->flags);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    guarded(req, [&] {
        std::uint64_t fh = 0;
        Status st = drop_setid_if_asked(req, ino);
        if (st.is_ok()) st = vfs_of(req).open(ino, fi->flags, &fh);
        if (!st.is_ok()) return reply_status(req, st);
        fi->fh = fh;
        // Every change to a file passes through this kernel's page cache,
        // so what it cached is still valid at the next open.
        fi->keep_cache = 1;
        // A reader's close has nothing to flush and no lost write to be
        // told of (Vfs::flush): the kernel need not send it.
        fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
        set_direct_io(req, fi);
        if (fuse_reply_open(req, fi) != 0) vfs_of(req).release(fh);
    });
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
    guarded(req, [&] {
        Attr a;
        std::uint64_t fh = 0;
        Status st = vfs_of(req).create(caller_of(req), parent, name, mode, fi->flags, &a, &fh);
        if (!st.is_ok()) return reply_status(req, st);
        fi->fh = fh;
        fi->keep_cache = 1;
        fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
        set_direct_io(req, fi);
        fuse_entry_param e = to_entry(state(req), a);
        if (fuse_reply_create(req, &e, fi) != 0) {
            vfs_of(req).release(fh);
            vfs_of(req).forget(a.ino, 1);
        }
    });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
    guarded(req, [&] {
        // One buffer per worker thread: reads are up to max_read (1 MiB)
        // and come in streams.
        thread_local std::vector<char> buf;
        if (buf.size() < size) buf.resize(size);
        std::size_t got = 0;
        Status st = vfs_of(req).read(ino, static_cast<std::uint64_t>(off), size, buf.data(), &got);
        if (!st.is_ok()) return reply_status(req, st);
        fuse_reply_buf(req, buf.data(), got);
    });
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t off,
              fuse_file_info* fi) {
    guarded(req, [&] {
        Status st = drop_setid_if_asked(req, ino);
        if (st.is_ok())
            st = vfs_of(req).write(fi->fh, ino, static_cast<std::uint64_t>(off), data, size,
                                   fi->writepage != 0);
        if (!st.is_ok()) return reply_status(req, st);
        fuse_reply_write(req, size);
    });
}

void op_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    guarded(req, [&] { reply_status(req, vfs_of(req).flush(fi->fh, ino)); });
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    guarded(req, [&] { reply_status(req, vfs_of(req).release(fi->fh)); });
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
    guarded(req, [&] { reply_status(req, vfs_of(req).fsync(fi->fh, ino, datasync != 0)); });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    guarded(req, [&] {
        std::uint64_t fh = 0;
        Status st = vfs_of(req).opendir(ino, &fh);
        if (!st.is_ok()) return reply_status(req, st);
        fi->fh = fh;
        if (fuse_reply_open(req, fi) != 0) vfs_of(req).releasedir(fh);
    });
}

void do_readdir(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi, bool plus) {
    guarded(req, [&] {
        if (off < 0) return reply_err(req, EINVAL);
        std::vector<char> buf(size);
        std::size_t used = 0;
        std::vector<InodeId> pinned;
        const FuseState& s = state(req);
        std::string name;
        Status st = vfs_of(req).readdir(
            fi->fh, static_cast<std::uint64_t>(off), plus, [&](const vfs::DirItem& item) {
                name.assign(item.name);
                std::size_t entsize;
                auto next = static_cast<off_t>(item.next_offset);
                if (plus) {
                    // ino 0: the kernel lists the name but makes no dentry.
                    fuse_entry_param e{};
                    if (item.attr) {
                        e = to_entry(s, *item.attr);
                    } else {
                        e.attr.st_ino = item.ino;
                        e.attr.st_mode = item.type;
                    }
                    entsize = fuse_add_direntry_plus(req, buf.data() + used, size - used,
                                                     name.c_str(), &e, next);
                } else {
                    struct stat sb {};
                    sb.st_ino = item.ino;
                    sb.st_mode = item.type;
                    entsize = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(),
                                                &sb, next);
                }
                if (entsize > size - used) return false;
                used += entsize;
                if (item.attr) pinned.push_back(item.ino);
                return true;
            });
        if (!st.is_ok() && used == 0) return reply_status(req, st);
        if (fuse_reply_buf(req, buf.data(), used) != 0)
            for (InodeId ino : pinned) vfs_of(req).forget(ino, 1);
    });
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
    do_readdir(req, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
    do_readdir(req, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    guarded(req, [&] { reply_status(req, vfs_of(req).releasedir(fi->fh)); });
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
    guarded(req, [&] { reply_status(req, vfs_of(req).fsyncdir(ino, datasync != 0)); });
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
    guarded(req, [&] {
        FsStats f;
        Status st = vfs_of(req).statfs(&f);
        if (!st.is_ok()) return reply_status(req, st);
        struct statvfs sv {};
        sv.f_bsize = f.block_size;
        sv.f_frsize = f.block_size;
        sv.f_blocks = f.blocks;
        sv.f_bfree = f.blocks_free;
        sv.f_bavail = f.blocks_avail;
        sv.f_files = f.files;
        sv.f_ffree = f.files_free;
        sv.f_favail = f.files_free;
        sv.f_namemax = f.name_max;
        fuse_reply_statfs(req, &sv);
    });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
    guarded(req, [&] {
        reply_status(req, vfs_of(req).setxattr(caller_of(req), ino, name,
                                               std::string_view(value, size), flags));
    });
}

// size 0 asks for the length; a too small buffer is ERANGE (getxattr(2)).
void reply_sized(fuse_req_t req, const std::string& data, size_t size) {
    if (size == 0) {
        fuse_reply_xattr(req, data.size());
    } else if (data.size() > size) {
        fuse_reply_err(req, ERANGE);
    } else {
        fuse_reply_buf(req, data.data(), data.size());
    }
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    guarded(req, [&] {
        std::string value;
        Status st = vfs_of(req).getxattr(ino, name, &value);
        if (!st.is_ok()) return reply_status(req, st);
        reply_sized(req, value, size);
    });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    guarded(req, [&] {
        std::vector<std::string> names;
        Status st = vfs_of(req).listxattr(ino, &names);
        if (!st.is_ok()) return reply_status(req, st);
        std::string list;
        for (const std::string& n : names) {
            list += n;
            list.push_back('\0');
        }
        reply_sized(req, list, size);
    });
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
    guarded(req, [&] { reply_status(req, vfs_of(req).removexattr(ino, name)); });
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  fuse_file_info*) {
    guarded(req, [&] {
        if (offset < 0 || length <= 0) return reply_err(req, EINVAL);
        Status st = drop_setid_on_change(req, ino);
        if (st.is_ok())
            st = vfs_of(req).fallocate(ino, mode, static_cast<std::uint64_t>(offset),
                                       static_cast<std::uint64_t>(length));
        reply_status(req, st);
    });
}

void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info*,
                        fuse_ino_t ino_out, off_t off_out, fuse_file_info*, size_t len, int flags) {
    guarded(req, [&] {
        if (off_in < 0 || off_out < 0) return reply_err(req, EINVAL);
        std::uint64_t copied = 0;
        Status st = len > 0 ? drop_setid_on_change(req, ino_out) : Status::ok();
        if (st.is_ok())
            st = vfs_of(req).copy_file_range(ino_in, static_cast<std::uint64_t>(off_in), ino_out,
                                             static_cast<std::uint64_t>(off_out), len,
                                             static_cast<unsigned>(flags), &copied);
        if (!st.is_ok()) return reply_status(req, st);
        fuse_reply_write(req, static_cast<size_t>(copied));
    });
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
    guarded(req, [&] {
        if (off < 0) return reply_err(req, ENXIO);
        std::uint64_t pos = 0;
        Status st = vfs_of(req).lseek(ino, static_cast<std::uint64_t>(off), whence, &pos);
        if (!st.is_ok()) return reply_status(req, st);
        fuse_reply_lseek(req, static_cast<off_t>(pos));
    });
}

fuse_lowlevel_ops make_operations() {
    fuse_lowlevel_ops ops{};
    ops.init = op_init;
    ops.lookup = op_lookup;
    ops.forget = op_forget;
    ops.forget_multi = op_forget_multi;
    ops.getattr = op_getattr;
    ops.setattr = op_setattr;
    ops.readlink = op_readlink;
    ops.mknod = op_mknod;
    ops.mkdir = op_mkdir;
    ops.symlink = op_symlink;
    ops.link = op_link;
    ops.unlink = op_unlink;
    ops.rmdir = op_rmdir;
    ops.rename = op_rename;
    ops.open = op_open;
    ops.create = op_create;
    ops.read = op_read;
    ops.write = op_write;
    ops.flush = op_flush;
    ops.release = op_release;
    ops.fsync = op_fsync;
    ops.opendir = op_opendir;
    ops.readdir = op_readdir;
    ops.readdirplus = op_readdirplus;
    ops.releasedir = op_releasedir;
    ops.fsyncdir = op_fsyncdir;
    ops.statfs = op_statfs;
    ops.setxattr = op_setxattr;
    ops.getxattr = op_getxattr;
    ops.listxattr = op_listxattr;
    ops.removexattr = op_removexattr;
    ops.fallocate = op_fallocate;
    ops.copy_file_range = op_copy_file_range;
    ops.lseek = op_lseek;
    return ops;
}

}  // namespace

const fuse_lowlevel_ops& fuse_operations() {
    static const fuse_lowlevel_ops ops = make_operations();
    return ops;
}

}  // namespace hiodsfs::fuse
