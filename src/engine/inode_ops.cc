// The metadata helpers the engine's parts share (engine/inode_ops.h).
#include "engine/inode_ops.h"

#include <sys/stat.h>

#include <algorithm>

#include "engine/chunk_index.h"
#include "engine/compaction.h"
#include "meta/chunk_table.h"
#include "meta/dirty_queue.h"

namespace hiodsfs {

Status load_inode(Txn& t, InodeId ino, Inode* out) {
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kInodes, key_u64(ino), &v, &found));
    if (!found) return Status::error(ENOENT, "inode " + std::to_string(ino) + " does not exist");
    std::string_view tail;
    if (!decode_inode_tail(v, &out->r, &tail))
        return Status::error(EUCLEAN, "inode " + std::to_string(ino) + " record is damaged");
    (S_ISREG(out->r.mode) ? out->held_extents : out->target).assign(tail);
    (S_ISREG(out->r.mode) ? out->target : out->held_extents).clear();
    return Status::ok();
}

Status store_inode(Txn& t, InodeId ino, const Inode& in) {
    if (S_ISREG(in.r.mode)) return put_file_inode(t, ino, in.r, in.held_extents);
    return put_inode(t, ino, in.r, in.target);
}

Status lookup_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* out, bool* found) {
    std::string_view v;
    HIODSFS_TRY(t.get(Db::kDirents, key_u64_str(parent, name), &v, found));
    if (*found && !decode(v, out))
        return Status::error(EUCLEAN, "directory entry record is damaged");
    return Status::ok();
}

Status load_dir(Txn& t, InodeId ino, Inode* out) {
    HIODSFS_TRY(load_inode(t, ino, out));
    if (!is_dir(out->r.mode)) return Status::error(ENOTDIR, "not a directory");
    if (out->r.nlink == 0) return Status::error(ENOENT, "directory was removed");
    return Status::ok();
}

Status resolve_entry(Txn& t, InodeId parent, std::string_view name, DirentValue* entry,
                     Inode* child) {
    Inode dir;
    HIODSFS_TRY(load_dir(t, parent, &dir));
    bool found = false;
    HIODSFS_TRY(lookup_entry(t, parent, name, entry, &found));
    if (!found) return Status::error(ENOENT, "no such entry");
    return load_inode(t, entry->ino, child);
}

Status dir_is_empty(Txn& t, InodeId dir, bool* empty) {
    Cursor c = t.cursor(Db::kDirents);
    std::string prefix = key_u64(dir);
    *empty = !(c.seek(prefix) && c.key().starts_with(prefix));
    return c.status();
}

Status touch_dir(Txn& t, InodeId dir, int nlink_delta) {
    Inode d;
    HIODSFS_TRY(load_inode(t, dir, &d));
    auto now = now_ts();
    set_time(&d.r.mtime_s, &d.r.mtime_ns, now);
    set_time(&d.r.ctime_s, &d.r.ctime_ns, now);
    d.r.nlink = static_cast<std::uint32_t>(static_cast<std::int64_t>(d.r.nlink) + nlink_delta);
    return store_inode(t, dir, d);
}

Attr to_attr(InodeId ino, const Inode& in) {
    Attr a;
    a.ino = ino;
    a.mode = in.r.mode;
    a.nlink = in.r.nlink;
    a.uid = in.r.uid;
    a.gid = in.r.gid;
    a.rdev = in.r.rdev;
    if (is_dir(in.r.mode)) {
        a.size = 4096;
        a.blocks = 8;
    } else if (S_ISLNK(in.r.mode)) {
        a.size = in.target.size();
    } else {
        a.size = in.r.size;
        a.blocks = (in.r.mapped + 511) / 512;
    }
    a.atime = get_time(in.r.atime_s, in.r.atime_ns);
    a.mtime = get_time(in.r.mtime_s, in.r.mtime_ns);
    a.ctime = get_time(in.r.ctime_s, in.r.ctime_ns);
    return a;
}

Status extents_in(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                  std::vector<MappedExtent>* out) {
    return extents_overlapping(t, ino, off, end, out);
}

Status extents_in(Txn& t, InodeId ino, const Inode& in, std::uint64_t off, std::uint64_t end,
                  std::vector<MappedExtent>* out) {
    if (!S_ISREG(in.r.mode)) return extents_overlapping(t, ino, off, end, out);
    return extents_overlapping(t, ino, in.held_extents, off, end, out);
}

Status chunk_ref(Txn& t, ChunkId id, std::int64_t delta) {
    if (delta == 0) return Status::ok();
    bool found = false;
    ChunkRecord rec;
    HIODSFS_TRY(get_chunk(t, id, &rec, &found));
    if (!found)
        return Status::error(EUCLEAN, "chunk " + std::to_string(id) + " is missing or damaged");
    const std::uint64_t refs = rec.refs();
    if (delta < 0 && refs < static_cast<std::uint64_t>(-delta))
        return Status::error(EUCLEAN, "chunk " + std::to_string(id) + " reference count underflow");
    if (delta > 0 && ChunkRecord::kMaxRefs - refs < static_cast<std::uint64_t>(delta))
        return Status::error(EOVERFLOW,
                             "chunk " + std::to_string(id) + " is shared by too many extents");
    rec.set_refs(refs + static_cast<std::uint64_t>(delta));
    if (rec.refs() > 0) return put_chunk(t, id, rec);

    // Last reference gone: the bytes are dead (reclaimable by compaction).
    HIODSFS_TRY(del_chunk(t, id));
    HIODSFS_TRY(unindex_chunk(t, id, rec));
    auto& c = t.super().counters;
    if (rec.lost()) {
        // Its bytes went with their segment: no segment, nor the stored or
        // dead bytes, counted it since.
        c.chunk_count -= 1;
        return Status::ok();
    }
    const std::uint32_t stored = rec.stored_length();
    HIODSFS_TRY(add_segment_live(t, rec.segment, -static_cast<std::int64_t>(stored)));
    if (!(rec.flags & ChunkRecord::kIndexed)) c.raw_bytes -= stored;
    c.stored_bytes -= stored;
    c.content_bytes -= rec.length;
    c.chunk_count -= 1;
    c.dead_bytes += stored;
    return Status::ok();
}

Status replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, std::uint64_t len,
                     const ExtentRecord* add) {
    return replace_range(t, ino, inode, off, len,
                         std::span<const ExtentRecord>(add, add != nullptr ? 1 : 0));
}

Status replace_range(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, std::uint64_t len,
                     std::span<const ExtentRecord> adds) {
    std::uint64_t end = len > kMaxFileSize - std::min(off, kMaxFileSize) ? kMaxFileSize : off + len;
    std::vector<ExtentCut> cuts;
    HIODSFS_TRY(S_ISREG(inode.r.mode)
                    ? splice_extents(t, ino, &inode.held_extents, off, end, adds, &cuts)
                    : splice_extents(t, ino, off, end, adds, &cuts));
    auto& c = t.super().counters;
    for (const ExtentCut& cut : cuts) {
        inode.r.mapped -= cut.removed;
        c.logical_bytes -= cut.removed;
        HIODSFS_TRY(chunk_ref(t, cut.old.e.chunk, cut.pieces_left - 1));
    }
    for (const ExtentRecord& a : adds) {
        inode.r.mapped += a.length;
        c.logical_bytes += a.length;
    }
    return Status::ok();
}

Status map_extent(Txn& t, InodeId ino, Inode& inode, std::uint64_t off, const ExtentRecord& e) {
    return replace_range(t, ino, inode, off, e.length, &e);
}

Status purge_inode(Txn& t, InodeId ino) {
    Inode in;
    Status st = load_inode(t, ino, &in);
    if (st.err() == ENOENT) return t.del(Db::kOrphans, key_u64(ino));
    HIODSFS_TRY(st);
    if (S_ISREG(in.r.mode)) HIODSFS_TRY(replace_range(t, ino, in, 0, kMaxFileSize, nullptr));
    std::vector<std::string> xattr_keys;
    {
        std::string prefix = key_u64(ino);
        Cursor c = t.cursor(Db::kXattrs);
        for (bool ok = c.seek(prefix); ok && c.key().starts_with(prefix); ok = c.next())
            xattr_keys.emplace_back(c.key());
        HIODSFS_TRY(c.status());
    }
    for (const auto& k : xattr_keys) HIODSFS_TRY(t.del(Db::kXattrs, k));
    HIODSFS_TRY(t.del(Db::kInodes, key_u64(ino)));
    HIODSFS_TRY(t.del(Db::kOrphans, key_u64(ino)));
    t.super().counters.inode_count -= 1;
    if (S_ISREG(in.r.mode)) t.super().counters.file_count -= 1;
    return Status::ok();
}

Status check_regular(const Inode& in) {
    if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
    if (!S_ISREG(in.r.mode)) return Status::error(EINVAL, "not a regular file");
    return Status::ok();
}

Status queue_dirty(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t len, std::uint64_t* seq) {
    auto& sup = t.super();
    if (seq != nullptr) *seq = sup.next_dirty;
    HIODSFS_TRY(t.put(Db::kDirty, key_u64(sup.next_dirty++), encode_dirty({ino, off, len})));
    sup.counters.backlog_records += 1;
    sup.counters.backlog_bytes += len;
    return Status::ok();
}

}  // namespace hiodsfs
