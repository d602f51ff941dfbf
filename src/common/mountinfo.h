// The mounts of this process's mount namespace, from /proc/self/mountinfo,
// for the daemon (is the mount point or the store already mounted?) and
// hiodsfs-stat (which mount point shows this store?).
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

namespace hiodsfs {

struct MountInfo {
    std::string mountpoint;  // unescaped ("\040" is a space)
    std::string fstype;      // "ext4", "fuse.hiodsfs", ...
    std::string source;      // unescaped; a hiodsfs mount's is its store
};

// Every mount, in the order mountinfo lists them (later ones on top).
std::vector<MountInfo> read_mountinfo();

// Whether some FUSE mount has `source` as its source (fsname): a store
// directory, or rados:POOL/STORE.
bool fuse_source_mounted(const std::string& source);

// Whether a hiodsfs mount (fuse.hiodsfs) has the directory dir as its
// store, however either spells it: the directories are compared by device
// and inode.
bool hiodsfs_store_mounted(const std::string& dir);

}  // namespace hiodsfs
