// StoreDir: a store directory, opened once, and the rules for opening one
// (docs/architecture.md, "The store directory"). The daemon runs as root,
// so nothing in a store may steer what it opens:
//  - STORE is opened once, by the path as given; every file under it is
//    then reached from that descriptor, with no symbolic link followed at
//    any level (Env::beneath). A link planted in the store is refused, and
//    a path that changes after the open (a renamed parent, a mount over
//    it, the daemon's own mount) changes nothing.
//  - STORE must belong to this process's user or to root, and must not be
//    writable by group or others, as ssh's StrictModes asks of a home
//    directory: whoever can write it can replace its files. A caller may
//    waive the rule (-o unsafe_store_dir); links are refused regardless.
// Thread-safety: after open(), the const members are safe from any thread;
// library_dir() is for the opening thread.
#pragma once

#include <sys/statvfs.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "hiodsfs/env.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

struct StoreDirOptions {
    // Make the directory (0700) when it does not exist.
    bool create = false;
    // The caller only reads: the directory need not be writable, and no
    // mode is tightened.
    bool read_only = false;
    // Refuse a store another user owns or others may write (see above).
    bool check_owner = true;
    // How a user waives the rule, for the refusal's message
    // ("-o unsafe_store_dir accepts it").
    std::string waiver;
};

class StoreDir {
public:
    static Status open(const std::string& path, const StoreDirOptions& options,
                       std::unique_ptr<StoreDir>* out);
    StoreDir(const StoreDir&) = delete;
    StoreDir& operator=(const StoreDir&) = delete;

    // The path as given: how messages name the store.
    const std::string& path() const { return path_; }
    int fd() const { return fd_.get(); }
    // The files under the store: paths are path() + "/REL" (or via_fd() +
    // "/REL"), opened as Env::beneath() says.
    Env* env() const { return env_.get(); }
    // "/proc/self/fd/N": names the store through its descriptor, for code
    // that opens files by name (LMDB, std::filesystem), without walking the
    // store's path again. path() where /proc is not mounted.
    const std::string& via_fd() const { return via_fd_; }

    // A directory directly under the store for a library that opens its
    // files by name (LMDB's meta/): made 0700 if create and it is absent,
    // refused if it is a symbolic link or another user's, tightened to 0700
    // unless read-only, and its data.mdb, if there, must be a regular file
    // of one link. *path names it through its own descriptor, which stays
    // open as long as this StoreDir.
    Status library_dir(const std::string& name, bool create, std::string* path);

    // st, with the descriptor paths (via_fd(), library_dir()'s) in its
    // message named as the user knows them.
    Status named(const Status& st) const;

    // statvfs of the store's file system, through the descriptor.
    Status statvfs(struct statvfs* out) const;

private:
    StoreDir() = default;
    // "/proc/self/fd/N" if it names fd, else "".
    static std::string proc_path(int fd);

    UniqueFd fd_;
    std::string path_, via_fd_;
    StoreDirOptions options_;
    std::unique_ptr<Env> env_;
    std::vector<UniqueFd> library_fds_;
    // A descriptor path ("/proc/self/fd/N") and the name it stands for.
    std::vector<std::pair<std::string, std::string>> aliases_;
};

// EINVAL with one line when dir (a store or cache_dir, as `what` says) is
// the directory mountpoint or lies below it, however either is spelled
// (symbolic links, bind mounts, relative paths): the directories from dir
// up to / are compared with mountpoint by device and inode. A daemon whose
// store is inside its own mount would wait on itself. A dir that does not
// exist yet is judged by the directory it would be made in.
Status check_outside_mount(const std::string& dir, const std::string& what,
                           const std::string& mountpoint);

}  // namespace hiodsfs
