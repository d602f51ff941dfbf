// Chunk records in blocks (format 4) against a model: random puts, changes
// and deletes of chunk ids leave exactly the records the model holds, 16
// ids to a block; chunks written one after another cost about 38 bytes
// with their digest; a damaged block is refused, never misread.
#include <catch2/catch.hpp>

#include <limits>
#include <map>
#include <random>
#include <string>

#include "meta/chunk_table.h"
#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;

ChunkRecord random_record(std::mt19937_64& rng) {
    ChunkRecord r;
    r.segment = static_cast<SegmentId>(rng() % 4);
    r.offset = rng() % (1ull << 30);
    r.length = static_cast<std::uint32_t>(1 + rng() % 65536);
    r.set_refs(1 + rng() % 5);
    r.flags = rng() % 3 == 0 ? 0 : ChunkRecord::kIndexed;
    if (rng() % 10 == 0) r.flags |= ChunkRecord::kDamaged;
    if (r.flags & ChunkRecord::kIndexed)
        for (auto& b : r.digest.bytes) b = static_cast<std::uint8_t>(rng());
    return r;
}

bool same(const ChunkRecord& a, const ChunkRecord& b) {
    return a.location() == b.location() && a.length == b.length && a.refs() == b.refs() && a.flags == b.flags &&
           a.compression() == b.compression() && ((a.flags & ChunkRecord::kIndexed) == 0 || a.digest == b.digest);
}

// Chunks as the write path stores them: one after another in a segment.
std::vector<StoredChunk> written_in_order(ChunkId first, std::size_t n, std::mt19937_64& rng) {
    std::vector<StoredChunk> out;
    std::uint64_t offset = 64;
    for (std::size_t i = 0; i < n; ++i) {
        ChunkRecord r;
        r.segment = 3;
        r.offset = offset;
        r.length = static_cast<std::uint32_t>(2048 + rng() % 30000);
        r.set_refs(1);
        r.flags = ChunkRecord::kIndexed;
        for (auto& b : r.digest.bytes) b = static_cast<std::uint8_t>(rng());
        offset += r.length + 24;  // a segment's record header between payloads
        out.emplace_back(first + i, r);
    }
    return out;
}

}  // namespace

TEST_CASE("a chunk block round-trips, costs about 38 bytes a chunk and refuses damage", "[meta][chunks]") {
    std::mt19937_64 rng(11);
    const auto chunks = written_in_order(16, 16, rng);
    const std::string v = encode_chunk_block(chunks.data(), chunks.size());
    // Format 3 spent 41 bytes of value, a 4-byte key, an 8-byte node header
    // and a 2-byte slot on each (56 with page slack). Here: the map, the
    // first record's segment and offset and the second's gap, then per chunk
    // a lead byte (flags, refs, same gap), the length and the digest.
    CHECK(v.size() <= 2 + 3 + 16 * (1 + 3 + 32));
    std::vector<StoredChunk> back;
    REQUIRE(decode_chunk_block(1, v, &back));
    REQUIRE(back.size() == 16);
    for (std::size_t i = 0; i < 16; ++i) {
        CHECK(back[i].first == chunks[i].first);
        CHECK(same(back[i].second, chunks[i].second));
    }

    // Every prefix, a byte more, a "follows" or a "same gap" on the first
    // record, an empty map: refused.
    for (std::size_t n = 0; n < v.size(); ++n) {
        INFO("length " << n);
        CHECK_FALSE(decode_chunk_block(1, std::string_view(v).substr(0, n), &back));
    }
    CHECK_FALSE(decode_chunk_block(1, v + '\x01', &back));
    std::string bad = v;
    bad[2] = static_cast<char>(bad[2] | 0x08);
    CHECK_FALSE(decode_chunk_block(1, bad, &back));
    bad = v;
    bad[2] = static_cast<char>(bad[2] | 0x04);
    CHECK_FALSE(decode_chunk_block(1, bad, &back));
    CHECK_FALSE(decode_chunk_block(1, std::string(2, '\0'), &back));

    // Chunk id 0 does not exist: block 0 has no slot 0.
    auto zero = written_in_order(0, 2, rng);
    CHECK_FALSE(decode_chunk_block(0, encode_chunk_block(zero.data(), zero.size()), &back));
    CHECK(decode_chunk_block(0, encode_chunk_block(zero.data() + 1, 1), &back));

    // Fields at their limits, out of order in a segment, raw and damaged,
    // reference counts around the inline limit, gaps repeated.
    std::vector<StoredChunk> odd(4);
    odd[0].first = 32;
    odd[0].second.segment = std::numeric_limits<SegmentId>::max();
    odd[0].second.offset = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint32_t>::max();
    odd[0].second.length = std::numeric_limits<std::uint32_t>::max();
    odd[0].second.set_refs(ChunkRecord::kMaxRefs);
    odd[0].second.flags = ChunkRecord::kDamaged;
    odd[1].first = 40;
    odd[1].second.segment = odd[0].second.segment;
    odd[1].second.offset = 5;  // before the previous one
    odd[1].second.length = 1;
    odd[1].second.set_refs(15);
    odd[2].first = 46;
    odd[2].second = odd[1].second;
    odd[2].second.offset = 6;  // right after it
    odd[2].second.set_refs(14);
    odd[3].first = 47;
    odd[3].second = odd[2].second;
    odd[3].second.offset = 7;  // the same gap again
    odd[3].second.set_refs(0);
    back.clear();
    REQUIRE(decode_chunk_block(2, encode_chunk_block(odd.data(), odd.size()), &back));
    REQUIRE(back.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(back[i].first == odd[i].first);
        CHECK(same(back[i].second, odd[i].second));
    }
}

TEST_CASE("chunk records in blocks follow a model through puts, changes and deletes", "[meta][chunks]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    std::mt19937_64 rng(7);
    std::map<ChunkId, ChunkRecord> model;
    for (int round = 0; round < 20; ++round) {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        for (int op = 0; op < 200; ++op) {
            const ChunkId id = 1 + rng() % 300;
            if (rng() % 3 == 0) {
                REQUIRE(del_chunk(*t, id).is_ok());
                model.erase(id);
            } else {
                const ChunkRecord r = random_record(rng);
                REQUIRE(put_chunk(*t, id, r).is_ok());
                model[id] = r;
            }
        }
        REQUIRE(t->commit().is_ok());
        t.reset();  // a group commits with no transaction open
        if (round % 5 == 4) REQUIRE(m->commit_group(nullptr).is_ok());
    }
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    for (ChunkId id = 0; id <= 310; ++id) {
        INFO("chunk " << id);
        ChunkRecord r;
        bool found = true;
        REQUIRE(get_chunk(*t, id, &r, &found).is_ok());
        auto it = model.find(id);
        REQUIRE(found == (it != model.end()));
        if (found) CHECK(same(r, it->second));
    }
    // The walk sees every record once, 16 ids to a block, and no empty block.
    std::size_t seen = 0;
    REQUIRE(for_each_chunk_block(*t, [&](const StoredChunkBlock& b) {
                CHECK(b.key_ok);
                CHECK(b.value_ok);
                CHECK_FALSE(b.chunks.empty());
                for (const auto& [id, r] : b.chunks) {
                    CHECK(chunk_block_of(id) == b.block);
                    auto it = model.find(id);
                    REQUIRE(it != model.end());
                    CHECK(same(r, it->second));
                    ++seen;
                }
                return Status::ok();
            }).is_ok());
    CHECK(seen == model.size());
}

TEST_CASE("a damaged chunk block reads as missing, is left for fsck by a delete", "[meta][chunks]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    std::mt19937_64 rng(3);
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    for (ChunkId id = 16; id < 20; ++id) REQUIRE(put_chunk(*t, id, random_record(rng)).is_ok());
    const std::string_view junk("\x0f\x00junk", 6);
    REQUIRE(t->put(Db::kChunks, chunk_block_key(16), junk).is_ok());
    ChunkRecord r;
    bool found = true;
    REQUIRE(get_chunk(*t, 17, &r, &found).is_ok());
    CHECK_FALSE(found);
    REQUIRE(del_chunk(*t, 17).is_ok());
    std::string_view v;
    REQUIRE(t->get(Db::kChunks, chunk_block_key(16), &v, &found).is_ok());
    CHECK(found);
    CHECK(v == junk);
    REQUIRE(for_each_chunk_block(*t, [&](const StoredChunkBlock& b) {
                CHECK(b.key_ok);
                CHECK_FALSE(b.value_ok);
                return Status::ok();
            }).is_ok());
}

TEST_CASE("a block with an encoded chunk is format 5's: stored length and codec round-trip, damage is refused",
          "[meta][chunks][compression]") {
    std::mt19937_64 rng(12);
    auto chunks = written_in_order(32, 16, rng);
    const std::string raw_block = encode_chunk_block(chunks.data(), chunks.size());
    CHECK(raw_block[0] != 0);  // no encoded chunk: format 4's form
    // Every third chunk compressed, with lz4 or a zstd level; the next one
    // follows its payload, so gaps are counted from the stored length.
    std::uint64_t offset = 64;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        ChunkRecord& r = chunks[i].second;
        r.offset = offset;
        if (i % 3 == 0) {
            r.stored = r.length / 3;
            // zstd chunks alternate: a dictionary tried for them or not.
            r.codec = ChunkRecord::codec_byte(i % 2 ? Compression{CompressionMethod::kLz4, 0}
                                                    : Compression{CompressionMethod::kZstd, static_cast<int>(1 + i)},
                                              i % 2 == 0 && i % 4 == 0);
        }
        if (i == 5) r.set_refs(100);  // past format 5's inline count of 6
        if (i == 6) r.set_refs(6);
        offset += r.stored_length() + 24;
    }
    const std::string v = encode_chunk_block(chunks.data(), chunks.size());
    CHECK(v[0] == 0);
    CHECK(v[1] == 0);
    std::vector<StoredChunk> back;
    REQUIRE(decode_chunk_block(2, v, &back));
    REQUIRE(back.size() == 16);
    for (std::size_t i = 0; i < 16; ++i) {
        INFO("chunk " << i);
        CHECK(back[i].second.encoded() == (i % 3 == 0));
        CHECK(same(back[i].second, chunks[i].second));
        CHECK(back[i].second.codec == chunks[i].second.codec);
        CHECK(back[i].second.dictionary_tried() == (i % 12 == 0));
    }
    for (std::size_t n = 0; n < v.size(); ++n) CHECK_FALSE(decode_chunk_block(2, std::string_view(v).substr(0, n), &back));
    // The first record is encoded: its fields are the map (2), lead (1),
    // segment (1), offset (1), length, stored length, codec byte.
    std::size_t pos = 2 + 2 + 1 + 1 + 1;
    std::size_t length_bytes = 1;
    while (static_cast<std::uint8_t>(v[pos + length_bytes - 1]) & 0x80) ++length_bytes;
    std::size_t stored_bytes = 1;
    while (static_cast<std::uint8_t>(v[pos + length_bytes + stored_bytes - 1]) & 0x80) ++stored_bytes;
    const std::size_t codec_at = pos + length_bytes + stored_bytes;
    REQUIRE(static_cast<std::uint8_t>(v[codec_at]) == chunks[0].second.codec);
    // No method, an unknown one (with or without the dictionary bit), lz4
    // with a level or the dictionary bit, zstd without a level or past 19.
    for (std::uint8_t codec : {std::uint8_t{0}, std::uint8_t{3 << 5}, std::uint8_t{0x80 | 3 << 5}, std::uint8_t{0x80},
                               std::uint8_t{1 << 5 | 2}, std::uint8_t{0x80 | 1 << 5}, std::uint8_t{2 << 5},
                               std::uint8_t{0x80 | 2 << 5}, std::uint8_t{2 << 5 | 20}}) {
        std::string bad = v;
        bad[codec_at] = static_cast<char>(codec);
        INFO("codec byte " << int(codec));
        CHECK_FALSE(decode_chunk_block(2, bad, &back));
    }
    // A stored length not below the length is damage.
    ChunkRecord big = chunks[0].second;
    big.stored = big.length;
    std::vector<StoredChunk> one{{33, big}};
    CHECK_FALSE(decode_chunk_block(2, encode_chunk_block(one.data(), 1), &back));
}
