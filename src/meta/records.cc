#include "meta/records.h"

#include <sys/stat.h>

#include <limits>

namespace hiodsfs {

void put_varint(std::string* out, std::uint64_t v) {
    while (v >= 0x80) {
        out->push_back(static_cast<char>(v | 0x80));
        v >>= 7;
    }
    out->push_back(static_cast<char>(v));
}

bool get_varint(std::string_view in, std::size_t* pos, std::uint64_t* v) {
    std::uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= in.size()) return false;
        const auto b = static_cast<std::uint8_t>(in[(*pos)++]);
        // The tenth byte may carry only the top bit of 64.
        if (shift == 63 && b > 1) return false;
        r |= std::uint64_t{b & 0x7fu} << shift;
        if (!(b & 0x80)) {
            // A last byte of 0 (but for the value 0 itself) pads a shorter
            // form: refused, so a value has one encoding.
            if (b == 0 && shift != 0) return false;
            *v = r;
            return true;
        }
    }
    return false;
}

namespace {

// Signed values (times before 1970) as zigzag varints: small magnitudes stay short.
void put_svarint(std::string* out, std::int64_t v) {
    put_varint(out, (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

class Reader {
public:
    explicit Reader(std::string_view in) : in_(in) {}
    template <typename T>
    bool u(T* out) {
        std::uint64_t v = 0;
        if (!get_varint(in_, &pos_, &v) || v > std::numeric_limits<T>::max()) return false;
        *out = static_cast<T>(v);
        return true;
    }
    bool s(std::int64_t* out) {
        std::uint64_t v = 0;
        if (!get_varint(in_, &pos_, &v)) return false;
        *out = static_cast<std::int64_t>((v >> 1) ^ (~(v & 1) + 1));
        return true;
    }
    bool byte(std::uint8_t* out) {
        if (pos_ >= in_.size()) return false;
        *out = static_cast<std::uint8_t>(in_[pos_++]);
        return true;
    }
    bool bytes(void* out, std::size_t n) {
        if (in_.size() - pos_ < n) return false;
        std::memcpy(out, in_.data() + pos_, n);
        pos_ += n;
        return true;
    }
    std::string_view rest() const { return in_.substr(pos_); }
    bool at_end() const { return pos_ == in_.size(); }

private:
    std::string_view in_;
    std::size_t pos_ = 0;
};

// The inode's first byte: which times equal mtime (and are not stored).
constexpr std::uint8_t kAtimeIsMtime = 1, kCtimeIsMtime = 2;

}  // namespace

// mode nlink uid gid rdev size mapped parent, then the times as zigzag
// seconds and nanoseconds (mtime, then atime and ctime unless they equal it).
std::string encode(const InodeRecord& r, std::string_view tail) {
    std::string out;
    out.reserve(40 + tail.size());
    const bool a_is_m = r.atime_s == r.mtime_s && r.atime_ns == r.mtime_ns;
    const bool c_is_m = r.ctime_s == r.mtime_s && r.ctime_ns == r.mtime_ns;
    out.push_back(static_cast<char>((a_is_m ? kAtimeIsMtime : 0) | (c_is_m ? kCtimeIsMtime : 0)));
    for (std::uint64_t v : {std::uint64_t{r.mode}, std::uint64_t{r.nlink}, std::uint64_t{r.uid},
                            std::uint64_t{r.gid}, r.rdev, r.size, r.mapped, r.parent})
        put_varint(&out, v);
    put_svarint(&out, r.mtime_s);
    put_varint(&out, r.mtime_ns);
    if (!a_is_m) {
        put_svarint(&out, r.atime_s);
        put_varint(&out, r.atime_ns);
    }
    if (!c_is_m) {
        put_svarint(&out, r.ctime_s);
        put_varint(&out, r.ctime_ns);
    }
    out.append(tail);
    return out;
}

bool decode_inode_tail(std::string_view in, InodeRecord* out, std::string_view* tail) {
    Reader rd(in);
    InodeRecord r;
    std::uint8_t shared = 0;
    if (!rd.byte(&shared) || (shared & ~(kAtimeIsMtime | kCtimeIsMtime)) != 0) return false;
    if (!rd.u(&r.mode) || !rd.u(&r.nlink) || !rd.u(&r.uid) || !rd.u(&r.gid) || !rd.u(&r.rdev) ||
        !rd.u(&r.size) || !rd.u(&r.mapped) || !rd.u(&r.parent) || !rd.s(&r.mtime_s) ||
        !rd.u(&r.mtime_ns))
        return false;
    r.atime_s = r.ctime_s = r.mtime_s;
    r.atime_ns = r.ctime_ns = r.mtime_ns;
    if (!(shared & kAtimeIsMtime) && (!rd.s(&r.atime_s) || !rd.u(&r.atime_ns))) return false;
    if (!(shared & kCtimeIsMtime) && (!rd.s(&r.ctime_s) || !rd.u(&r.ctime_ns))) return false;
    *tail = rd.rest();
    *out = r;
    return true;
}

bool decode(std::string_view in, InodeRecord* out, std::string* target) {
    std::string_view tail;
    if (!decode_inode_tail(in, out, &tail)) return false;
    // A regular file's tail is its first extent block, not a target.
    if (target != nullptr) target->assign(S_ISREG(out->mode) ? std::string_view() : tail);
    return true;
}

// child inode, then its type (the S_IFMT bits shifted down: one byte).
std::string encode(const DirentValue& r) {
    std::string out;
    put_varint(&out, r.ino);
    put_varint(&out, r.type >> 12);
    return out;
}

bool decode(std::string_view in, DirentValue* out) {
    Reader rd(in);
    DirentValue r;
    std::uint32_t type = 0;
    if (!rd.u(&r.ino) || !rd.u(&type) || type > 0xf || !rd.at_end()) return false;
    r.type = type << 12;
    *out = r;
    return true;
}

}  // namespace hiodsfs
