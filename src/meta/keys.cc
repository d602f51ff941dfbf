#include "meta/keys.h"

namespace hiodsfs {
namespace {

// Bytes of v's minimal big-endian form (0 for 0).
unsigned bytes_of(std::uint64_t v) {
    unsigned n = 0;
    for (; v != 0; v >>= 8) ++n;
    return n;
}

void append_bytes(std::string* out, std::uint64_t v, unsigned n) {
    for (unsigned i = n; i > 0; --i) out->push_back(static_cast<char>(v >> ((i - 1) * 8)));
}

// The number in the n bytes at the front of in; false if they are not its
// shortest form.
bool number_of(std::string_view in, std::size_t n, std::uint64_t* v) {
    if (n > 8 || in.size() < n || (n > 0 && in[0] == 0)) return false;
    std::uint64_t r = 0;
    for (std::size_t i = 0; i < n; ++i) r = r << 8 | static_cast<std::uint8_t>(in[i]);
    *v = r;
    return true;
}

}  // namespace

void append_key_u64(std::string* out, std::uint64_t v) {
    const unsigned n = bytes_of(v);
    out->push_back(static_cast<char>(n));
    append_bytes(out, v, n);
}

bool read_key_u64(std::string_view* in, std::uint64_t* v) {
    if (in->empty()) return false;
    const auto n = static_cast<std::uint8_t>((*in)[0]);
    if (!number_of(in->substr(1), n, v)) return false;
    in->remove_prefix(1 + n);
    return true;
}

std::string key_u64(std::uint64_t v) {
    std::string k;
    append_key_u64(&k, v);
    return k;
}

std::string key_u64_u64(std::uint64_t a, std::uint64_t b) {
    std::string k;
    k.reserve(2 * kMaxKeyU64);
    append_key_u64(&k, a);
    append_key_u64(&k, b);
    return k;
}

std::string key_u64_str(std::uint64_t a, std::string_view s) {
    std::string k;
    k.reserve(kMaxKeyU64 + s.size());
    append_key_u64(&k, a);
    k.append(s);
    return k;
}

bool parse_key_u64(std::string_view key, std::uint64_t* v) {
    return read_key_u64(&key, v) && key.empty();
}

bool parse_key_u64_u64(std::string_view key, std::uint64_t* a, std::uint64_t* b) {
    return read_key_u64(&key, a) && read_key_u64(&key, b) && key.empty();
}

bool parse_key_u64_str(std::string_view key, std::uint64_t* a, std::string_view* rest) {
    if (!read_key_u64(&key, a)) return false;
    *rest = key;
    return true;
}

void append_tail_u64(std::string* out, std::uint64_t v) {
    append_bytes(out, v, bytes_of(v));
}

bool read_tail_u64(std::string_view in, std::uint64_t* v) {
    return !in.empty() && number_of(in, in.size(), v);
}

void put_be64(std::string* out, std::uint64_t v) {
    append_bytes(out, v, 8);
}

std::uint64_t get_be64(std::string_view in, std::size_t pos) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<std::uint8_t>(in[pos + i]);
    return v;
}

std::string be64(std::uint64_t v) {
    std::string s;
    put_be64(&s, v);
    return s;
}

}  // namespace hiodsfs
