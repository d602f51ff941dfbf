#include "fsck/upgrade.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <unordered_set>

#include "engine/chunk_index.h"
#include "engine/store_layout.h"
#include "hiodsfs/env.h"
#include "meta/chunk_table.h"
#include "meta/extent_map.h"
#include "meta/fingerprint_index.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

namespace {

// Format 1's records: the raw bytes of these structs (little-endian, x86-64
// alignment), as hiodsfs 0.1.0 wrote them. Kept here only to convert them.
struct InodeV1 {
    std::uint32_t mode, nlink, uid, gid;
    std::uint64_t rdev, size, mapped, parent;
    std::int64_t atime_s, mtime_s, ctime_s;
    std::uint32_t atime_ns, mtime_ns, ctime_ns, reserved;
    // A symlink's target follows.
};
static_assert(sizeof(InodeV1) == 88);

struct ExtentV1 {
    std::uint64_t chunk;
    std::uint32_t chunk_off, length;
};
static_assert(sizeof(ExtentV1) == 16);

struct ChunkV1 {
    std::uint32_t segment, length;
    std::uint64_t offset;
    std::uint32_t refs_low;
    std::uint8_t flags, refs_high[3];
    std::uint8_t digest[32];
};
static_assert(sizeof(ChunkV1) == 56);

struct DirentV1 {
    std::uint64_t ino;
    std::uint32_t type, reserved;
};
static_assert(sizeof(DirentV1) == 16);

template <typename T>
bool read_v1(std::string_view in, T* out, bool exact = true) {
    if (in.size() < sizeof(T) || (exact && in.size() != sizeof(T))) return false;
    std::memcpy(out, in.data(), sizeof(T));
    return true;
}

// A chunk record of format 1 (a fixed struct).
bool decode_chunk_v1(std::string_view v1, ChunkRecord* out) {
    ChunkV1 o;
    if (!read_v1(v1, &o) || (o.flags & ~ChunkRecord::kKnownFlags) != 0) return false;
    ChunkRecord r;
    r.segment = o.segment, r.length = o.length, r.offset = o.offset, r.flags = o.flags;
    r.set_refs(o.refs_low | std::uint64_t{o.refs_high[0]} << 32 | std::uint64_t{o.refs_high[1]} << 40 |
               std::uint64_t{o.refs_high[2]} << 48);
    std::memcpy(r.digest.bytes.data(), o.digest, sizeof o.digest);
    *out = r;
    return true;
}

// A chunk record of formats 2 and 3, one LMDB record each: flags, segment,
// offset, length, reference count as varints, then the digest if the chunk
// is fingerprinted. Format 4 keeps them in blocks (meta/chunk_table.h).
bool decode_chunk_v3(std::string_view in, ChunkRecord* out) {
    if (in.empty()) return false;
    ChunkRecord r;
    r.flags = static_cast<std::uint8_t>(in[0]);
    std::size_t pos = 1;
    std::uint64_t segment = 0, offset = 0, length = 0, refs = 0;
    if ((r.flags & ~ChunkRecord::kKnownFlags) != 0 || !get_varint(in, &pos, &segment) ||
        !get_varint(in, &pos, &offset) || !get_varint(in, &pos, &length) || !get_varint(in, &pos, &refs) ||
        segment > std::numeric_limits<SegmentId>::max() || length > std::numeric_limits<std::uint32_t>::max() ||
        refs > ChunkRecord::kMaxRefs)
        return false;
    r.segment = static_cast<SegmentId>(segment);
    r.offset = offset;
    r.length = static_cast<std::uint32_t>(length);
    r.set_refs(refs);
    if (r.flags & ChunkRecord::kIndexed) {
        if (in.size() - pos < r.digest.bytes.size()) return false;
        std::memcpy(r.digest.bytes.data(), in.data() + pos, r.digest.bytes.size());
        pos += r.digest.bytes.size();
    }
    if (pos != in.size()) return false;
    *out = r;
    return true;
}

bool get_time(std::string_view in, std::size_t* pos, std::int64_t* s, std::uint32_t* ns) {
    std::uint64_t zz = 0;
    if (!get_varint(in, pos, &zz)) return false;
    *s = static_cast<std::int64_t>((zz >> 1) ^ (~(zz & 1) + 1));
    return get_varint_as(in, pos, ns);
}

// An inode record of format 1: the struct, then a symlink's target.
bool decode_inode_v1(std::string_view in, InodeRecord* out, std::string_view* tail) {
    InodeV1 o;
    if (!read_v1(in, &o, false)) return false;
    InodeRecord r;
    r.mode = o.mode, r.nlink = o.nlink, r.uid = o.uid, r.gid = o.gid;
    r.rdev = o.rdev, r.size = o.size, r.mapped = o.mapped, r.parent = o.parent;
    r.atime_s = o.atime_s, r.mtime_s = o.mtime_s, r.ctime_s = o.ctime_s;
    r.atime_ns = o.atime_ns, r.mtime_ns = o.mtime_ns, r.ctime_ns = o.ctime_ns;
    *tail = in.substr(sizeof(InodeV1));
    *out = r;
    return true;
}

// An inode record of formats 2 and 3: a byte saying which of atime (1) and
// ctime (2) equal mtime, then mode nlink uid gid rdev size mapped parent as
// varints, the times as zigzag seconds and ns (mtime, then the others unless
// they equal it), then the tail: a symlink's target or (format 3) a regular
// file's first extent block. Format 4 stores fewer bytes (meta/records.cc).
bool decode_inode_v3(std::string_view in, InodeRecord* out, std::string_view* tail) {
    if (in.empty() || (static_cast<std::uint8_t>(in[0]) & ~3u) != 0) return false;
    const auto same = static_cast<std::uint8_t>(in[0]);
    std::size_t pos = 1;
    InodeRecord r;
    if (!get_varint_as(in, &pos, &r.mode) || !get_varint_as(in, &pos, &r.nlink) ||
        !get_varint_as(in, &pos, &r.uid) || !get_varint_as(in, &pos, &r.gid) ||
        !get_varint_as(in, &pos, &r.rdev) || !get_varint_as(in, &pos, &r.size) ||
        !get_varint_as(in, &pos, &r.mapped) || !get_varint_as(in, &pos, &r.parent) ||
        !get_time(in, &pos, &r.mtime_s, &r.mtime_ns))
        return false;
    r.atime_s = r.ctime_s = r.mtime_s;
    r.atime_ns = r.ctime_ns = r.mtime_ns;
    if (!(same & 1) && !get_time(in, &pos, &r.atime_s, &r.atime_ns)) return false;
    if (!(same & 2) && !get_time(in, &pos, &r.ctime_s, &r.ctime_ns)) return false;
    *tail = in.substr(pos);
    *out = r;
    return true;
}

// The format-4 value of an inode read from an older record (false: a mode
// format 4 cannot hold, which no hiodsfs wrote: the record is damaged).
bool encode_inode(const InodeRecord& r, std::string_view tail, std::string* out) {
    if ((r.mode & ~static_cast<std::uint32_t>(S_IFMT | 07777)) != 0) return false;
    *out = encode(r, tail);
    InodeRecord back;
    std::string_view rest;
    return decode_inode_tail(*out, &back, &rest);  // refuses a type that is not a file type
}

// Old bytes behind a 0xff, which no record or key of the new format starts
// with, so that hiodsfs-fsck names them as damaged instead of reading them.
std::string marked_damaged(std::string_view old) {
    std::string out(1, '\xff');
    out.append(old);
    return out;
}

// An inode value that did not convert, copied so that no format-4 reader
// takes it for a record (0xff is not a valid first byte): fsck names it.
std::string damaged_inode(std::string_view old) { return marked_damaged(old); }

// The chunk id of an old chunk record's key: 8 big-endian bytes before
// format 3, meta/keys.h's form in format 3.
bool old_chunk_id(std::string_view key, std::uint32_t version, ChunkId* id) {
    if (version >= 3) return parse_key_u64(key, id) && *id != 0;
    if (key.size() != 8) return false;
    *id = get_be64(key);
    return *id != 0;
}

// The format-3 key of a format-1 or 2 key of db, which had its numbers as
// 8 big-endian bytes (false: not a valid one). The fingerprint index is
// converted by copy_metadata.
bool convert_key(Db db, std::string_view old, std::string* out) {
    switch (db) {
        case Db::kInodes:
        case Db::kChunks:
        case Db::kDirty:
        case Db::kOrphans:
        case Db::kSegments:
            if (old.size() != 8) return false;
            *out = key_u64(get_be64(old));
            return true;
        case Db::kDirents:
        case Db::kXattrs:
            if (old.size() <= 8) return false;
            *out = key_u64_str(get_be64(old), old.substr(8));
            return true;
        case Db::kExtents:
            if (old.size() != 16) return false;
            *out = key_u64_u64(get_be64(old), get_be64(old, 8));
            return true;
        default:
            *out = std::string(old);  // history (fixed time keys), as before
            return true;
    }
}

// A key that did not parse in the old format, copied so that no format-3
// reader takes it for a number: no format-3 key starts with 0xff (a length
// byte is at most 8), so hiodsfs-fsck names it as a damaged key.
std::string damaged_key(std::string_view old) { return marked_damaged(old); }

// Whether a format-2 value of db (whose format-3 key is key) is a valid
// record: format 3's values are the same, and are copied as they are, but
// the report counts the damaged ones as it does for format 1. (Inodes are
// converted: decode_old_inode.)
bool valid_value(Db db, std::string_view key, std::string_view value) {
    switch (db) {
        case Db::kDirents: {
            DirentValue d;
            return decode(value, &d);
        }
        case Db::kExtents: {
            std::uint64_t ino = 0, start = 0;
            std::vector<MappedExtent> block;
            return parse_key_u64_u64(key, &ino, &start) && decode_extent_block(start, value, &block);
        }
        case Db::kDirty:
        case Db::kSegments:
            return value.size() == (db == Db::kDirty ? 24 : 8);
        default:
            return true;
    }
}

// The format-3 value of a format-1 record of db (false: not a valid one);
// format 2's values are format 3's. (Inodes: decode_old_inode.)
bool convert_value(Db db, std::string_view v1, std::string* out) {
    switch (db) {
        case Db::kExtents:
            return false;  // whole blocks, made in copy_metadata; this one is damaged
        case Db::kDirents: {
            DirentV1 o;
            if (!read_v1(v1, &o) || (o.type & ~static_cast<std::uint32_t>(S_IFMT)) != 0) return false;
            *out = encode(DirentValue{o.ino, o.type});
            return true;
        }
        default:
            *out = std::string(v1);  // the same in both formats
            return true;
    }
}

// The paths below name the store through its descriptor (StoreDir::via_fd);
// none follows a symbolic link at its end, and remove_all removes a link,
// never what it points to.
std::uint64_t file_size(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status remove_tree(const StoreDir& store, const std::string& name) {
    std::error_code ec;
    std::filesystem::remove_all(store.via_fd() + "/" + name, ec);
    if (ec)
        return Status::error(ec.value(),
                             "remove " + store.path() + "/" + name + ": " + ec.message());
    return Status::ok();
}

// Opens the metadata in the store's directory `name`.
Status open_metadata(StoreDir& store, const std::string& name, MetaStoreOptions options,
                     bool create, std::unique_ptr<MetaStore>* out) {
    std::string dir;
    HIODSFS_TRY(store.library_dir(name, create, &dir));
    if (options.map_bytes == 0)
        options.map_bytes =
            std::min<std::uint64_t>(1ull << 40, 2 * file_size(dir + "/data.mdb") + (256ull << 20));
    return store.named(MetaStore::open(dir, options, out));
}

// Whether the metadata in the store's directory `name` (a finished copy) is
// of this format: the copy of FORMAT that copy_metadata writes last says
// so. A copy made by an older hiodsfs has none, or its own version.
Status holds_current_format(StoreDir& store, const std::string& name, bool* out) {
    MetaStoreOptions ro;
    ro.map_bytes = 0;  // from the file's size
    ro.read_only = true;
    ro.create = false;
    std::unique_ptr<MetaStore> m;
    HIODSFS_TRY(open_metadata(store, name, ro, false, &m));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(m->begin(&t));
    StoreFormat copy;
    bool found = false;
    HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    *out = found && copy.version == kFormatVersion;
    return Status::ok();
}

Status rename_durably(Env* env, const std::string& store, const std::string& from, const std::string& to) {
    HIODSFS_TRY(env->rename(store + "/" + from, store + "/" + to));
    return env->sync_dir(store);
}

// Copies every record of the old environment into the new one, converting
// the keys' numbers and, from format 1, the values and fingerprint keys;
// commits every kBatch records so no transaction holds the whole store.
//
// Format 1 let a clone (cp's copy_file_range) share raw chunks without
// queueing the copy for the background pass, which then re-cut only the
// source: the copy kept the raw bytes, stored twice, for good. Every file
// that maps a raw chunk is queued for the pass once more.
Status copy_metadata(MetaStore& from, const StoreFormat& format, MetaStore& to, UpgradeReport* report) {
    const std::uint32_t version = format.version;
    constexpr std::uint64_t kBatch = 65536;
    std::unique_ptr<Txn> rd, wr;
    HIODSFS_TRY(from.begin(&rd));
    std::unordered_set<ChunkId> raw;
    if (version == 1) {
        Cursor c = rd->cursor(Db::kChunks);
        for (bool ok = c.first(); ok; ok = c.next()) {
            ChunkV1 o;
            if (c.key().size() == 8 && read_v1(c.value(), &o) && !(o.flags & ChunkRecord::kIndexed))
                raw.insert(get_be64(c.key()));
        }
        HIODSFS_TRY(c.status());
    }
    std::map<InodeId, std::pair<std::uint64_t, std::uint64_t>> sweep;  // ino -> [first, end) of raw extents
    HIODSFS_TRY(to.begin(&wr));
    wr->super() = rd->super();
    std::uint64_t in_batch = 0;
    // Counts a record written and commits every kBatch.
    auto counted = [&]() -> Status {
        ++report->records;
        if (++in_batch < kBatch) return Status::ok();
        in_batch = 0;
        HIODSFS_TRY(wr->commit());
        wr.reset();
        HIODSFS_TRY(to.commit_group(nullptr));
        return to.begin(&wr);
    };
    auto put = [&](Db db, std::string_view key, std::string_view value) -> Status {
        HIODSFS_TRY(wr->put(db, key, value));
        return counted();
    };
    // Extent blocks go where format 3 keeps them (a regular file's block at
    // 0 in its inode record, copied before them: Db::kInodes comes first).
    auto put_block = [&](InodeId ino, std::uint64_t start, std::string_view value) -> Status {
        HIODSFS_TRY(put_extent_block(*wr, ino, start, value));
        return counted();
    };
    std::vector<MappedExtent> block;
    InodeId block_ino = 0;
    auto flush_block = [&]() -> Status {
        if (block.empty()) return Status::ok();
        const std::string v = encode_extent_block(block.data(), block.size());
        const std::uint64_t start = block.front().start;
        block.clear();
        return put_block(block_ino, start, v);
    };
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
        const Db db = static_cast<Db>(i);
        if (db == Db::kSuper) continue;  // the state record goes with every commit
        Cursor c = rd->cursor(db);
        for (bool ok = c.first(); ok; ok = c.next()) {
            const std::string_view key = c.key(), value = c.value();
            if (db == Db::kFingerprints) {
                // Format 4 keeps the index in buckets (meta/fingerprint_index.h).
                // Formats 2 and 3: the digest's first 8 bytes + chunk id;
                // format 1: digest -> big-endian chunk id. An entry that does
                // not parse is left out: fsck adds the entries of indexed
                // chunks the index lacks, so it loses nothing.
                ChunkId id = 0;
                const bool ok = version == 1 ? key.size() == 32 && value.size() == 8 && (id = get_be64(value)) != 0
                                             : key.size() > 8 && read_tail_u64(key.substr(8), &id);
                if (!ok) {
                    ++report->damaged_records;
                    continue;
                }
                HIODSFS_TRY(add_fingerprint(*wr, get_be64(key), id));
                HIODSFS_TRY(counted());
                continue;
            }
            if (db == Db::kChunks) {
                // Format 4 keeps chunk records in blocks; one that does not
                // convert is copied under a key no reader takes for a block.
                ChunkId id = 0;
                ChunkRecord r;
                if (old_chunk_id(key, version, &id) &&
                    (version == 1 ? decode_chunk_v1(value, &r) : decode_chunk_v3(value, &r))) {
                    HIODSFS_TRY(put_chunk(*wr, id, r));
                    HIODSFS_TRY(counted());
                } else {
                    ++report->damaged_records;
                    HIODSFS_TRY(put(db, damaged_key(key), value));
                }
                continue;
            }
            ExtentV1 ext;
            if (version == 1 && db == Db::kExtents && key.size() == 16 && read_v1(value, &ext) &&
                ext.length != 0) {
                const InodeId ino = get_be64(key);
                const MappedExtent m{get_be64(key, 8), ExtentRecord{ext.chunk, ext.chunk_off, ext.length}};
                if (m.start > std::numeric_limits<std::uint64_t>::max() - m.e.length) {
                    ++report->damaged_records;
                    HIODSFS_TRY(put(db, key, value));
                    continue;
                }
                if (raw.count(ext.chunk)) {
                    auto [it, fresh] = sweep.emplace(ino, std::make_pair(m.start, m.end()));
                    it->second.first = std::min(it->second.first, m.start);
                    it->second.second = std::max(it->second.second, m.end());
                }
                // Format 2 keeps a file's extents in blocks (meta/extent_map.h).
                if (ino != block_ino || (!block.empty() && m.start < block.back().end()))
                    HIODSFS_TRY(flush_block());
                block_ino = ino;
                block.push_back(m);
                if (block.size() == kExtentsPerBlock) HIODSFS_TRY(flush_block());
                continue;
            }
            if (db == Db::kExtents) HIODSFS_TRY(flush_block());  // a damaged record between blocks
            std::string new_key, converted;
            bool whole = version >= 3 ? (new_key = std::string(key), true) : convert_key(db, key, &new_key);
            if (!whole) new_key = damaged_key(key);
            bool converts = true;
            if (db == Db::kInodes) {
                // Format 4 encodes an inode's fields anew; its tail is kept.
                InodeRecord r;
                std::string_view tail;
                converts = decode_old_inode(version, value, &r, &tail) &&
                           encode_inode(r, tail, &converted);
            } else if (version != 1) {
                whole = whole && valid_value(db, new_key, value);
                std::uint64_t ino = 0, start = 0;
                if (whole && db == Db::kExtents && parse_key_u64_u64(new_key, &ino, &start)) {
                    HIODSFS_TRY(put_block(ino, start, value));
                    continue;
                }
                converted = std::string(value);
            } else {
                converts = convert_value(db, value, &converted);
            }
            // One that does not convert is as damaged as it was: fsck reports it.
            if (!converts)
                converted = db == Db::kInodes ? damaged_inode(value) : std::string(value);
            whole = whole && converts;
            if (!whole) ++report->damaged_records;
            HIODSFS_TRY(put(db, new_key, converted));
        }
        HIODSFS_TRY(c.status());
        if (db == Db::kExtents) HIODSFS_TRY(flush_block());
    }
    for (const auto& [ino, range] : sweep) {
        // A dirty record: big-endian inode, offset and length (engine/background.cc).
        std::string v;
        put_be64(&v, ino);
        put_be64(&v, range.first);
        put_be64(&v, range.second - range.first);
        auto& sup = wr->super();
        HIODSFS_TRY(put(Db::kDirty, key_u64(sup.next_dirty++), v));
        sup.counters.backlog_records += 1;
        sup.counters.backlog_bytes += range.second - range.first;
        ++report->files_queued;
    }
    // Last: what says the copy is whole and of this format (holds_current_format).
    HIODSFS_TRY(write_format_copy(*wr, StoreFormat{kFormatVersion, format.chunking, format.tier}));
    HIODSFS_TRY(wr->commit());
    wr.reset();
    return to.commit_group(nullptr);
}

}  // namespace

bool decode_old_inode(std::uint32_t version, std::string_view in, InodeRecord* out,
                      std::string_view* tail) {
    return version == 1 ? decode_inode_v1(in, out, tail) : decode_inode_v3(in, out, tail);
}

Status upgrade_store(const UpgradeOptions& options, UpgradeReport* report) {
    *report = UpgradeReport{};
    const std::string& dir = options.store;
    StoreDirOptions dir_options;
    dir_options.check_owner = !options.any_store_owner;
    dir_options.waiver = "--unsafe-store-dir accepts it";
    std::unique_ptr<StoreDir> store;
    HIODSFS_TRY(StoreDir::open(dir, dir_options, &store));
    auto at = [&](const std::string& name) { return store->via_fd() + "/" + name; };
    auto step = [&](std::string_view name) {
        return options.after_step ? options.after_step(name) : Status::ok();
    };
    Env* env = store->env();
    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(env, dir, &format, &exists));
    if (!exists) return Status::error(ENOENT, dir + " is not a hiodsfs store (it has no FORMAT record)");
    report->from_version = format.version;
    report->to_version = kFormatVersion;
    // An encrypted store (format 6) was made by this hiodsfs: nothing to do.
    if (format.version == kEncryptedFormatVersion) {
        report->to_version = format.version;
        report->already_current = true;
        return Status::ok();
    }
    if (format.version > kFormatVersion) return check_format_version(dir, format);
    if (format.version < 1 || format.version > kFormatVersion)
        return Status::error(EPROTO, "store " + dir + " has format version " + std::to_string(format.version) +
                                         ", which this hiodsfs cannot upgrade");
    std::unique_ptr<StoreLock> lock;
    Status locked = StoreLock::acquire(*store, true, 0, &lock);
    if (locked.err() == EBUSY)
        return Status::error(EBUSY, locked.message() + "; unmount it before upgrading");
    HIODSFS_TRY(locked);

    // The old metadata is set aside under its format's name. Names for
    // messages; at(name) for the file system.
    auto set_aside = [](std::uint32_t v) { return "meta.format" + std::to_string(v); };
    const std::string old_name = set_aside(format.version), new_name = "meta.upgrade";
    const std::string old_meta = dir + "/" + old_name, new_meta = dir + "/" + new_name;
    if (format.version == kFormatVersion) {
        // Done before, or interrupted after FORMAT was written (from either format).
        report->already_current = true;
        for (std::uint32_t v = 1; v < kFormatVersion; ++v) {
            if (!is_dir(at(set_aside(v)))) continue;
            report->already_current = false;
            report->resumed = true;
            HIODSFS_TRY(remove_tree(*store, set_aside(v)));
        }
        report->bytes_after = file_size(at("meta/data.mdb"));
        return Status::ok();
    }
    if (format.version >= kOldestOpenableFormat) {
        // Format 4's metadata is format 5's: only FORMAT says 5 now (the
        // metadata's copy follows at the next read-write mount).
        format.version = kFormatVersion;
        HIODSFS_TRY(write_store_format(env, dir, format));
        report->bytes_before = report->bytes_after = file_size(at("meta/data.mdb"));
        return Status::ok();
    }
    if (is_dir(at(old_name))) {
        // An upgrade to format 2 by an older hiodsfs, interrupted after its
        // copy was complete, left a copy this one must not put in place:
        // the old metadata goes back, and the copy is made anew below.
        const std::string copy = is_dir(at("meta")) ? "meta" : new_name;
        bool current = true;
        if (is_dir(at(copy))) HIODSFS_TRY(holds_current_format(*store, copy, &current));
        if (!current) {
            HIODSFS_TRY(remove_tree(*store, copy));
            HIODSFS_TRY(rename_durably(env, dir, old_name, "meta"));
        }
    }
    if (is_dir(at(old_name))) {
        // Interrupted after the copy was complete: finish the swap.
        report->resumed = true;
        if (!is_dir(at("meta"))) {
            if (!is_dir(at(new_name)))
                return Status::error(EUCLEAN, "store " + dir + ": the upgrade was interrupted and " + new_meta +
                                                  " is gone; the old metadata is in " + old_meta +
                                                  ": rename it to meta and run the upgrade again");
            HIODSFS_TRY(rename_durably(env, dir, new_name, "meta"));
        }
    } else {
        HIODSFS_TRY(remove_tree(*store, new_name));  // an unfinished copy
        report->bytes_before = file_size(at("meta/data.mdb"));
        {
            MetaStoreOptions ro;
            ro.map_bytes = std::min<std::uint64_t>(1ull << 40, 2 * report->bytes_before + (256ull << 20));
            ro.read_only = true;
            ro.create = false;
            ro.check_bytes = ~std::uint64_t{0};  // every record is copied
            std::unique_ptr<MetaStore> from;
            Status opened = open_metadata(*store, "meta", ro, false, &from);
            if (!opened) return Status::error(EUCLEAN, "store " + dir + ": its metadata cannot be read (" +
                                                           opened.message() + "); nothing was changed");
            if (!from->had_super())
                return Status::error(EUCLEAN, "store " + dir + ": its metadata has no state record; nothing was changed");
            MetaStoreOptions rw;
            rw.map_bytes = ro.map_bytes;
            std::unique_ptr<MetaStore> to;
            HIODSFS_TRY(open_metadata(*store, new_name, rw, true, &to));
            HIODSFS_TRY(copy_metadata(*from, format, *to, report));
        }
        HIODSFS_TRY(env->sync_dir(new_meta));
        HIODSFS_TRY(step("copied"));
        HIODSFS_TRY(rename_durably(env, dir, "meta", old_name));
        HIODSFS_TRY(step("old set aside"));
        HIODSFS_TRY(rename_durably(env, dir, new_name, "meta"));
    }
    HIODSFS_TRY(step("new in place"));
    format.version = kFormatVersion;
    HIODSFS_TRY(write_store_format(env, dir, format));
    HIODSFS_TRY(step("format written"));
    // And a format-1 copy an interrupted 1 -> 2 upgrade may have left.
    for (std::uint32_t v = 1; v < kFormatVersion; ++v)
        HIODSFS_TRY(remove_tree(*store, set_aside(v)));
    HIODSFS_TRY(env->sync_dir(dir));
    report->bytes_after = file_size(at("meta/data.mdb"));
    return Status::ok();
}

}  // namespace hiodsfs
