#include "meta/super_record.h"

#include <cstddef>
#include <iterator>

namespace hiodsfs {
namespace {

// The super record: little-endian 64-bit numbers, the counters in the
// order below, then next_ino, next_chunk, next_dirty, frontier_segment and
// frontier_offset, the journal seq (0: not journaled), and content_bytes.
// Fields are only ever appended: a shorter record is an older store's. (Until format 3 this was SuperState's memory image; the
// same bytes, so those stores read unchanged.)
constexpr std::uint64_t SpaceCounters::*kCounterFields[] = {
    &SpaceCounters::logical_bytes, &SpaceCounters::stored_bytes,    &SpaceCounters::chunk_count,
    &SpaceCounters::dead_bytes,    &SpaceCounters::inode_count,     &SpaceCounters::dedup_hits,
    &SpaceCounters::cloned_bytes,  &SpaceCounters::backlog_records, &SpaceCounters::backlog_bytes,
    &SpaceCounters::raw_bytes,     &SpaceCounters::disk_bytes,      &SpaceCounters::file_count,
};
constexpr std::size_t kCounterCount = std::size(kCounterFields);
constexpr std::size_t kSuperFields = kCounterCount + 5;
// With the journal seq of a journaled store (format 4 wrote it only then).
constexpr std::size_t kJournalFields = kCounterCount + 6;
// Format 5: the journal seq always, then content_bytes. Before it no chunk
// was compressed, so content_bytes was stored_bytes.
constexpr std::size_t kContentFields = kCounterCount + 7;
// Older layouts: before the segment frontier was recorded, and before that
// before file_count (the last counter) existed.
constexpr std::size_t kNoFrontierFields = kCounterCount + 3;
constexpr std::size_t kLegacyFields = kCounterCount - 1 + 3;

}  // namespace

std::string encode_super(const SuperState& s) {
    std::string out;
    out.reserve(kContentFields * 8);
    auto put = [&out](std::uint64_t v) {
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
    };
    for (auto field : kCounterFields) put(s.counters.*field);
    for (std::uint64_t v : {s.next_ino, s.next_chunk, s.next_dirty, s.frontier_segment, s.frontier_offset}) put(v);
    put(s.journal_seq);
    put(s.counters.content_bytes);
    return out;
}

bool decode_super(std::string_view v, SuperState* out, bool* has_file_count) {
    if (v.size() % 8 != 0) return false;
    const std::size_t n = v.size() / 8;
    if (n != kContentFields && n != kJournalFields && n != kSuperFields && n != kNoFrontierFields &&
        n != kLegacyFields)
        return false;
    std::size_t at = 0;
    auto get = [&v, &at] {
        std::uint64_t x = 0;
        for (int i = 0; i < 8; ++i) x |= std::uint64_t{static_cast<std::uint8_t>(v[at + i])} << (8 * i);
        at += 8;
        return x;
    };
    SuperState s;
    *has_file_count = n != kLegacyFields;
    for (std::size_t i = 0; i < kCounterCount - (*has_file_count ? 0 : 1); ++i) s.counters.*kCounterFields[i] = get();
    s.next_ino = get();
    s.next_chunk = get();
    s.next_dirty = get();
    if (n >= kSuperFields) {
        s.frontier_segment = get();
        s.frontier_offset = get();
    }  // else: frontier unknown (0)
    if (n >= kJournalFields) s.journal_seq = get();
    s.counters.content_bytes = n == kContentFields ? get() : s.counters.stored_bytes;
    *out = s;
    return true;
}

}  // namespace hiodsfs
