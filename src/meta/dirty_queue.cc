#include "meta/dirty_queue.h"

#include "meta/keys.h"

namespace hiodsfs {

namespace {
constexpr std::size_t kRecordBytes = 24;
}  // namespace

std::string encode_dirty(const DirtyRange& r) {
    std::string v;
    v.reserve(kRecordBytes);
    put_be64(&v, r.ino);
    put_be64(&v, r.offset);
    put_be64(&v, r.length);
    return v;
}

bool decode_dirty(std::string_view v, DirtyRange* out) {
    if (v.size() != kRecordBytes) return false;
    out->ino = get_be64(v, 0);
    out->offset = get_be64(v, 8);
    out->length = get_be64(v, 16);
    return true;
}

bool past_dirty_queue(std::string_view key) {
    return !key.empty() &&
           static_cast<unsigned char>(key[0]) >= static_cast<unsigned char>(kSetAsideMark);
}

std::string set_aside_key(std::uint64_t seq) {
    std::string k(1, kSetAsideMark);
    append_key_u64(&k, seq);
    return k;
}

bool parse_set_aside_key(std::string_view key, std::uint64_t* seq) {
    return !key.empty() && key[0] == kSetAsideMark && parse_key_u64(key.substr(1), seq);
}

std::string encode_set_aside(const DirtyRange& r, std::string_view why) {
    std::string v = encode_dirty(r);
    v.append(why);
    return v;
}

bool decode_set_aside(std::string_view v, DirtyRange* out, std::string_view* why) {
    if (v.size() < kRecordBytes || !decode_dirty(v.substr(0, kRecordBytes), out)) return false;
    *why = v.substr(kRecordBytes);
    return true;
}

}  // namespace hiodsfs
