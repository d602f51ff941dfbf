#include "meta/segment_entry.h"

#include "meta/keys.h"

namespace hiodsfs {
namespace {
constexpr std::size_t kLiveBytes = 8;
constexpr std::size_t kMarkedBytes = kLiveBytes + 1 + 1 + 4 + 8;
constexpr char kSettledTag = 1;
}  // namespace

std::string encode_segment_entry(const SegmentEntry& e) {
    std::string v = be64(e.live);
    if (!e.settled) return v;
    v.push_back(kSettledTag);
    v.push_back(static_cast<char>(e.settled->codec));
    for (int shift = 24; shift >= 0; shift -= 8) v.push_back(static_cast<char>(e.settled->dictionary >> shift));
    put_be64(&v, e.settled->weak);
    return v;
}

bool decode_segment_entry(std::string_view v, SegmentEntry* out) {
    *out = SegmentEntry{};
    if (v.size() != kLiveBytes && (v.size() != kMarkedBytes || v[kLiveBytes] != kSettledTag)) return false;
    out->live = get_be64(v);
    if (v.size() == kLiveBytes) return true;
    SettledMark m;
    m.codec = static_cast<std::uint8_t>(v[kLiveBytes + 1]);
    for (std::size_t i = 0; i < 4; ++i)
        m.dictionary = m.dictionary << 8 | static_cast<std::uint8_t>(v[kLiveBytes + 2 + i]);
    m.weak = get_be64(v, kLiveBytes + 6);
    out->settled = m;
    return true;
}

}  // namespace hiodsfs
