// The fingerprint index's rules (src/engine/chunk_index): a digest finds
// the fingerprinted chunk that has it, and never another whose digest only
// shares its 8-byte prefix, a raw chunk, a damaged one or an entry whose
// chunk is gone; taking a chunk out of the index leaves the other entries
// of its prefix; a chunk flagged damaged is out of the index for good.
#include "engine/chunk_index.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "engine_test_util.h"
#include "meta/chunk_table.h"
#include "meta/fingerprint_index.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// A digest whose first 8 bytes (the index's prefix) are all `prefix` and
// whose last byte is `last`: digests that differ in `last` only share an
// index entry's prefix.
Digest digest_of(std::uint8_t prefix, std::uint8_t last) {
    Digest d;
    std::fill(d.bytes.begin(), d.bytes.begin() + 8, prefix);
    d.bytes.back() = last;
    return d;
}

ChunkRecord record_of(const Digest& d, std::uint8_t flags) {
    ChunkRecord r;
    r.segment = 1;
    r.offset = 4096;
    r.length = 4096;
    r.set_refs(1);
    r.flags = flags;
    r.digest = d;
    return r;
}

// A metadata store of its own for each test, and one operation on it.
struct IndexStore {
    TempDir dir;
    std::unique_ptr<MetaStore> meta;
    std::unique_ptr<Txn> t;

    IndexStore() {
        REQUIRE(MetaStore::open(dir.path() + "/meta", 1ull << 30, false, &meta).is_ok());
        REQUIRE(meta->begin(&t).is_ok());
    }

    // Stores chunk id's record; an indexed one gets its entry too.
    void add(ChunkId id, const ChunkRecord& r) {
        REQUIRE(put_chunk(*t, id, r).is_ok());
        if (r.flags & ChunkRecord::kIndexed) REQUIRE(index_chunk(*t, id, r.digest).is_ok());
    }

    ChunkId find(const Digest& d) {
        ChunkId id = 99;
        ChunkRecord r;
        REQUIRE(find_indexed_chunk(*t, d, &id, &r).is_ok());
        if (id != 0) CHECK(r.digest == d);
        return id;
    }

    std::vector<ChunkId> candidates(const Digest& d) {
        std::vector<ChunkId> ids;
        REQUIRE(index_candidates(*t, d, &ids).is_ok());
        std::sort(ids.begin(), ids.end());
        return ids;
    }

    ChunkRecord stored(ChunkId id) {
        ChunkRecord r;
        bool found = false;
        REQUIRE(get_chunk(*t, id, &r, &found).is_ok());
        REQUIRE(found);
        return r;
    }
};

}  // namespace

TEST_CASE("chunk index: a digest finds its own chunk, never one that only shares its prefix",
          "[engine][chunk-index]") {
    IndexStore s;
    const Digest a = digest_of(7, 1), b = digest_of(7, 2), c = digest_of(7, 3);
    s.add(1, record_of(a, ChunkRecord::kIndexed));
    s.add(2, record_of(b, ChunkRecord::kIndexed));
    // Listed under the same prefix, both are candidates for each digest.
    CHECK(s.candidates(a) == std::vector<ChunkId>{1, 2});
    CHECK(s.candidates(b) == std::vector<ChunkId>{1, 2});
    CHECK(s.candidates(digest_of(8, 1)).empty());
    CHECK(s.find(a) == 1);
    CHECK(s.find(b) == 2);
    CHECK(s.find(c) == 0);  // same prefix, another digest: no chunk has it

    // Entries that would share the wrong bytes are passed over: one whose
    // chunk is gone, a raw chunk's, a damaged chunk's.
    REQUIRE(index_chunk(*s.t, 3, c).is_ok());  // chunk 3 has no record
    s.add(4, record_of(c, 0));
    REQUIRE(index_chunk(*s.t, 4, c).is_ok());
    s.add(5, record_of(c, ChunkRecord::kIndexed | ChunkRecord::kDamaged));
    CHECK(s.candidates(c) == std::vector<ChunkId>{1, 2, 3, 4, 5});
    CHECK(s.find(c) == 0);
    // Once a good chunk has it, that one is found.
    s.add(6, record_of(c, ChunkRecord::kIndexed));
    CHECK(s.find(c) == 6);
    CHECK(s.find(a) == 1);
}

TEST_CASE("chunk index: unindexing a chunk takes out its own entry only; a raw chunk has none",
          "[engine][chunk-index]") {
    IndexStore s;
    const Digest a = digest_of(9, 1), b = digest_of(9, 2);
    const ChunkRecord ra = record_of(a, ChunkRecord::kIndexed);
    s.add(1, ra);
    s.add(2, record_of(b, ChunkRecord::kIndexed));
    REQUIRE(unindex_chunk(*s.t, 1, ra).is_ok());
    CHECK(s.candidates(a) == std::vector<ChunkId>{2});
    CHECK(s.find(a) == 0);
    CHECK(s.find(b) == 2);
    // A raw chunk's record says it has no fingerprint: nothing is removed,
    // whatever the digest field holds.
    REQUIRE(unindex_chunk(*s.t, 2, record_of(b, 0)).is_ok());
    CHECK(s.find(b) == 2);
}

TEST_CASE("chunk index: a chunk flagged damaged leaves the index and is never found again",
          "[engine][chunk-index]") {
    IndexStore s;
    const Digest a = digest_of(5, 1), b = digest_of(5, 2);
    s.add(1, record_of(a, ChunkRecord::kIndexed));
    s.add(2, record_of(b, ChunkRecord::kIndexed));
    ChunkRecord r = s.stored(1);
    REQUIRE(flag_damaged(*s.t, 1, &r).is_ok());
    CHECK((r.flags & ChunkRecord::kDamaged) != 0);
    CHECK((s.stored(1).flags & ChunkRecord::kDamaged) != 0);
    CHECK(s.stored(1).refs() == 1);  // its users keep it until fsck heals them
    CHECK(s.candidates(a) == std::vector<ChunkId>{2});
    CHECK(s.find(a) == 0);
    // Even if an entry for it came back, a damaged chunk is not shared.
    REQUIRE(index_chunk(*s.t, 1, a).is_ok());
    CHECK(s.find(a) == 0);
    // Flagging it again changes nothing.
    REQUIRE(flag_damaged(*s.t, 1, &r).is_ok());
    CHECK(s.candidates(a) == std::vector<ChunkId>{1, 2});
    CHECK(s.find(b) == 2);
}
