// Vfs: the kernel-facing state of a mount and the POSIX rules the engine
// leaves to its caller. It sits between the FUSE adapter (src/fuse), which
// only translates requests and replies, and the Engine, which stores
// inodes and data and performs no permission checks.
//  - Pins: every reply that hands the kernel an inode pins it once (the
//    kernel's lookup count); forget() unpins. Open handles pin too, so an
//    unlinked file lives until its last reference goes.
//  - Handles: open files (ino, open flags) and open directories, which keep
//    a snapshot of their entries so readdir offsets stay stable.
//  - New nodes: owner from the caller, setgid directories, umask, default
//    ACL inheritance; chmod and ACL writes keep mode and ACL in sync.
// Every method returns a Status (errno + message) and never throws except
// std::bad_alloc; the adapter turns both into replies.
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/engine.h"
#include "vfs/handle_table.h"
#include "vfs/pin_ledger.h"

namespace hiodsfs::vfs {

struct VfsOptions {
    // The kernel writeback cache is on: the kernel places O_APPEND writes
    // itself and writes back pages at their own offsets, so the VFS must
    // not move writes to the end of the file.
    bool writeback_cache = false;
    // FUSE_CAP_POSIX_ACL was granted: the kernel enforces ACLs and expects
    // the file system to inherit default ACLs and keep modes in sync.
    bool posix_acl = false;
};

// Who sends a request (fuse_req_ctx).
struct Caller {
    std::uint32_t uid = 0, gid = 0;
    // Applied to new nodes unless a default ACL applies; 0 when the kernel
    // has already applied it (no FUSE_CAP_DONT_MASK).
    std::uint32_t umask = 0;
    // Whether the caller is in group gid (fsgid or supplementary); asked
    // only when an access ACL is set. Unset means "only caller.gid".
    std::function<bool(std::uint32_t gid)> in_group;
};

// One entry as readdir hands it out.
struct DirItem {
    std::string_view name;
    InodeId ino = 0;
    std::uint32_t type = 0;         // S_IFMT bits
    std::uint64_t next_offset = 0;  // the offset to continue after this entry
    // readdirplus: the entry's current attributes; the inode is pinned when
    // the consumer accepts the item. nullptr for "." and "..", for plain
    // readdir, and for entries removed since the snapshot.
    const Attr* attr = nullptr;
};

class Vfs {
public:
    static constexpr std::size_t kNameMax = 255;

    explicit Vfs(Engine& engine, VfsOptions options = {});
    Vfs(const Vfs&) = delete;
    Vfs& operator=(const Vfs&) = delete;

    // Called once the kernel's capabilities are known, before any request.
    void set_options(const VfsOptions& options) { options_ = options; }
    const VfsOptions& options() const { return options_; }
    Engine& engine() { return engine_; }

    // Namespace. Every call that fills an Attr for a new kernel reference
    // (lookup, mknod, mkdir, symlink, link, create) pins that inode.
    Status lookup(InodeId parent, std::string_view name, Attr* out);
    void forget(InodeId ino, std::uint64_t nlookup);
    Status getattr(InodeId ino, Attr* out);
    Status setattr(InodeId ino, const SetAttr& changes, Attr* out);
    // What a write, truncate or chown by a caller without CAP_FSETID does to
    // a file, as the VFS does it (setattr_should_drop_sgid): S_ISUID goes,
    // and S_ISGID when the group may execute or the caller is neither in
    // the file's group nor root. Nothing is written when neither bit goes.
    Status drop_setid(const Caller& caller, InodeId ino);
    Status mknod(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                 std::uint64_t rdev, Attr* out);
    Status mkdir(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                 Attr* out);
    Status symlink(const Caller& caller, InodeId parent, std::string_view name,
                   std::string_view target, Attr* out);
    Status link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out);
    Status unlink(InodeId parent, std::string_view name);
    Status rmdir(InodeId parent, std::string_view name);
    Status rename(InodeId parent, std::string_view name, InodeId new_parent,
                  std::string_view new_name, unsigned flags);
    Status readlink(InodeId ino, std::string* target);

    // Files. create() pins twice: the new entry and the open handle.
    Status create(const Caller& caller, InodeId parent, std::string_view name, std::uint32_t mode,
                  int flags, Attr* out, std::uint64_t* fh);
    Status open(InodeId ino, int flags, std::uint64_t* fh);
    // Whether a file just opened with these flags should bypass the kernel's
    // writeback cache (FOPEN_DIRECT_IO): when it is opened for writing while
    // the store can take less than kWriteThroughRoom more bytes. The cache
    // would accept writes the store cannot keep and report ENOSPC only at
    // fsync or close; written through, each write(2) gets its answer. 64 MiB
    // is where the engine starts checking every write request against the
    // disk (docs/architecture.md, "A full disk").
    static constexpr std::uint64_t kWriteThroughRoom = 64ull << 20;
    bool write_through(int flags);
    // A close of the open file fh (each close(2) of a descriptor of it):
    // told of writes lost while it was open, once (Engine::flush). A file
    // open read-only is not told at close, and takes nothing from the
    // writers (the adapter sets FOPEN_NOFLUSH on it).
    Status flush(std::uint64_t fh, InodeId ino);
    Status release(std::uint64_t fh);
    Status read(InodeId ino, std::uint64_t offset, std::size_t size, void* buf, std::size_t* got);
    // writeback: the kernel writes back pages of its writeback cache (a
    // FUSE_WRITE_CACHE request), whose times it has stamped and sends itself.
    Status write(std::uint64_t fh, InodeId ino, std::uint64_t offset, const void* data,
                 std::size_t len, bool writeback = false);
    // fsync of the open file fh: told of writes lost while it was open, once.
    Status fsync(std::uint64_t fh, InodeId ino, bool datasync);
    // fsync of a directory (no lost writes to tell).
    Status fsyncdir(InodeId ino, bool datasync);
    Status fallocate(InodeId ino, int mode, std::uint64_t offset, std::uint64_t len);
    // whence: SEEK_DATA or SEEK_HOLE (the kernel does the others itself).
    // ENOSYS with the writeback cache (see vfs.cc).
    Status lseek(InodeId ino, std::uint64_t offset, int whence, std::uint64_t* out);
    // Shares chunks through Engine::clone_range; copies through the VFS
    // only if the engine cannot clone that range.
    Status copy_file_range(InodeId src, std::uint64_t src_off, InodeId dst, std::uint64_t dst_off,
                           std::uint64_t len, unsigned flags, std::uint64_t* copied);

    // Directories. readdir calls emit for entries from offset on until emit
    // returns false (reply buffer full) or the snapshot ends.
    Status opendir(InodeId ino, std::uint64_t* fh);
    Status readdir(std::uint64_t fh, std::uint64_t offset, bool plus,
                   const std::function<bool(const DirItem&)>& emit);
    Status releasedir(std::uint64_t fh);

    Status statfs(FsStats* out);

    // Extended attributes; the POSIX ACL names get the ACL rules.
    Status setxattr(const Caller& caller, InodeId ino, std::string_view name,
                    std::string_view value, int flags);
    Status getxattr(InodeId ino, std::string_view name, std::string* value);
    Status listxattr(InodeId ino, std::vector<std::string>* names);
    Status removexattr(InodeId ino, std::string_view name);

    // Gives back every pin still held: the kernel sends no forget at
    // unmount, and the engine frees unlinked files only when their last pin
    // goes. Called once requests have stopped, before the engine closes.
    void unpin_all();

    std::uint64_t pins(InodeId ino) const { return pins_.count(ino); }
    std::size_t pinned_inodes() const { return pins_.inodes(); }
    std::size_t open_files() const { return files_.size(); }
    std::size_t open_dirs() const { return dirs_.size(); }

private:
    struct OpenFile {
        InodeId ino = 0;
        int flags = 0;
        // Sampled at open; moved on only inside the engine's calls, under
        // its lock, so concurrent flushes and fsyncs of one file may share it.
        WriteErrorCursor seen;
    };
    struct OpenDir {
        InodeId ino = 0;
        std::mutex mu;
        std::vector<DirEntry> entries;  // "." and ".." first
        bool started = false;           // a readdir has run (offset 0 again = rewind)
    };

    void pin(InodeId ino);
    void unpin(InodeId ino, std::uint64_t n);
    Status prepare_node(const Caller& caller, InodeId parent, std::uint32_t mode, NewNode* node);
    Status create_node(const Caller& caller, InodeId parent, std::string_view name,
                       std::uint32_t mode, std::uint64_t rdev, std::string_view target, Attr* out);
    Status open_handle(InodeId ino, int flags, std::uint64_t* fh);
    Status snapshot(OpenDir* dir);
    Status set_access_acl(const Caller& caller, InodeId ino, std::string_view value, int flags);
    Status copy_through(InodeId src, std::uint64_t src_off, InodeId dst, std::uint64_t dst_off,
                        std::uint64_t len, std::uint64_t* copied);
    std::mutex& append_lock(InodeId ino) { return append_locks_[ino % append_locks_.size()]; }

    Engine& engine_;
    VfsOptions options_;
    PinLedger pins_;
    HandleTable<OpenFile> files_;
    HandleTable<OpenDir> dirs_;
    // O_APPEND without the writeback cache reads the size and writes there;
    // appenders to one file take turns so none overwrites another.
    std::array<std::mutex, 64> append_locks_;
};

}  // namespace hiodsfs::vfs
