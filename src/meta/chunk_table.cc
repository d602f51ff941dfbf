#include "meta/chunk_table.h"

#include <algorithm>
#include <limits>

#include "meta/keys.h"

namespace hiodsfs {

namespace {

// A record's first byte: ChunkRecord's flags in bits 0-1, then
constexpr std::uint8_t kFollows = 4;  // same segment as the previous record, payload after its end: only the gap is stored
constexpr std::uint8_t kSameGap = 8;  // with kFollows: the gap of the previous record that had one (not stored)
// and the reference count in the high bits (all-ones: that much plus a
// varint). A format-4 block has 4 bits of it (up to 14 inline); a block
// with an encoded chunk (format 5) starts with two zero bytes where a
// format-4 block's map is never zero, and its records have
constexpr std::uint8_t kEncodedBit = 16;  // the stored length and the codec byte follow the length
// and 3 bits of reference count (up to 6 inline). A block of an encrypted
// store (format 6) starts with four zero bytes, and every one of its
// records is encoded and sealed (its codec byte may then say none, and its
// stored length exceed its length).
// Chunks written in a row are one after another, a record header apart,
// and most have one or two users: such a record's fields cost 3 bytes.
struct LeadLayout {
    unsigned refs_shift;
    std::uint64_t refs_inline;  // the all-ones value of the refs field
};
constexpr LeadLayout kFormat4Lead{4, 15};
constexpr LeadLayout kFormat5Lead{5, 7};
static_assert(ChunkRecord::kKnownFlags < kFollows);

bool follows(const ChunkRecord& prev, const ChunkRecord& r) {
    return r.segment == prev.segment && r.offset >= prev.offset + prev.stored_length();
}

// The block's chunks as a vector, or an error naming a damaged block.
Status load_block(Txn& t, const std::string& key, ChunkId id, std::vector<StoredChunk>* out, bool* damaged) {
    out->clear();
    *damaged = false;
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kChunks, key, &v, &found));
    if (found && !decode_chunk_block(chunk_block_of(id), v, out)) {
        out->clear();
        *damaged = true;
    }
    return Status::ok();
}


void encode_chunk_block_to(std::string& out, const StoredChunk* chunks, std::size_t n) {
    out.clear();
    out.reserve(4 + n * 40);
    bool any_encoded = false, sealed = false;
    for (std::size_t i = 0; i < n; ++i) {
        any_encoded = any_encoded || chunks[i].second.encoded();
        sealed = sealed || chunks[i].second.sealed;
    }
    // Blocks without an encoded chunk keep format 4's form, so a store that
    // never compressed stays byte for byte what format 4 wrote.
    const LeadLayout lay = any_encoded ? kFormat5Lead : kFormat4Lead;
    if (any_encoded) out.append(sealed ? 4 : 2, '\0');
    std::uint16_t map = 0;
    for (std::size_t i = 0; i < n; ++i) map |= std::uint16_t(1u << (chunks[i].first % kChunksPerBlock));
    out.push_back(static_cast<char>(map & 0xff));
    out.push_back(static_cast<char>(map >> 8));
    std::uint64_t last_gap = 0;
    bool have_gap = false;
    for (std::size_t i = 0; i < n; ++i) {
        const ChunkRecord& r = chunks[i].second;
        const bool after = i > 0 && follows(chunks[i - 1].second, r);
        const std::uint64_t gap =
            after ? r.offset - (chunks[i - 1].second.offset + chunks[i - 1].second.stored_length()) : 0;
        const bool same_gap = after && have_gap && gap == last_gap;
        const std::uint64_t refs = std::min(r.ref_count, lay.refs_inline);
        const unsigned lead = (r.flags & ChunkRecord::kKnownFlags) | (after ? kFollows : 0) |
                              (same_gap ? kSameGap : 0) | (r.encoded() ? kEncodedBit : 0) |
                              refs << lay.refs_shift;
        out.push_back(static_cast<char>(lead));
        if (after && !same_gap) {
            put_varint(&out, gap);
            last_gap = gap;
            have_gap = true;
        } else if (!after) {
            put_varint(&out, r.segment);
            put_varint(&out, r.offset);
        }
        put_varint(&out, r.length);
        if (r.encoded()) {
            put_varint(&out, r.stored);
            out.push_back(static_cast<char>(r.codec));
        }
        if (refs == lay.refs_inline) put_varint(&out, r.ref_count - lay.refs_inline);
        if (r.flags & ChunkRecord::kIndexed)
            out.append(reinterpret_cast<const char*>(r.digest.bytes.data()), r.digest.bytes.size());
    }
}

// A block's changed value, built in a buffer each thread keeps: every
// chunk record written goes through here.
Status put_block(Txn& t, const std::string& key, const std::vector<StoredChunk>& chunks) {
    thread_local std::string value;
    encode_chunk_block_to(value, chunks.data(), chunks.size());
    return t.put(Db::kChunks, key, value);
}

}  // namespace

std::string chunk_block_key(ChunkId id) { return key_u64(chunk_block_of(id)); }

std::string encode_chunk_block(const StoredChunk* chunks, std::size_t n) {
    std::string out;
    encode_chunk_block_to(out, chunks, n);
    return out;
}

bool decode_chunk_block(std::uint64_t block, std::string_view in, std::vector<StoredChunk>* out) {
    if (in.size() < 2 || block > std::numeric_limits<ChunkId>::max() / kChunksPerBlock) return false;
    const bool format5 = in[0] == 0 && in[1] == 0;
    // A format-5 block's map is never zero: four zero bytes are a sealed block.
    const bool sealed = format5 && in.size() >= 4 && in[2] == 0 && in[3] == 0;
    const LeadLayout lay = format5 ? kFormat5Lead : kFormat4Lead;
    std::size_t pos = sealed ? 4 : format5 ? 2 : 0;
    if (in.size() < pos + 2) return false;
    const auto map = static_cast<std::uint16_t>(static_cast<std::uint8_t>(in[pos]) |
                                                static_cast<std::uint8_t>(in[pos + 1]) << 8);
    if (map == 0) return false;
    pos += 2;
    const ChunkRecord* prev = nullptr;
    std::uint64_t last_gap = 0;
    bool have_gap = false;
    const std::size_t first = out->size();
    auto fail = [&] {
        out->resize(first);
        return false;
    };
    for (ChunkId slot = 0; slot < kChunksPerBlock; ++slot) {
        if (!(map & (1u << slot))) continue;
        if (pos >= in.size()) return fail();
        ChunkRecord r;
        const auto lead = static_cast<std::uint8_t>(in[pos++]);
        r.flags = lead & ChunkRecord::kKnownFlags;
        const bool encoded = format5 && (lead & kEncodedBit);
        if (sealed && !encoded) return fail();
        r.sealed = sealed;
        if (lead & kFollows) {
            std::uint64_t gap = last_gap;
            if (prev == nullptr) return fail();
            if (lead & kSameGap) {
                if (!have_gap) return fail();
            } else if (!get_varint(in, &pos, &gap)) {
                return fail();
            }
            last_gap = gap;
            have_gap = true;
            const std::uint64_t end = prev->offset + prev->stored_length();
            if (gap > std::numeric_limits<std::uint64_t>::max() - end) return fail();
            r.segment = prev->segment;
            r.offset = end + gap;
        } else if ((lead & kSameGap) || !get_varint_as(in, &pos, &r.segment) || !get_varint_as(in, &pos, &r.offset)) {
            return fail();
        }
        r.ref_count = lead >> lay.refs_shift;
        if (!get_varint_as(in, &pos, &r.length)) return fail();
        if (encoded) {
            // An encoded chunk is smaller than its bytes (chunk/codec.h), and
            // its codec byte names a method and level the codec has.
            // A sealed one may be stored as it is, and is longer by its seal.
            if (!get_varint_as(in, &pos, &r.stored) || r.stored == 0 || (!sealed && r.stored >= r.length) ||
                pos >= in.size())
                return fail();
            r.codec = static_cast<std::uint8_t>(in[pos++]);
            const Compression c = r.compression();
            const bool known = (c.method == CompressionMethod::kLz4 && c.level == 0 && !r.dictionary_tried()) ||
                               (c.method == CompressionMethod::kZstd && c.level >= 1 && c.level <= kMaxZstdLevel) ||
                               (sealed && r.codec == 0);
            if (!known) return fail();
        }
        std::uint64_t more_refs = 0;
        if ((r.ref_count == lay.refs_inline && !get_varint(in, &pos, &more_refs)) ||
            more_refs > ChunkRecord::kMaxRefs - lay.refs_inline ||
            r.offset > std::numeric_limits<std::uint64_t>::max() - r.stored_length())
            return fail();
        r.ref_count += more_refs;
        if (r.flags & ChunkRecord::kIndexed) {
            if (in.size() - pos < r.digest.bytes.size()) return fail();
            std::copy_n(in.data() + pos, r.digest.bytes.size(), r.digest.bytes.data());
            pos += r.digest.bytes.size();
        }
        out->emplace_back(block * kChunksPerBlock + slot, r);
        prev = &out->back().second;
    }
    if (pos != in.size() || (block == 0 && (map & 1))) return fail();  // no chunk has id 0
    return true;
}

Status get_chunk(Txn& t, ChunkId id, ChunkRecord* out, bool* found) {
    *found = false;
    std::string_view v;
    bool present = false;
    HIODSFS_TRY(t.get(Db::kChunks, chunk_block_key(id), &v, &present));
    if (!present) return Status::ok();
    // Most reads want one record: decode into a small buffer kept per thread.
    thread_local std::vector<StoredChunk> chunks;
    chunks.clear();
    if (!decode_chunk_block(chunk_block_of(id), v, &chunks)) return Status::ok();
    for (const StoredChunk& c : chunks) {
        if (c.first != id) continue;
        *out = c.second;
        *found = true;
        break;
    }
    return Status::ok();
}

Status put_chunk(Txn& t, ChunkId id, const ChunkRecord& rec) {
    if (id == 0) return Status::error(EINVAL, "chunk id 0");
    const std::string key = chunk_block_key(id);
    thread_local std::vector<StoredChunk> chunks;  // no allocation per record written
    bool damaged = false;
    HIODSFS_TRY(load_block(t, key, id, &chunks, &damaged));
    // A damaged block's other records are lost already; this one is kept
    // (fsck reports the chunks the block no longer has).
    auto at = std::lower_bound(chunks.begin(), chunks.end(), id,
                               [](const StoredChunk& c, ChunkId want) { return c.first < want; });
    if (at != chunks.end() && at->first == id) {
        at->second = rec;
    } else {
        chunks.emplace(at, id, rec);
    }
    return put_block(t, key, chunks);
}

Status del_chunk(Txn& t, ChunkId id) {
    const std::string key = chunk_block_key(id);
    thread_local std::vector<StoredChunk> chunks;
    bool damaged = false;
    HIODSFS_TRY(load_block(t, key, id, &chunks, &damaged));
    if (damaged) return Status::ok();
    auto at = std::find_if(chunks.begin(), chunks.end(), [&](const StoredChunk& c) { return c.first == id; });
    if (at == chunks.end()) return Status::ok();
    chunks.erase(at);
    if (chunks.empty()) return t.del(Db::kChunks, key);
    return put_block(t, key, chunks);
}

Status for_each_chunk_block(Txn& t, const std::function<Status(const StoredChunkBlock&)>& fn) {
    Cursor c = t.cursor(Db::kChunks);
    StoredChunkBlock b;
    for (bool ok = c.first(); ok; ok = c.next()) {
        b.key = c.key();
        b.chunks.clear();
        b.key_ok = parse_key_u64(b.key, &b.block) && b.block <= std::numeric_limits<ChunkId>::max() / kChunksPerBlock;
        b.value_ok = b.key_ok && decode_chunk_block(b.block, c.value(), &b.chunks);
        HIODSFS_TRY(fn(b));
    }
    return c.status();
}

}  // namespace hiodsfs
