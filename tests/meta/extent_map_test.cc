// The extent map's blocks against a model: random splices (writes,
// overwrites, holes, truncations) of several files leave exactly the
// extents the model holds, in blocks of at most kExtentsPerBlock keyed by
// their first extent; damaged blocks are refused.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "meta/extent_map.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;

// A file's map as the model keeps it: start -> extent.
using Model = std::map<std::uint64_t, ExtentRecord>;

// What splice_extents must do, done on the model; returns the bytes removed.
std::uint64_t model_splice(Model& m, std::uint64_t off, std::uint64_t end, const ExtentRecord* add) {
    std::uint64_t removed = 0;
    Model next;
    for (const auto& [start, e] : m) {
        const std::uint64_t stop = start + e.length;
        if (stop <= off || start >= end) {
            next.emplace(start, e);
            continue;
        }
        removed += std::min(stop, end) - std::max(start, off);
        if (start < off) next.emplace(start, ExtentRecord{e.chunk, e.chunk_off, static_cast<std::uint32_t>(off - start)});
        if (stop > end)
            next.emplace(end, ExtentRecord{e.chunk, static_cast<std::uint32_t>(e.chunk_off + (end - start)),
                                           static_cast<std::uint32_t>(stop - end)});
    }
    if (add != nullptr) next.emplace(off, *add);
    m = std::move(next);
    return removed;
}

void check_same(Txn& t, InodeId ino, const Model& model) {
    std::vector<MappedExtent> got;
    REQUIRE(extents_overlapping(t, ino, 0, ~std::uint64_t{0}, &got).is_ok());
    REQUIRE(got.size() == model.size());
    std::size_t i = 0;
    for (const auto& [start, e] : model) {
        INFO("extent " << i << " of inode " << ino);
        CHECK(got[i].start == start);
        CHECK(got[i].e.chunk == e.chunk);
        CHECK(got[i].e.chunk_off == e.chunk_off);
        CHECK(got[i].e.length == e.length);
        ++i;
    }
    // The blocks: keyed by their first extent, none too large; a regular
    // file's block at offset 0 in its inode record, and only there.
    std::size_t total = 0;
    std::string_view v, tail;
    bool found = false;
    REQUIRE(t.get(Db::kInodes, key_u64(ino), &v, &found).is_ok());
    InodeRecord r;
    const bool regular = found && decode_inode_tail(v, &r, &tail) && S_ISREG(r.mode);
    const bool at_zero = !model.empty() && model.begin()->first == 0;
    CHECK(!tail.empty() == (regular && at_zero));
    if (!tail.empty()) {
        std::vector<MappedExtent> block;
        REQUIRE(decode_extent_block(0, tail, &block));
        CHECK(block.size() <= kExtentsPerBlock);
        total += block.size();
    }
    std::string_view db_zero;
    REQUIRE(t.get(Db::kExtents, key_u64_u64(ino, 0), &db_zero, &found).is_ok());
    CHECK(found == (!regular && at_zero));
    Cursor c = t.cursor(Db::kExtents);
    const std::string prefix = key_u64(ino);
    for (bool ok = c.seek(prefix); ok && c.key().starts_with(prefix); ok = c.next()) {
        std::vector<MappedExtent> block;
        std::uint64_t kino = 0, start = 0;
        REQUIRE(parse_key_u64_u64(c.key(), &kino, &start));
        CHECK(kino == ino);
        REQUIRE(decode_extent_block(start, c.value(), &block));
        REQUIRE(!block.empty());
        CHECK(block.front().start == start);
        CHECK(block.size() <= kExtentsPerBlock);
        total += block.size();
    }
    CHECK(total == model.size());
}

}  // namespace

TEST_CASE("extent map blocks follow a model through random splices", "[meta][extents]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    {
        // 255 and 65536 are regular files (their block at 0 inline, kept
        // by put_inode), 256 a directory, 65535 has no record: Db::kExtents.
        // 65536 is spliced as the engine does it: its block held from the
        // record's read to one put_file_inode() at the end.
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        InodeRecord file, dir_rec;
        file.mode = S_IFREG | 0644;
        dir_rec.mode = S_IFDIR | 0755;
        REQUIRE(put_inode(*t, 255, file).is_ok());
        REQUIRE(put_inode(*t, 65536, file).is_ok());
        REQUIRE(put_inode(*t, 256, dir_rec).is_ok());
        REQUIRE(t->commit().is_ok());
    }
    const std::uint64_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    std::map<InodeId, Model> models;
    ChunkId next_chunk = 1;
    for (int op = 0; op < 4000; ++op) {
        // Neighbours whose encoded numbers change length (meta/keys.h):
        // one file's blocks must never be read as another's.
        constexpr InodeId kInos[] = {255, 256, 65535, 65536};
        const InodeId ino = kInos[rng() % 4];
        Model& model = models[ino];
        // Mostly 4 KiB-aligned small writes over a 1 MiB file, some appends
        // of runs, some holes punched, now and then a truncation.
        const int kind = static_cast<int>(rng() % 10);
        std::uint64_t off = (rng() % 256) * 4096, len = (1 + rng() % 8) * 4096;
        if (kind == 9) len = ~std::uint64_t{0} - off;  // truncate at off
        const std::uint64_t end = off + len;
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        const bool held = ino == 65536;
        InodeRecord held_rec;
        std::string held_block;
        if (held) {
            std::string_view v, tail;
            bool found = false;
            REQUIRE(t->get(Db::kInodes, key_u64(ino), &v, &found).is_ok());
            REQUIRE(found);
            REQUIRE(decode_inode_tail(v, &held_rec, &tail));
            held_block.assign(tail);
        }
        std::vector<ExtentCut> cuts;
        ExtentRecord add{next_chunk++, static_cast<std::uint32_t>(rng() % 3 * 512),
                         static_cast<std::uint32_t>(len - rng() % 2 * 1000)};
        const ExtentRecord* adding = kind < 7 ? &add : nullptr;
        std::uint64_t removed = 0;
        if (kind < 3 && add.length >= 3) {
            // A run of chunks mapped back to back in one splice, as a
            // request maps the chunks it stores.
            std::vector<ExtentRecord> adds;
            const std::uint32_t pieces = 2 + static_cast<std::uint32_t>(rng() % 3);
            for (std::uint32_t k = 0, done = 0; k < pieces; ++k) {
                const std::uint32_t n = k + 1 == pieces ? add.length - done : add.length / pieces;
                adds.push_back(ExtentRecord{k == 0 ? add.chunk : next_chunk++, add.chunk_off, n});
                done += n;
            }
            removed = model_splice(model, off, end, nullptr);
            std::uint64_t at = off;
            for (const ExtentRecord& a : adds) {
                model_splice(model, at, at + a.length, &a);
                at += a.length;
            }
            REQUIRE((held ? splice_extents(*t, ino, &held_block, off, end, std::span<const ExtentRecord>(adds), &cuts)
                          : splice_extents(*t, ino, off, end, std::span<const ExtentRecord>(adds), &cuts))
                        .is_ok());
        } else {
            removed = model_splice(model, off, end, adding);
            const std::span<const ExtentRecord> one(adding, adding != nullptr ? 1 : 0);
            REQUIRE((held ? splice_extents(*t, ino, &held_block, off, end, one, &cuts)
                          : splice_extents(*t, ino, off, end, one, &cuts))
                        .is_ok());
        }
        std::uint64_t cut = 0;
        for (const auto& c : cuts) cut += c.removed;
        CHECK(cut == removed);
        if (held) {
            // What the holder reads before it writes the record back.
            std::vector<MappedExtent> got;
            REQUIRE(extents_overlapping(*t, ino, held_block, 0, ~std::uint64_t{0}, &got).is_ok());
            CHECK(got.size() == model.size());
            held_rec.size = static_cast<std::uint64_t>(op);
            REQUIRE(put_file_inode(*t, ino, held_rec, held_block).is_ok());
        } else if (ino == 255 && op % 3 == 0) {
            // The engine writes the inode's fields after a splice: its block stays.
            InodeRecord r;
            r.mode = S_IFREG | 0644;
            r.size = static_cast<std::uint64_t>(op);
            REQUIRE(put_inode(*t, ino, r).is_ok());
        }
        REQUIRE(t->commit().is_ok());
        t.reset();  // a Txn holds the store's lock while it lives
        if (op % 97 == 0) {
            std::unique_ptr<Txn> r;
            REQUIRE(m->begin(&r).is_ok());
            for (const auto& [i, md] : models) check_same(*r, i, md);
        }
    }
    std::unique_ptr<Txn> r;
    REQUIRE(m->begin(&r).is_ok());
    for (const auto& [i, md] : models) {
        check_same(*r, i, md);
        std::vector<MappedExtent> first;
        REQUIRE(first_extents(*r, i, 5, &first).is_ok());
        REQUIRE(first.size() == std::min<std::size_t>(5, md.size()));
        auto it = md.begin();
        for (const auto& f : first) CHECK(f.start == (it++)->first);
    }
}

TEST_CASE("a file written in order costs about five bytes an extent", "[meta][extents]") {
    std::vector<MappedExtent> run;
    for (std::uint64_t i = 0; i < kExtentsPerBlock; ++i)
        run.push_back(MappedExtent{i * 8192, ExtentRecord{1000000 + i, 0, 8192}});
    const std::string v = encode_extent_block(run.data(), run.size());
    CHECK(v.size() <= 5 * kExtentsPerBlock + 3);  // format 1: 16 bytes of value and 16 of key each
    std::vector<MappedExtent> back;
    REQUIRE(decode_extent_block(0, v, &back));
    REQUIRE(back.size() == run.size());
    for (std::size_t i = 0; i < run.size(); ++i) {
        CHECK(back[i].start == run[i].start);
        CHECK(back[i].e.chunk == run[i].e.chunk);
    }
    // Chunk ids that go down as well as up, and the largest values.
    std::vector<MappedExtent> odd = {{0, ExtentRecord{~ChunkId{0}, 7, 1}},
                                     {100, ExtentRecord{1, ~std::uint32_t{0}, ~std::uint32_t{0}}}};
    back.clear();
    REQUIRE(decode_extent_block(0, encode_extent_block(odd.data(), odd.size()), &back));
    REQUIRE(back.size() == 2);
    CHECK(back[0].e.chunk == ~ChunkId{0});
    CHECK(back[1].e.chunk == 1);
    CHECK(back[1].start == 100);
    CHECK(back[1].e.length == ~std::uint32_t{0});
}

TEST_CASE("damaged extent blocks are refused", "[meta][extents]") {
    std::vector<MappedExtent> two = {{4096, ExtentRecord{5, 0, 4096}}, {8192, ExtentRecord{6, 0, 4096}}};
    const std::string v = encode_extent_block(two.data(), two.size());
    std::vector<MappedExtent> out;
    // A prefix parses only where it ends after a whole extent: the first one.
    const std::size_t one = encode_extent_block(two.data(), 1).size();
    for (std::size_t n = 0; n < v.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        out.clear();
        CHECK(decode_extent_block(4096, v.substr(0, n), &out) == (n == one));
    }
    out.clear();
    CHECK_FALSE(decode_extent_block(4096, "", &out));  // empty
    std::string zero_len;
    for (std::uint64_t f : {0, 0, 10, 0}) put_varint(&zero_len, f);
    CHECK_FALSE(decode_extent_block(0, zero_len, &out));
    std::string gap_first;
    for (std::uint64_t f : {5, 100, 10, 0}) put_varint(&gap_first, f);
    CHECK_FALSE(decode_extent_block(0, gap_first, &out));  // the key must be the first extent's start
    std::string past_end;
    for (std::uint64_t f : {0, 4096, 10, 0}) put_varint(&past_end, f);
    CHECK_FALSE(decode_extent_block(~std::uint64_t{0} - 100, past_end, &out));
}
