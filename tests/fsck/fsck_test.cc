// hiodsfs-fsck: a store is built through the engine, closed, damaged on
// purpose, and the binary (run as a subprocess) must find each kind of
// damage (exit 4), repair what is repairable (exit 1), and find nothing on a
// second run (exit 0). Data that a repair keeps must read back unchanged.
#include "fsck/fsck.h"

#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>

#include "../engine/engine_test_util.h"
#include "../skip.h"
#include "fsck_test_util.h"
#include "engine/chunk_index.h"
#include "meta/fingerprint_index.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// Damage found without --repair (exit 4), repaired (exit 1), then clean.
void find_repair_clean(Store& s, const std::string& expect) {
    Run r = fsck({s.path()});
    INFO(r.out);
    CHECK(r.code == 4);
    CHECK(has(r, expect));
    CHECK(has(r, "left uncorrected"));
    // The hint leads to the repair below.
    CHECK(has(r, "hiodsfs-fsck --repair " + s.path() + " repairs "));
    r = fsck({s.path(), "--repair"});
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(has(r, "REPAIRED: "));
    CHECK(has(r, "all repaired"));
    r = fsck({s.path()});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, ": clean"));
    CHECK(check_invariants(s.path()).empty());
}

}  // namespace

TEST_CASE("fsck: a store made by the engine is clean", "[fsck]") {
    Store s;
    Run r = fsck({s.path()});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, ": clean"));
    CHECK(has(r, "checked 6 inodes"));
    r = fsck({s.path(), "--scrub"});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "scrubbed 24 chunks"));
    // The library says the same.
    FsckReport rep;
    REQUIRE(run_fsck(FsckOptions{s.path()}, &rep).is_ok());
    CHECK(rep.exit_code() == 0);
}

TEST_CASE("fsck: wrong reference counts and counters are recomputed", "[fsck]") {
    Store s;
    ChunkId id = s.extent(s.a, 0).chunk;
    s.edit([&](Txn& t) {
        bool found = false;
        ChunkRecord r;
        REQUIRE(get_chunk(t, id, &r, &found).is_ok());
        REQUIRE(found);
        r.set_refs(7);
        REQUIRE(put_chunk(t, id, r).is_ok());
        t.super().counters.stored_bytes += 123;
        REQUIRE(t.put(Db::kSegments, key_u64(r.segment), be64(1)).is_ok());
    });
    find_repair_clean(s, "chunk " + std::to_string(id) + " has reference count 7, but 2 extents refer to it");
    CHECK(s.read(s.a) == s.a_data);
}

TEST_CASE("fsck: a dead-bytes counter the segments disagree with is noted, and --repair sets it", "[fsck]") {
    // hiodsfs-stat's "reclaimable" figure. A crash in the middle of a
    // compaction may leave it off; it misleads, but loses nothing.
    Store s;
    s.edit([&](Txn& t) { t.super().counters.dead_bytes += 12345; });
    Run r = fsck({s.path()});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "the counter of dead chunk bytes is "));
    CHECK(has(r, "(--repair sets it)"));
    r = fsck({s.path(), "--repair"});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "; it is set"));
    r = fsck({s.path()});
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(!has(r, "dead chunk bytes"));
    CHECK(check_invariants(s.path()).empty());
}

TEST_CASE("fsck: a deleted extent leaves an unreferenced chunk that is dropped", "[fsck]") {
    Store s;
    ChunkId id = s.extent(s.b, 8192).chunk;
    s.edit([&](Txn& t) {
        std::vector<ExtentCut> cuts;  // the map loses one extent; nothing else is told
        REQUIRE(splice_extents(t, s.b, 8192, 12288, {}, &cuts).is_ok());
        REQUIRE(cuts.size() == 1);
    });
    find_repair_clean(s, "chunk " + std::to_string(id) + " (4096 bytes) is referenced by no file");
    auto b = s.read(s.b);
    std::vector<std::uint8_t> want = s.b_data;
    std::fill(want.begin() + 8192, want.begin() + 12288, 0);  // now a hole
    CHECK(b == want);
}

TEST_CASE("fsck: a deleted chunk record is rebuilt from its segment record", "[fsck]") {
    Store s;
    ChunkId id = s.extent(s.a, 4096).chunk;
    s.edit([&](Txn& t) { REQUIRE(del_chunk(t, id).is_ok()); });
    find_repair_clean(s, "chunk " + std::to_string(id) + " has no record (missing); it holds /a bytes 4096-8191");
    CHECK(s.read(s.a) == s.a_data);
    CHECK((s.chunk(id).flags & ChunkRecord::kIndexed) != 0);
}

TEST_CASE("fsck: a damaged block of chunk records is dropped and its records rebuilt", "[fsck]") {
    Store s;
    // All of the test's chunks share the first block of ids.
    const ChunkId a0 = s.extent(s.a, 0).chunk, a1 = s.extent(s.a, 4096).chunk;
    REQUIRE(chunk_block_of(a0) == chunk_block_of(a1));
    s.edit([&](Txn& t) { REQUIRE(t.put(Db::kChunks, chunk_block_key(a0), std::string("\xff\xff\x09", 3)).is_ok()); });
    auto out = fsck({s.path()});
    CHECK(has(out, "chunk record block with a damaged key or value"));
    CHECK(has(out, "chunk " + std::to_string(a1) + " has no record (damaged); it holds /a bytes 4096-8191"));
    find_repair_clean(s, "chunk " + std::to_string(a0) + " has no record (damaged)");
    CHECK(s.read(s.a) == s.a_data);
    CHECK(s.read(s.b) == s.b_data);
    CHECK((s.chunk(a1).flags & ChunkRecord::kIndexed) != 0);
}

TEST_CASE("fsck: fingerprint index entries missing or dangling", "[fsck]") {
    Store s;
    const ChunkId id = s.extent(s.a, 0).chunk;
    ChunkRecord r = s.chunk(id);
    // Buckets made below the store's own (whose keys are digests' prefixes,
    // far above 300), so that they cut none of its buckets' ranges.
    const std::uint64_t low = 100;
    s.edit([&](Txn& t) {
        bool listed = false;
        REQUIRE(remove_fingerprint(t, fingerprint_prefix(r.digest), id, &listed).is_ok());
        REQUIRE(listed);
        REQUIRE(add_fingerprint(t, fingerprint_prefix(r.digest), 999999).is_ok());
        REQUIRE(t.put(Db::kFingerprints, std::string(5, 'x'), "").is_ok());  // not a bucket's key
        REQUIRE(t.put(Db::kFingerprints, be64(low), std::string_view("\x01", 1)).is_ok());
        // An entry above the next bucket's start: no lookup would find it.
        const FingerprintEntry stray{low + 105, 999998};
        REQUIRE(t.put(Db::kFingerprints, be64(low + 100), encode_fingerprint_bucket(&stray, 1)).is_ok());
        const FingerprintEntry next{low + 101, 999997};
        REQUIRE(t.put(Db::kFingerprints, be64(low + 101), encode_fingerprint_bucket(&next, 1)).is_ok());
    });
    auto out = fsck({s.path()});
    CHECK(has(out, "fingerprint index entry names chunk 999999, which does not exist"));
    CHECK(has(out, "fingerprint index entry of chunk 999998 lies outside its bucket"));
    CHECK(has(out, "fingerprint index entry names chunk 999997, which does not exist"));
    std::size_t damaged = 0;
    for (std::size_t at = 0; (at = out.out.find("a damaged fingerprint index bucket", at)) != std::string::npos; ++at)
        ++damaged;
    CHECK(damaged == 2);  // the key that is not a bucket's, the value that is not one
    find_repair_clean(s, "the fingerprint index does not list it");
    out = fsck({s.path()});
    CHECK_FALSE(has(out, "999999"));
    CHECK_FALSE(has(out, "999998"));
    std::size_t buckets = 0;
    s.edit([&](Txn& t) {
        REQUIRE(for_each_fingerprint_bucket(t, [&](const StoredFingerprintBucket& b) {
                    CHECK(b.value_ok);
                    ++buckets;
                    return Status::ok();
                }).is_ok());
        std::vector<ChunkId> ids;
        REQUIRE(fingerprint_ids(t, fingerprint_prefix(r.digest), &ids).is_ok());
        CHECK(ids == std::vector<ChunkId>{id});
    });
    CHECK(buckets >= 1);
}

TEST_CASE("fsck: two fingerprinted chunks with one digest keep one in the index", "[fsck]") {
    Store s;
    // Chunk b's record is made to claim a's content: two indexed chunks, one digest.
    const ChunkId a_id = s.extent(s.a, 0).chunk, b_id = s.extent(s.b, 0).chunk;
    REQUIRE(b_id > a_id);  // b was written after a
    const ChunkRecord a_rec = s.chunk(a_id);
    s.edit([&](Txn& t) {
        ChunkRecord b_rec = s.chunk(b_id);
        REQUIRE(remove_fingerprint(t, fingerprint_prefix(b_rec.digest), b_id).is_ok());
        b_rec.digest = a_rec.digest;
        REQUIRE(put_chunk(t, b_id, b_rec).is_ok());
        REQUIRE(index_chunk(t, b_id, b_rec.digest).is_ok());
    });
    find_repair_clean(s, "chunk " + std::to_string(b_id) + " has the fingerprint of chunk " +
                             std::to_string(a_id) + "; it is kept as a not-deduplicated chunk");
    CHECK((s.chunk(a_id).flags & ChunkRecord::kIndexed) != 0);
    CHECK((s.chunk(b_id).flags & ChunkRecord::kIndexed) == 0);
    CHECK(s.read(s.b) == s.b_data);
}

TEST_CASE("fsck: a deleted inode is made again from the blocks of its map that survive", "[fsck]") {
    Store s;
    // Format 3 keeps a file's extent block at offset 0 in its inode record,
    // so that block goes with the record; a file of 40 extents has two more
    // blocks in the extents database, which survive.
    constexpr std::size_t kExtents = 40, kInline = kExtentsPerBlock * 4096;
    std::mt19937_64 rng(7);
    const auto data = random_bytes(rng, kExtents * 4096);
    InodeId big = 0;
    {
        auto e = s.open();
        big = make_file(*e, "big").ino;
        write_all(*e, big, 0, data);
        REQUIRE(e->close().is_ok());
    }
    s.edit([&](Txn& t) { REQUIRE(t.del(Db::kInodes, key_u64(big)).is_ok()); });
    find_repair_clean(s, "inode " + std::to_string(big) + " is missing");
    const auto back = s.read(big);
    REQUIRE(back.size() == data.size());
    CHECK(std::all_of(back.begin(), back.begin() + kInline, [](std::uint8_t b) { return b == 0; }));
    CHECK(std::equal(back.begin() + kInline, back.end(), data.begin() + kInline));
}

TEST_CASE("fsck: an unreachable inode goes to /lost+found; link counts are fixed", "[fsck]") {
    Store s;
    InodeId lost = 0;
    s.edit([&](Txn& t) {
        lost = t.super().next_ino++;
        InodeRecord r;
        r.mode = S_IFREG | 0644;
        r.nlink = 1;
        REQUIRE(t.put(Db::kInodes, key_u64(lost), encode(r)).is_ok());
        t.super().counters.inode_count += 1;
        // And a wrong link count on another file.
        std::string_view v;
        bool found = false;
        REQUIRE(t.get(Db::kInodes, key_u64(s.c), &v, &found).is_ok());
        InodeRecord c;
        REQUIRE(decode(v, &c));
        c.nlink = 5;
        REQUIRE(put_inode(t, s.c, c).is_ok());  // keeps c's extent block
    });
    find_repair_clean(s, "file inode " + std::to_string(lost) + " (0 bytes) is not reachable from /");
    auto e = s.open();
    Attr lf, f;
    REQUIRE(e->lookup(kRootInode, "lost+found", &lf).is_ok());
    CHECK(S_ISDIR(lf.mode));
    REQUIRE(e->lookup(lf.ino, "#" + std::to_string(lost), &f).is_ok());
    CHECK(f.ino == lost);
    CHECK(f.nlink == 1);
    REQUIRE(e->getattr(s.c, &f).is_ok());
    CHECK(f.nlink == 1);
    REQUIRE(e->getattr(kRootInode, &f).is_ok());
    CHECK(f.nlink == 4);  // ., .., dir, lost+found
    REQUIRE(e->close().is_ok());
}

TEST_CASE("fsck: damaged keys are named and removed, never read as other numbers", "[fsck]") {
    Store s;
    s.edit([&](Txn& t) {
        // An xattr key whose length byte is past 8, and an orphan whose
        // number is not in its shortest form.
        REQUIRE(t.put(Db::kXattrs, std::string("\x09user.x"), "v").is_ok());
        REQUIRE(t.put(Db::kOrphans, std::string("\x02\x00\x07", 3), "").is_ok());
    });
    find_repair_clean(s, "extended attribute record with a damaged key");
    Run r = fsck({s.path()});
    CHECK(r.code == 0);
}

TEST_CASE("fsck: a damaged extent block in an inode record is named, not misread", "[fsck]") {
    Store s;
    s.edit([&](Txn& t) {
        std::string_view v, tail;
        bool found = false;
        REQUIRE(t.get(Db::kInodes, key_u64(s.a), &v, &found).is_ok());
        REQUIRE(found);
        InodeRecord r;
        REQUIRE(decode_inode_tail(v, &r, &tail));
        REQUIRE(!tail.empty());  // a's first 16 extents are in its record
        std::string value(v.substr(0, v.size() - tail.size()));
        value += std::string("\x00\x80", 2);  // a length cut short
        REQUIRE(t.put(Db::kInodes, key_u64(s.a), value).is_ok());
    });
    // Reported, and left for the user: no repair can tell where those 16 extents were.
    for (const char* repair : {"--no-repair", "--repair"}) {
        Run r = fsck({s.path(), repair});
        INFO(r.out);
        CHECK(r.code == 4);
        CHECK(has(r, "damaged extent map block of /a from byte 0"));
    }
    CHECK(s.read_error(s.a) == EUCLEAN);  // an error, not bytes of a misread map
}

TEST_CASE("fsck: malformed dirty-queue records are dropped", "[fsck]") {
    Store s;
    s.edit([&](Txn& t) {
        REQUIRE(t.put(Db::kDirty, key_u64(t.super().next_dirty++), "short").is_ok());
        std::string v;
        put_be64(&v, s.a);
        put_be64(&v, 0);
        put_be64(&v, 0);  // zero length
        REQUIRE(t.put(Db::kDirty, key_u64(t.super().next_dirty++), v).is_ok());
    });
    find_repair_clean(s, "dirty-queue record 2 has an impossible range");
}

TEST_CASE("fsck escapes the names it prints, as ls -b does", "[fsck][escape]") {
    Store s;
    const std::string name = "x\nERROR: forged \x1b[2K\xff";
    InodeId ino = 0;
    {
        auto e = s.open();
        ino = make_file(*e, name).ino;
        write_all(*e, ino, 0, s.b_data);  // chunks /dir/b already has: shared
        REQUIRE(e->close().is_ok());
    }
    const ChunkId id = s.extent(ino, 0).chunk;
    const ChunkRecord r = s.chunk(id);
    flip_byte(s.segment_file(r.segment), r.offset + 7);
    // An entry whose type is wrong is named too.
    s.edit([&](Txn& t) {
        REQUIRE(
            t.put(Db::kDirents, key_u64_str(kRootInode, name), encode(DirentValue{ino, S_IFDIR}))
                .is_ok());
    });
    const Run run = fsck({s.path(), "--scrub", "-n"});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "/x\\nERROR:\\ forged\\ \\033[2K\\377 bytes 0-4095"));
    CHECK(has(run, "entry x\\nERROR:\\ forged\\ \\033[2K\\377 in directory 1"));
    CHECK_FALSE(has(run, "\nERROR: forged"));
    CHECK_FALSE(has(run, "\x1b"));
    CHECK_FALSE(has(run, "\xff"));
}

TEST_CASE("fsck: operational errors exit 8 with one line", "[fsck]") {
    Store s;
    SECTION("in use") {
        auto e = s.open();
        Run r = fsck({s.path()});
        INFO(r.out);
        CHECK(r.code == 8);
        CHECK(has(r, "in use by another process (pid " + std::to_string(::getpid()) + ")"));
        CHECK(has(r, "unmount it"));
        CHECK(fsck({s.path(), "--repair"}).code == 8);
        REQUIRE(e->close().is_ok());
    }
    SECTION("bad store paths and arguments") {
        CHECK(fsck({s.dir.path() + "/nope"}).code == 8);
        CHECK(has(fsck({s.dir.path() + "/nope"}), "/nope: No such file or directory"));
        CHECK(has(fsck({s.dir.path()}), "is not a hiodsfs store"));
        CHECK(fsck({s.dir.path()}).code == 8);
        CHECK(fsck({}).code == 8);
        CHECK(fsck({s.path(), "--bogus"}).code == 8);
        CHECK(fsck({s.path(), "-n", "--repair"}).code == 8);
        CHECK(fsck({s.path(), "--repair", "--chunking", "cdc:1/2"}).code == 8);
        CHECK(has(fsck({s.path(), "--chunking", "fixed:3"}), "--chunking: "));
        CHECK(fsck({s.path(), "-n"}).code == 0);
    }
    SECTION("newer format") {
        std::string text;
        {
            std::ifstream in(s.path() + "/FORMAT");
            text.assign(std::istreambuf_iterator<char>(in), {});
        }
        auto at = text.find("format " + std::to_string(kFormatVersion) + "\n");
        REQUIRE(at != std::string::npos);
        text.replace(at, 9, "format 99\n");
        std::ofstream(s.path() + "/FORMAT") << text;
        Run r = fsck({s.path()});
        INFO(r.out);
        CHECK(r.code == 8);
        CHECK(has(r, "format version 99"));
    }
}

// librados is loaded when a rados: store is opened (src/store/librados_api.h),
// so checking a local store maps none of Ceph's libraries: LD_DEBUG=files has
// the dynamic loader name every library it loads, linked or dlopen'd.
TEST_CASE("fsck of a local store loads no Ceph library", "[fsck][librados]") {
    Store s;
    Run r = fsck({s.path()}, "LD_DEBUG=files");
    INFO(r.out.substr(0, 4000));
    CHECK(r.code == 0);
    CHECK(has(r, "file=libcrypto.so"));  // the loader did report what it loads
    CHECK_FALSE(has(r, "librados"));
    CHECK_FALSE(has(r, "libceph"));
}

TEST_CASE("fsck of a rados: store where librados.so.2 cannot be loaded is one line and exit 8",
          "[fsck][librados]") {
#ifndef HIODSFS_HAVE_RADOS
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)");
#else
    TempDir dir;
    const std::string lib = dir.path() + "/lib", cache = dir.path() + "/cache";
    REQUIRE(::mkdir(lib.c_str(), 0755) == 0);
    REQUIRE(::mkdir(cache.c_str(), 0755) == 0);
    // The dynamic loader looks in LD_LIBRARY_PATH first: there librados.so.2
    // is a file that is no library, as a broken installation would have it.
    std::ofstream(lib + "/librados.so.2").flush();
    Run r = fsck({"rados:pool/store", "--cache-dir", cache}, "LD_LIBRARY_PATH='" + lib + "'");
    INFO(r.out);
    CHECK(r.code == 8);
    CHECK(r.out.rfind("hiodsfs-fsck: rados: cannot load librados.so.2 (", 0) == 0);
    CHECK(has(r, "needs the librados2 package"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
#endif
}
