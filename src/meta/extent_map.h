// A file's extent map, stored in blocks (formats 2 and 3). A block holds up
// to kExtentsPerBlock consecutive extents of a file. Format 3 keeps a
// regular file's block that starts at offset 0 (most files have no other)
// in its inode record, after the inode's fields: one LMDB record per small
// file instead of two. Every other block, and a block at 0 of an inode
// that has no record (tests; fsck's repairs until the inode is made), is
// a record of Db::kExtents: key = inode + the file offset of the block's
// first extent (meta/keys.h). A block's value is its extents as varints: the gap from the end of the
// previous extent (from the key's offset for the first), the length, the
// chunk id as a zigzag difference from the previous extent's, and the offset
// in the chunk. A file written in order costs about 5 bytes per extent, and
// one key, node and page slot per 16 extents instead of per extent (16:
// a write rewrites its block, and more saves little more).
// Engine and fsck see single extents; only this file knows the blocks, and
// writes an inode record of a regular file only through put_inode(), which
// keeps its block.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

struct MappedExtent {
    std::uint64_t start;  // file offset
    ExtentRecord e;
    std::uint64_t end() const { return start + e.length; }
};

constexpr std::size_t kExtentsPerBlock = 16;

// The value of a block whose key offset is extents[0].start; the extents are
// in order, do not overlap and have non-zero lengths.
std::string encode_extent_block(const MappedExtent* extents, std::size_t n);
// Appends a block's extents to *out; false if the value is not a well-formed
// block for that key offset (empty, truncated, zero lengths, past 2^64).
bool decode_extent_block(std::uint64_t key_start, std::string_view value, std::vector<MappedExtent>* out);

// One stored block of some file's extent map, as hiodsfs-fsck walks them.
struct StoredBlock {
    std::string_view key;  // its key in Db::kExtents (empty in an inode record)
    bool in_inode = false;  // the block at offset 0 of a regular file, in its inode record
    bool key_ok = false;   // the key parses (ino and start are valid only then)
    InodeId ino = 0;
    std::uint64_t start = 0;
    std::string_view value;
};
// Calls fn for every block of every file, inline ones included, in key
// order (inode, then offset); stops at the first error fn returns. fn must
// not change t; the views are valid during the call only.
Status for_each_extent_block(Txn& t, const std::function<Status(const StoredBlock&)>& fn);
// Stores a block's value anew (fsck moving extents onto another chunk; the
// upgrade), inline if it is a regular file's block at offset 0.
Status put_extent_block(Txn& t, InodeId ino, std::uint64_t start, std::string_view value);

// Writes ino's inode record; a regular file's keeps the extent block it
// holds (a splice in the same Txn may have changed it since the caller
// read the record). target: a symlink's.
Status put_inode(Txn& t, InodeId ino, const InodeRecord& r, std::string_view target = {});

// A caller that reads a regular file's record, changes its extents and
// writes it back in one Txn (the engine) may hold the record's block
// itself: the tail decode_inode_tail() gives. The functions below that
// take held_block read and change it instead of the record, and
// put_file_inode() writes record and block at once, so an operation reads
// and writes the record once however many extents it maps. Until then the
// record in the Txn is stale: the holder must not mix these with the
// functions that read the record.
Status put_file_inode(Txn& t, InodeId ino, const InodeRecord& r, std::string_view held_block);

// The extents of ino that overlap [off, end), in order.
Status extents_overlapping(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                           std::vector<MappedExtent>* out);
Status extents_overlapping(Txn& t, InodeId ino, const std::string& held_block, std::uint64_t off,
                           std::uint64_t end, std::vector<MappedExtent>* out);

// The first n extents of ino (fewer if it has fewer).
Status first_extents(Txn& t, InodeId ino, std::size_t n, std::vector<MappedExtent>* out);

// What a splice did to one extent that overlapped its range.
struct ExtentCut {
    MappedExtent old;
    std::uint64_t removed = 0;  // bytes of it inside the range
    int pieces_left = 0;        // 0, 1 or 2 (the parts before and after the range)
};

// Unmaps [off, end) of ino and maps the extents of `adds` back to back from
// off (their lengths add up to at most end - off; none empty; none: only
// unmaps). The blocks it touches are read and written once, so a run of
// chunks a request stores costs one splice, not one per chunk. *cuts gets
// one entry per extent the range overlapped. held_block: the file's inline
// block, held by the caller (Inode::held_extents) instead of in its record.
Status splice_extents(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                      std::span<const ExtentRecord> adds, std::vector<ExtentCut>* cuts);
Status splice_extents(Txn& t, InodeId ino, std::string* held_block, std::uint64_t off, std::uint64_t end,
                      std::span<const ExtentRecord> adds, std::vector<ExtentCut>* cuts);

}  // namespace hiodsfs
