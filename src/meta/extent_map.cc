#include "meta/extent_map.h"

#include <algorithm>
#include <cerrno>
#include <limits>

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

// Calls fn(key, start, value) for ino's blocks in order, from the one that
// holds off; fn returns a Status, and sets *more = false to stop. A key of
// ino that does not parse is damage, reported rather than skipped.
template <typename Fn>
Status visit_blocks(Txn& t, InodeId ino, std::uint64_t off, Fn fn) {
    Cursor c = t.cursor(Db::kExtents);
    const std::string prefix = key_u64(ino);
    bool more = true;
    for (bool ok = seek_block(c, prefix, ino, off); ok && more; ok = c.next()) {
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

}  // namespace

Status extents_overlapping(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end,
                           std::vector<MappedExtent>* out) {
    std::vector<MappedExtent> block;
    return visit_blocks(t, ino, off, [&](std::string_view, std::uint64_t start, std::string_view value, bool* more) {
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

Status first_extents(Txn& t, InodeId ino, std::size_t n, std::vector<MappedExtent>* out) {
    Cursor c = t.cursor(Db::kExtents);
    const std::string prefix = key_u64(ino);
    std::vector<MappedExtent> block;
    for (bool ok = c.seek(prefix); ok && out->size() < n; ok = c.next()) {
        const std::string_view key = c.key();
        if (!key.starts_with(prefix)) break;
        std::uint64_t kino = 0, start = 0;
        block.clear();
        if (!parse_key_u64_u64(key, &kino, &start) || !decode_extent_block(start, c.value(), &block))
            return damaged(ino);
        for (const MappedExtent& m : block) {
            if (out->size() == n) break;
            out->push_back(m);
        }
    }
    return c.status();
}

Status for_each_extent_block(Txn& t, const std::function<Status(const StoredBlock&)>& fn) {
    Cursor c = t.cursor(Db::kExtents);
    for (bool ok = c.first(); ok; ok = c.next()) {
        StoredBlock b;
        b.key = c.key();
        b.value = c.value();
        b.key_ok = parse_key_u64_u64(b.key, &b.ino, &b.start);
        HIODSFS_TRY(fn(b));
    }
    return c.status();
}

Status put_extent_block(Txn& t, InodeId ino, std::uint64_t start, std::string_view value) {
    return t.put(Db::kExtents, key_u64_u64(ino, start), value);
}

Status splice_extents(Txn& t, InodeId ino, std::uint64_t off, std::uint64_t end, const ExtentRecord* add,
                      std::vector<ExtentCut>* cuts) {
    if (end < off || (add != nullptr && (add->length == 0 || add->length > end - off)))
        return Status::error(EINVAL, "extent splice out of its range");
    // The blocks the range touches: the one that holds off, and those that
    // start before end.
    std::vector<std::string> keys;
    std::vector<MappedExtent> old;
    HIODSFS_TRY(visit_blocks(t, ino, off, [&](std::string_view key, std::uint64_t start, std::string_view value,
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
    next.reserve(old.size() + 2);
    bool added = add == nullptr;
    auto place_add = [&] {
        if (!added) next.push_back(MappedExtent{off, *add});
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
        new_keys.push_back(key_u64_u64(ino, next[i].start));
        HIODSFS_TRY(t.put(Db::kExtents, new_keys.back(), encode_extent_block(&next[i], n)));
    }
    for (const std::string& k : keys)
        if (std::find(new_keys.begin(), new_keys.end(), k) == new_keys.end()) HIODSFS_TRY(t.del(Db::kExtents, k));
    return Status::ok();
}

}  // namespace hiodsfs
