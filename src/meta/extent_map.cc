#include "meta/extent_map.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <utility>

namespace hiodsfs {

std::string encode_extent_block(const MappedExtent* extents, std::size_t n) {
    std::string out;
    out.reserve(n * 6);
    std::uint64_t prev_end = n ? extents[0].start : 0;
    std::uint64_t prev_chunk = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const MappedExtent& m = extents[i];
        put_varint(&out, m.start - prev_end);
        put_varint(&out, m.e.length);
        const std::uint64_t delta = m.e.chunk - prev_chunk;  // wraps: zigzag of the signed difference
        put_varint(&out, (delta << 1) ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(delta) >> 63));
        put_varint(&out, m.e.chunk_off);
        prev_end = m.end();
        prev_chunk = m.e.chunk;
    }
    return out;
}

bool decode_extent_block(std::uint64_t key_start, std::string_view value, std::vector<MappedExtent>* out) {
    if (value.empty()) return false;
    std::size_t pos = 0;
    std::uint64_t prev_end = key_start, prev_chunk = 0;
    bool first = true;
    while (pos < value.size()) {
        std::uint64_t gap = 0, length = 0, zz = 0, chunk_off = 0;
        if (!get_varint(value, &pos, &gap) || !get_varint(value, &pos, &length) ||
            !get_varint(value, &pos, &zz) || !get_varint(value, &pos, &chunk_off))
            return false;
        if ((first && gap != 0) || length == 0 || length > std::numeric_limits<std::uint32_t>::max() ||
            chunk_off > std::numeric_limits<std::uint32_t>::max())
            return false;
        if (gap > std::numeric_limits<std::uint64_t>::max() - prev_end) return false;
        const std::uint64_t start = prev_end + gap;
        if (length > std::numeric_limits<std::uint64_t>::max() - start) return false;
        const std::uint64_t delta = (zz >> 1) ^ (~(zz & 1) + 1);
        MappedExtent m{start, ExtentRecord{prev_chunk + delta, static_cast<std::uint32_t>(chunk_off),
                                           static_cast<std::uint32_t>(length)}};
        out->push_back(m);
        prev_end = m.end();
        prev_chunk = m.e.chunk;
        first = false;
    }
    return true;
}

namespace {

Status damaged(InodeId ino) {
    return Status::error(EUCLEAN, "extent map of inode " + std::to_string(ino) + " is damaged");
}

// Positions c at the block of ino that holds off (the last one starting at
// or before it), else at the first block after it; false if there is none
// of ino. Blocks of other inodes are passed over by the caller's loop.
bool seek_block(Cursor& c, std::string_view prefix, InodeId ino, std::uint64_t off) {
    const std::string k = key_u64_u64(ino, off);
    bool ok = c.seek(k);
    if (ok) {
        if (c.key() != k) {
            if (c.prev()) {
                if (!c.key().starts_with(prefix)) ok = c.next();
            } else {
                ok = c.status() && c.seek(k);
            }
        }
    } else if (c.status()) {
        ok = c.last() && c.key().starts_with(prefix);
    }
    return ok;
}

// What the extent map needs of ino's inode record: whether it is a regular
// file's, whose block at offset 0 it holds, and that block (a copy: a
// Txn's views last until its next change).
struct InodeTail {
    bool regular = false;
    std::string block;  // empty: none inline
    bool held = false;  // the caller holds the record: block changes stay here, not in the record
};

// A tail for a record the caller has read and will write back itself.
InodeTail held_tail(std::string block) {
    InodeTail tail;
    tail.regular = tail.held = true;
    tail.block = std::move(block);
    return tail;
}

Status read_tail(Txn& t, InodeId ino, InodeTail* out) {
    *out = InodeTail{};
    std::string_view v, tail;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kInodes, key_u64(ino), &v, &found));
    if (!found) return Status::ok();  // no record (tests, fsck's repairs): every block in Db::kExtents
    InodeRecord r;
    if (!decode_inode_tail(v, &r, &tail))
        return Status::error(EUCLEAN, "inode " + std::to_string(ino) + " record is damaged");
    out->regular = S_ISREG(r.mode);
    if (out->regular) out->block.assign(tail);
    return Status::ok();
}

// Makes block (empty: none) the inline block of regular file ino.
Status write_tail(Txn& t, InodeId ino, std::string_view block) {
    const std::string key = key_u64(ino);
    std::string_view v, tail;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kInodes, key, &v, &found));
    InodeRecord r;
    if (!found || !decode_inode_tail(v, &r, &tail))
        return Status::error(EUCLEAN, "inode " + std::to_string(ino) + " record is missing or damaged");
    std::string value(v.substr(0, v.size() - tail.size()));
    value.append(block);
    return t.put(Db::kInodes, key, value);
}

// Calls fn(key, start, value) for ino's blocks in order, from the one that
// holds off; fn returns a Status, and sets *more = false to stop. The
// inline block comes first, with an empty key, when it holds off (no block
// of Db::kExtents starts at or before off) or is the first after it. A key
// of ino that does not parse is damage, reported rather than skipped.
template <typename Fn>
Status visit_blocks(Txn& t, InodeId ino, std::uint64_t off, const InodeTail& tail, Fn fn) {
    Cursor c = t.cursor(Db::kExtents);
    const std::string prefix = key_u64(ino);
    bool more = true;
    bool ok = seek_block(c, prefix, ino, off);
    HIODSFS_TRY(c.status());
    if (!tail.block.empty()) {
        std::uint64_t kino = 0, start = 0;
        const bool db_holds_off = ok && c.key().starts_with(prefix) &&
                                  parse_key_u64_u64(c.key(), &kino, &start) && start <= off;
        if (!db_holds_off) HIODSFS_TRY(fn(std::string_view(), 0, std::string_view(tail.block), &more));
    }
    for (; ok && more; ok = c.next()) {
        const std::string_view key = c.key();
        if (!key.starts_with(prefix)) {
            if (key < std::string_view(prefix)) continue;
            break;
        }
        std::uint64_t kino = 0, start = 0;
        if (!parse_key_u64_u64(key, &kino, &start)) return damaged(ino);
        HIODSFS_TRY(fn(key, start, c.value(), &more));
    }
    return c.status();
}

// Stores one block of ino: at offset 0 of a regular file in its inode
// record, else in Db::kExtents. *key gets where it went (empty: inline).
Status store_block(Txn& t, InodeId ino, InodeTail& tail, std::uint64_t start, std::string_view value,
                   std::string* key) {
    if (start == 0 && tail.regular) {
        key->clear();
        if (tail.held) {
            tail.block.assign(value);
            return Status::ok();
        }
        return write_tail(t, ino, value);
    }
    *key = key_u64_u64(ino, start);
    return t.put(Db::kExtents, *key, value);
}

Status extents_overlapping(Txn& t, InodeId ino, const InodeTail& tail, std::uint64_t off, std::uint64_t end,
                           std::vector<MappedExtent>* out) {
    std::vector<MappedExtent> block;
    return visit_blocks(t, ino, off, tail, [&](std::string_view, std::uint64_t start, std::string_view value,
                                               bool* more) {
        if (start >= end) {
            *more = false;
            return Status::ok();
        }
        block.clear();
        if (!decode_extent_block(start, value, &block)) return damaged(ino);
        for (const MappedExtent& m : block)
            if (m.end() > off && m.start < end) out->push_back(m);
        return Status::ok();
    });
}

}  // namespace

Status extents_overlapping(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                           std::vector<MappedExtent>* out) {
    InodeTail tail;
    HIODSFS_TRY(read_tail(t, ino, &tail));
    return extents_overlapping(t, ino, tail, off, end, out);
}

Status extents_overlapping(Txn& t, InodeId ino, const std::string& held_block, std::uint64_t off,
                           std::uint64_t end, std::vector<MappedExtent>* out) {
    return extents_overlapping(t, ino, held_tail(held_block), off, end, out);
}

Status first_extents(Txn& t, InodeId ino, std::size_t n, std::vector<MappedExtent>* out) {
    InodeTail tail;
    HIODSFS_TRY(read_tail(t, ino, &tail));
    std::vector<MappedExtent> block;
    return visit_blocks(t, ino, 0, tail, [&](std::string_view, std::uint64_t start, std::string_view value,
                                             bool* more) {
        block.clear();
        if (!decode_extent_block(start, value, &block)) return damaged(ino);
        for (const MappedExtent& m : block) {
            if (out->size() == n) break;
            out->push_back(m);
        }
        *more = out->size() < n;
        return Status::ok();
    });
}

Status for_each_extent_block(Txn& t, const std::function<Status(const StoredBlock&)>& fn) {
    // Two walks merged in key order: regular files' inline blocks (in
    // Db::kInodes, as if keyed (ino, 0)) and the blocks of Db::kExtents.
    Cursor ic = t.cursor(Db::kInodes), ec = t.cursor(Db::kExtents);
    StoredBlock in;
    std::string in_key;  // in's key as Db::kExtents would have it
    bool iok = ic.first(), eok = ec.first();
    auto next_inline = [&] {
        for (; iok; iok = ic.next()) {
            InodeRecord r;
            std::string_view tail;
            // Damaged inode records are fsck's to report; they hold no block it can read.
            if (parse_key_u64(ic.key(), &in.ino) && decode_inode_tail(ic.value(), &r, &tail) &&
                S_ISREG(r.mode) && !tail.empty()) {
                in.value = tail;
                in.key_ok = in.in_inode = true;
                in.start = 0;
                in_key = key_u64_u64(in.ino, 0);
                return;
            }
        }
    };
    next_inline();
    while (iok || eok) {
        if (iok && (!eok || std::string_view(in_key) <= ec.key())) {
            HIODSFS_TRY(fn(in));
            iok = ic.next();
            next_inline();
            continue;
        }
        StoredBlock b;
        b.key = ec.key();
        b.value = ec.value();
        b.key_ok = parse_key_u64_u64(b.key, &b.ino, &b.start);
        HIODSFS_TRY(fn(b));
        eok = ec.next();
    }
    HIODSFS_TRY(ic.status());
    return ec.status();
}

Status put_extent_block(Txn& t, InodeId ino, std::uint64_t start, std::string_view value) {
    InodeTail tail;
    Status st = read_tail(t, ino, &tail);
    // A damaged record (fsck names it) cannot take the block: Db::kExtents keeps it.
    if (!st && st.err() != EUCLEAN) return st;
    std::string key;
    HIODSFS_TRY(store_block(t, ino, tail, start, value, &key));
    // A block at 0 kept in Db::kExtents before the inode was a regular
    // file's (fsck made it again) has moved into the record.
    return key.empty() ? t.del(Db::kExtents, key_u64_u64(ino, 0)) : Status::ok();
}

Status put_inode(Txn& t, InodeId ino, const InodeRecord& r, std::string_view target) {
    if (!S_ISREG(r.mode)) return t.put(Db::kInodes, key_u64(ino), encode(r, target));
    InodeTail tail;
    Status st = read_tail(t, ino, &tail);
    // A record that does not decode is replaced whole (fsck's repair), without a block.
    if (!st && st.err() != EUCLEAN) return st;
    return t.put(Db::kInodes, key_u64(ino), encode(r, tail.block));
}

Status put_file_inode(Txn& t, InodeId ino, const InodeRecord& r, std::string_view held_block) {
    if (!S_ISREG(r.mode)) return Status::error(EINVAL, "inode " + std::to_string(ino) + " is not a regular file");
    return t.put(Db::kInodes, key_u64(ino), encode(r, held_block));
}

namespace {

Status splice_extents(Txn& t, InodeId ino, InodeTail& tail, std::uint64_t off, std::uint64_t end,
                      std::span<const ExtentRecord> adds, std::vector<ExtentCut>* cuts) {
    std::uint64_t added_bytes = 0;
    for (const ExtentRecord& a : adds) {
        if (a.length == 0) return Status::error(EINVAL, "extent splice of an empty extent");
        added_bytes += a.length;
    }
    if (end < off || added_bytes > end - off) return Status::error(EINVAL, "extent splice out of its range");
    // The blocks the range touches: the one that holds off, and those that
    // start before end.
    std::vector<std::string> keys;  // empty: the inline block
    std::vector<MappedExtent> old;
    HIODSFS_TRY(visit_blocks(t, ino, off, tail, [&](std::string_view key, std::uint64_t start, std::string_view value,
                                                    bool* more) {
        // The block that holds off (the only one at or before it), then
        // those that start inside the range. With no block before off,
        // add makes a block of its own.
        if (start > off && start >= end) {
            *more = false;
            return Status::ok();
        }
        if (!decode_extent_block(start, value, &old)) return damaged(ino);
        keys.emplace_back(key);
        return Status::ok();
    }));
    std::vector<MappedExtent> next;
    next.reserve(old.size() + adds.size() + 1);
    bool added = adds.empty();
    auto place_add = [&] {
        if (added) return;
        std::uint64_t at = off;
        for (const ExtentRecord& a : adds) {
            next.push_back(MappedExtent{at, a});
            at += a.length;
        }
        added = true;
    };
    for (const MappedExtent& m : old) {
        if (m.end() <= off || m.start >= end) {
            if (m.start >= end) place_add();
            next.push_back(m);
            continue;
        }
        ExtentCut cut{m, std::min(m.end(), end) - std::max(m.start, off), 0};
        if (m.start < off) {
            MappedExtent left = m;
            left.e.length = static_cast<std::uint32_t>(off - m.start);
            next.push_back(left);
            ++cut.pieces_left;
        }
        place_add();
        if (m.end() > end) {
            MappedExtent right{end, m.e};
            right.e.chunk_off = static_cast<std::uint32_t>(m.e.chunk_off + (end - m.start));
            right.e.length = static_cast<std::uint32_t>(m.end() - end);
            next.push_back(right);
            ++cut.pieces_left;
        }
        cuts->push_back(cut);
    }
    place_add();
    // Write the blocks anew, full from the front; keys no block takes go.
    std::vector<std::string> new_keys;
    for (std::size_t i = 0; i < next.size(); i += kExtentsPerBlock) {
        const std::size_t n = std::min(kExtentsPerBlock, next.size() - i);
        new_keys.emplace_back();
        HIODSFS_TRY(store_block(t, ino, tail, next[i].start, encode_extent_block(&next[i], n), &new_keys.back()));
    }
    for (const std::string& k : keys) {
        if (std::find(new_keys.begin(), new_keys.end(), k) != new_keys.end()) continue;
        if (!k.empty()) {
            HIODSFS_TRY(t.del(Db::kExtents, k));
        } else if (tail.held) {
            tail.block.clear();
        } else {
            HIODSFS_TRY(write_tail(t, ino, {}));
        }
    }
    return Status::ok();
}

}  // namespace

Status splice_extents(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                      std::span<const ExtentRecord> adds, std::vector<ExtentCut>* cuts) {
    InodeTail tail;
    HIODSFS_TRY(read_tail(t, ino, &tail));
    return splice_extents(t, ino, tail, off, end, adds, cuts);
}

Status splice_extents(Txn& t, InodeId ino, std::string* held_block, std::uint64_t off, std::uint64_t end,
                      std::span<const ExtentRecord> adds, std::vector<ExtentCut>* cuts) {
    // The block moves in and back out: a request maps its chunks with one
    // splice per run, so no copy per chunk. On failure the caller's Txn,
    // and the block with it, is thrown away.
    InodeTail tail = held_tail(std::move(*held_block));
    Status st = splice_extents(t, ino, tail, off, end, adds, cuts);
    *held_block = std::move(tail.block);
    return st;
}

}  // namespace hiodsfs
