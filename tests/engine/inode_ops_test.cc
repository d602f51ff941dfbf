// The metadata helpers (engine/inode_ops.h) alone, on a metadata store of
// their own: inodes, directory entries, extents and the chunk references
// they hold, the dirty queue.
#include "engine/inode_ops.h"

#include <sys/stat.h>

#include "engine/compaction.h"
#include "engine_test_util.h"
#include "meta/chunk_table.h"
#include "meta/dirty_queue.h"
#include "meta/keys.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// A metadata store in a temporary directory, and one operation on it.
struct InodeOpsFixture {
    TempDir dir;
    std::unique_ptr<MetaStore> meta;
    std::unique_ptr<Txn> t;
    InodeOpsFixture() {
        Status st = MetaStore::open(dir.path() + "/meta", 1ull << 30, false, &meta);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        REQUIRE(meta->begin(&t).is_ok());
    }
    Inode file(std::uint32_t mode = S_IFREG | 0644) {
        Inode in;
        in.r.mode = mode;
        in.r.nlink = 1;
        return in;
    }
    // A chunk of len bytes in segment 1 with one reference, counted as a
    // write stores one.
    ChunkId chunk(ChunkId id, std::uint32_t len) {
        ChunkRecord rec;
        rec.segment = 1;
        rec.offset = 24;
        rec.length = len;
        rec.set_refs(1);
        rec.flags = ChunkRecord::kIndexed;
        REQUIRE(put_chunk(*t, id, rec).is_ok());
        REQUIRE(add_segment_live(*t, 1, len).is_ok());
        t->super().counters.stored_bytes += len;
        t->super().counters.chunk_count += 1;
        return id;
    }
    void entry(InodeId parent, const std::string& name, InodeId ino, std::uint32_t type) {
        REQUIRE(t->put(Db::kDirents, key_u64_str(parent, name), encode(DirentValue{ino, type}))
                    .is_ok());
    }
};

}  // namespace

TEST_CASE("an inode stored and loaded reads back the same, with a symlink's target",
          "[inode-ops]") {
    InodeOpsFixture f;
    Inode dir = f.file(S_IFDIR | 0755);
    dir.r.nlink = 2;
    dir.r.parent = kRootInode;
    Inode link = f.file(S_IFLNK | 0777);
    link.target = "../somewhere/else";
    Inode file = f.file();
    file.r.size = 12345;
    REQUIRE(store_inode(*f.t, 2, dir).is_ok());
    REQUIRE(store_inode(*f.t, 3, link).is_ok());
    REQUIRE(store_inode(*f.t, 4, file).is_ok());
    Inode got;
    REQUIRE(load_inode(*f.t, 2, &got).is_ok());
    CHECK(got.r == dir.r);
    REQUIRE(load_inode(*f.t, 3, &got).is_ok());
    CHECK(got.r == link.r);
    CHECK(got.target == link.target);
    REQUIRE(load_inode(*f.t, 4, &got).is_ok());
    CHECK(got.r == file.r);
    CHECK(got.target.empty());
    CHECK(load_inode(*f.t, 5, &got).err() == ENOENT);
    REQUIRE(f.t->put(Db::kInodes, key_u64(6), "not an inode").is_ok());
    CHECK(load_inode(*f.t, 6, &got).err() == EUCLEAN);
}

TEST_CASE("load_dir and resolve_entry tell a missing entry, a file and a removed directory apart",
          "[inode-ops]") {
    InodeOpsFixture f;
    Inode dir = f.file(S_IFDIR | 0755);
    dir.r.nlink = 2;
    REQUIRE(store_inode(*f.t, 2, dir).is_ok());
    REQUIRE(store_inode(*f.t, 3, f.file()).is_ok());
    Inode gone = f.file(S_IFDIR | 0755);
    gone.r.nlink = 0;
    REQUIRE(store_inode(*f.t, 4, gone).is_ok());
    f.entry(2, "a", 3, S_IFREG);

    Inode got;
    CHECK(load_dir(*f.t, 2, &got).is_ok());
    CHECK(load_dir(*f.t, 3, &got).err() == ENOTDIR);
    CHECK(load_dir(*f.t, 4, &got).err() == ENOENT);

    DirentValue e;
    REQUIRE(resolve_entry(*f.t, 2, "a", &e, &got).is_ok());
    CHECK(e.ino == 3);
    CHECK(S_ISREG(got.r.mode));
    CHECK(resolve_entry(*f.t, 2, "b", &e, &got).err() == ENOENT);
    CHECK(resolve_entry(*f.t, 3, "a", &e, &got).err() == ENOTDIR);

    bool empty = false;
    REQUIRE(dir_is_empty(*f.t, 2, &empty).is_ok());
    CHECK(!empty);
    REQUIRE(dir_is_empty(*f.t, 4, &empty).is_ok());
    CHECK(empty);
    REQUIRE(f.t->put(Db::kDirents, key_u64_str(2, "bad"), "?").is_ok());
    bool found = false;
    CHECK(lookup_entry(*f.t, 2, "bad", &e, &found).err() == EUCLEAN);
}

TEST_CASE("touch_dir moves a directory's link count and stamps it", "[inode-ops]") {
    InodeOpsFixture f;
    Inode dir = f.file(S_IFDIR | 0755);
    dir.r.nlink = 2;
    REQUIRE(store_inode(*f.t, 2, dir).is_ok());
    REQUIRE(touch_dir(*f.t, 2, +1).is_ok());
    Inode got;
    REQUIRE(load_inode(*f.t, 2, &got).is_ok());
    CHECK(got.r.nlink == 3);
    CHECK(got.r.mtime_s > 0);
    CHECK(got.r.ctime_s == got.r.mtime_s);
    REQUIRE(touch_dir(*f.t, 2, -2).is_ok());
    REQUIRE(load_inode(*f.t, 2, &got).is_ok());
    CHECK(got.r.nlink == 1);
}

TEST_CASE("replace_range counts mapped and logical bytes, and a chunk's last reference frees it",
          "[inode-ops]") {
    InodeOpsFixture f;
    Inode in = f.file();
    const ChunkId a = f.chunk(10, 4096), b = f.chunk(11, 4096);
    ExtentRecord ea{a, 0, 4096}, eb{b, 0, 4096};
    REQUIRE(map_extent(*f.t, 5, in, 0, ea).is_ok());
    REQUIRE(map_extent(*f.t, 5, in, 8192, eb).is_ok());
    CHECK(in.r.mapped == 8192);
    CHECK(f.t->super().counters.logical_bytes == 8192);
    std::vector<MappedExtent> ex;
    REQUIRE(extents_in(*f.t, 5, in, 0, 16384, &ex).is_ok());
    REQUIRE(ex.size() == 2);
    CHECK(ex[1].start == 8192);

    // Half of a's extent unmapped: a keeps its reference (a piece is left).
    REQUIRE(replace_range(*f.t, 5, in, 2048, 2048, nullptr).is_ok());
    CHECK(in.r.mapped == 6144);
    ChunkRecord rec;
    bool found = false;
    REQUIRE(get_chunk(*f.t, a, &rec, &found).is_ok());
    REQUIRE(found);
    CHECK(rec.refs() == 1);

    // All of b's: b is freed, its bytes dead.
    REQUIRE(replace_range(*f.t, 5, in, 8192, kMaxFileSize, nullptr).is_ok());
    CHECK(in.r.mapped == 2048);
    REQUIRE(get_chunk(*f.t, b, &rec, &found).is_ok());
    CHECK(!found);
    const SpaceCounters& c = f.t->super().counters;
    CHECK(c.logical_bytes == 2048);
    CHECK(c.stored_bytes == 4096);
    CHECK(c.dead_bytes == 4096);
    CHECK(c.chunk_count == 1);
}

TEST_CASE("chunk_ref refuses a missing chunk, an underflow and a count past its limit",
          "[inode-ops]") {
    InodeOpsFixture f;
    CHECK(chunk_ref(*f.t, 99, +1).err() == EUCLEAN);
    CHECK(chunk_ref(*f.t, 99, 0).is_ok());  // nothing to change, nothing looked up
    const ChunkId a = f.chunk(10, 100);
    CHECK(chunk_ref(*f.t, a, -2).err() == EUCLEAN);
    CHECK(chunk_ref(*f.t, a, static_cast<std::int64_t>(ChunkRecord::kMaxRefs)).err() == EOVERFLOW);
    REQUIRE(chunk_ref(*f.t, a, +2).is_ok());
    ChunkRecord rec;
    bool found = false;
    REQUIRE(get_chunk(*f.t, a, &rec, &found).is_ok());
    CHECK(rec.refs() == 3);
}

TEST_CASE("purge_inode frees a file's extents, extended attributes and records", "[inode-ops]") {
    InodeOpsFixture f;
    Inode in = f.file();
    in.r.nlink = 0;
    const ChunkId a = f.chunk(10, 4096);
    REQUIRE(map_extent(*f.t, 7, in, 0, ExtentRecord{a, 0, 4096}).is_ok());
    in.r.size = 4096;
    REQUIRE(store_inode(*f.t, 7, in).is_ok());
    REQUIRE(f.t->put(Db::kXattrs, key_u64_str(7, "user.x"), "1").is_ok());
    REQUIRE(f.t->put(Db::kOrphans, key_u64(7), "").is_ok());
    f.t->super().counters.inode_count = 2;
    f.t->super().counters.file_count = 1;

    REQUIRE(purge_inode(*f.t, 7).is_ok());
    Inode got;
    CHECK(load_inode(*f.t, 7, &got).err() == ENOENT);
    std::string_view v;
    bool found = true;
    REQUIRE(f.t->get(Db::kXattrs, key_u64_str(7, "user.x"), &v, &found).is_ok());
    CHECK(!found);
    REQUIRE(f.t->get(Db::kOrphans, key_u64(7), &v, &found).is_ok());
    CHECK(!found);
    const SpaceCounters& c = f.t->super().counters;
    CHECK(c.inode_count == 1);
    CHECK(c.file_count == 0);
    CHECK(c.logical_bytes == 0);
    CHECK(c.dead_bytes == 4096);
    // A second purge (an orphan record left of a file already gone) only
    // drops the orphan record.
    REQUIRE(f.t->put(Db::kOrphans, key_u64(7), "").is_ok());
    REQUIRE(purge_inode(*f.t, 7).is_ok());
    REQUIRE(f.t->get(Db::kOrphans, key_u64(7), &v, &found).is_ok());
    CHECK(!found);
}

TEST_CASE("queue_dirty adds a range to the dirty queue and to the backlog", "[inode-ops]") {
    InodeOpsFixture f;
    REQUIRE(queue_dirty(*f.t, 5, 4096, 8192).is_ok());
    REQUIRE(queue_dirty(*f.t, 6, 0, 100).is_ok());
    const SpaceCounters& c = f.t->super().counters;
    CHECK(c.backlog_records == 2);
    CHECK(c.backlog_bytes == 8292);
    Cursor cur = f.t->cursor(Db::kDirty);
    REQUIRE(cur.first());
    DirtyRange r;
    REQUIRE(decode_dirty(cur.value(), &r));
    CHECK(r.ino == 5);
    CHECK(r.offset == 4096);
    CHECK(r.length == 8192);
}

TEST_CASE("names, attributes and regular files by the engine's rules", "[inode-ops]") {
    CHECK(check_name("a").is_ok());
    CHECK(check_name(std::string(255, 'x')).is_ok());
    CHECK(check_name(std::string(256, 'x')).err() == ENAMETOOLONG);
    CHECK(check_name("").err() == EINVAL);
    CHECK(check_name(".").err() == EINVAL);
    CHECK(check_name("..").err() == EINVAL);
    CHECK(check_name("a/b").err() == EINVAL);
    CHECK(check_name(std::string("a\0b", 3)).err() == EINVAL);

    Inode dir;
    dir.r.mode = S_IFDIR | 0755;
    Inode link;
    link.r.mode = S_IFLNK | 0777;
    link.target = "target";
    Inode file;
    file.r.mode = S_IFREG | 0600;
    file.r.size = 10000;
    file.r.mapped = 4097;
    CHECK(check_regular(file).is_ok());
    CHECK(check_regular(dir).err() == EISDIR);
    CHECK(check_regular(link).err() == EINVAL);
    CHECK(to_attr(2, dir).size == 4096);
    CHECK(to_attr(3, link).size == 6);
    const Attr a = to_attr(4, file);
    CHECK(a.ino == 4);
    CHECK(a.size == 10000);
    CHECK(a.blocks == 9);
}
