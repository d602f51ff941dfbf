// The metadata helpers every part of the engine shares: an inode as
// stored, directory entries, a file's extents and the chunk references
// they hold, the dirty queue. Each works inside the caller's metadata
// operation (a Txn) and keeps no state of its own.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <sys/stat.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hiodsfs/engine.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"
#include "meta/extent_map.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

inline constexpr std::uint64_t kMaxFileSize = std::uint64_t(1) << 60;
inline constexpr std::size_t kMaxName = 255;
inline constexpr std::size_t kMaxXattrName = 255;
inline constexpr std::size_t kMaxXattrValue = 65536;
inline constexpr std::size_t kMaxSymlink = 4095;

inline struct timespec now_ts() {
    struct timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

inline void set_time(std::int64_t* s, std::uint32_t* ns, const struct timespec& ts) {
    *s = ts.tv_sec;
    *ns = static_cast<std::uint32_t>(ts.tv_nsec);
}

inline std::uint64_t wall_ns() {
    auto ts = now_ts();
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

inline struct timespec get_time(std::int64_t s, std::uint32_t ns) {
    struct timespec ts {};
    ts.tv_sec = s;
    ts.tv_nsec = ns;
    return ts;
}

inline bool is_dir(std::uint32_t mode) { return S_ISDIR(mode); }

inline Status check_name(std::string_view name) {
    if (name.empty() || name == "." || name == "..") return Status::error(EINVAL, "invalid name");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
        return Status::error(EINVAL, "name contains '/' or NUL");
    return Status::ok();
}

// An inode as stored: the fixed record plus a symlink target, or a regular
// file's first extent block (held from load_inode to store_inode, so an
// operation reads and writes the record once: meta/extent_map.h).
struct Inode {
    InodeRecord r;
    std::string target;
    std::string held_extents;
};

// ENOENT if ino has no record, EUCLEAN if its record does not decode.
Status load_inode(Txn& t, InodeId ino, Inode* out);
Status store_inode(Txn& t, InodeId ino, const Inode& in);
// *found: whether directory parent has an entry `name` (then in *out).
Status lookup_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* out, bool* found);
// ENOTDIR unless ino is a directory, ENOENT if it was removed.
Status load_dir(Txn& t, InodeId ino, Inode* out);
// The entry `name` of directory `parent` and its inode (ENOENT if absent).
Status resolve_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* entry,
                     Inode* child);
Status dir_is_empty(Txn& t, InodeId dir, bool* empty);
// The directory's mtime and ctime set to now, its link count moved by nlink_delta.
Status touch_dir(Txn& t, InodeId dir, int nlink_delta);
// Collects the extents of ino overlapping [off, end); given the inode
// the caller loaded in t, without reading its record again.
Status extents_in(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                  std::vector<MappedExtent>* out);
Status extents_in(Txn& t, InodeId ino, const Inode& in, std::uint64_t off, std::uint64_t end,
                  std::vector<MappedExtent>* out);
// Unmaps [off, off+len) of ino and, if add is given, maps it to add (whose
// chunk reference the caller has already taken). Updates mapped bytes.
Status replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, std::uint64_t len,
                     const ExtentRecord* add);
// The same with adds mapped back to back from off (a run of chunks).
Status replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, std::uint64_t len,
                     std::span<const ExtentRecord> adds);
// Maps [off, off + e.length), which must be unmapped (a hole).
Status map_extent(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, const ExtentRecord& e);
// Adds delta to chunk id's references; at none, the chunk is freed and its
// bytes are dead. EUCLEAN for a missing chunk or an underflow, EOVERFLOW
// past ChunkRecord::kMaxRefs.
Status chunk_ref(Txn& t, ChunkId id, std::int64_t delta);
// Frees ino: its extents (and their chunk references), extended
// attributes, inode and orphan records. A missing inode loses its orphan
// record only.
Status purge_inode(Txn& t, InodeId ino);
// What getattr says of ino.
Attr to_attr(InodeId ino, const Inode& in);
// EISDIR for a directory, EINVAL for anything else that is not a regular file.
Status check_regular(const Inode& in);
// Queues [off, off + len) of ino for the background pass; *seq (if given)
// is the record's sequence number.
Status queue_dirty(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t len, std::uint64_t* seq = nullptr);
// New chunks' live bytes per segment, added once per request (most of a
// request's chunks land in one segment).
using SegmentGains = std::vector<std::pair<SegmentId, std::uint64_t>>;

}  // namespace hiodsfs
