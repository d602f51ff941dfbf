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

// The inode's first byte: which of the fields that are mostly a default
// value are stored (docs/architecture.md "Metadata").
enum : std::uint8_t {
    kHasNlink = 1,   // else 1
    kHasRdev = 2,    // else 0
    kHasMapped = 4,  // else the size for a regular file, 0 for anything else
    kHasParent = 8,  // else 0
    kHasCtime = 16,  // else mtime
    kHasAtime = 32,  // else ctime
    kInodeFields = 63,
};

// The S_IFMT values a mode may have, as a mask of (type >> 12).
constexpr std::uint16_t kValidTypes =
    1u << (S_IFIFO >> 12) | 1u << (S_IFCHR >> 12) | 1u << (S_IFDIR >> 12) | 1u << (S_IFBLK >> 12) |
    1u << (S_IFREG >> 12) | 1u << (S_IFLNK >> 12) | 1u << (S_IFSOCK >> 12);

std::uint64_t default_mapped(const InodeRecord& r) { return S_ISREG(r.mode) ? r.size : 0; }

// Seconds from base to t, and back, modulo 2^64: any two times have one.
std::int64_t since(std::int64_t t, std::int64_t base) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(t) -
                                     static_cast<std::uint64_t>(base));
}
std::int64_t after(std::int64_t base, std::int64_t d) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(base) +
                                     static_cast<std::uint64_t>(d));
}

}  // namespace

// flags, mode (permission bits above the type: 2 bytes for 0100644), then
// nlink uid gid size rdev mapped parent (each flagged one only if stored),
// mtime as zigzag seconds and ns; ctime unless it is mtime, as zigzag
// seconds since mtime (mtime is rarely far behind: a byte less on a
// tar-extracted tree) and ns; atime unless it is ctime, as zigzag seconds
// and ns since ctime (they are set together: a few bytes).
std::string encode(const InodeRecord& r, std::string_view tail) {
    std::string out;
    out.reserve(32 + tail.size());
    const bool c_is_m = r.ctime_s == r.mtime_s && r.ctime_ns == r.mtime_ns;
    const bool a_is_c = r.atime_s == r.ctime_s && r.atime_ns == r.ctime_ns;
    const std::uint8_t flags = (r.nlink != 1 ? kHasNlink : 0) | (r.rdev != 0 ? kHasRdev : 0) |
                               (r.mapped != default_mapped(r) ? kHasMapped : 0) |
                               (r.parent != 0 ? kHasParent : 0) | (c_is_m ? 0 : kHasCtime) |
                               (a_is_c ? 0 : kHasAtime);
    out.push_back(static_cast<char>(flags));
    put_varint(&out, std::uint64_t{r.mode & 07777} << 4 | (r.mode & S_IFMT) >> 12);
    if (flags & kHasNlink) put_varint(&out, r.nlink);
    put_varint(&out, r.uid);
    put_varint(&out, r.gid);
    put_varint(&out, r.size);
    if (flags & kHasRdev) put_varint(&out, r.rdev);
    if (flags & kHasMapped) put_varint(&out, r.mapped);
    if (flags & kHasParent) put_varint(&out, r.parent);
    put_svarint(&out, r.mtime_s);
    put_varint(&out, r.mtime_ns);
    if (flags & kHasCtime) {
        put_svarint(&out, since(r.ctime_s, r.mtime_s));
        put_varint(&out, r.ctime_ns);
    }
    if (flags & kHasAtime) {
        put_svarint(&out, since(r.atime_s, r.ctime_s));
        put_svarint(&out, std::int64_t{r.atime_ns} - r.ctime_ns);
    }
    out.append(tail);
    return out;
}

bool decode_inode_tail(std::string_view in, InodeRecord* out, std::string_view* tail) {
    Reader rd(in);
    InodeRecord r;
    std::uint8_t flags = 0;
    std::uint32_t mode = 0;
    if (!rd.byte(&flags) || (flags & ~kInodeFields) != 0 || !rd.u(&mode) || mode >> 4 > 07777 ||
        !(kValidTypes >> (mode & 0xf) & 1))
        return false;
    r.mode = (mode & 0xf) << 12 | mode >> 4;
    r.nlink = 1;
    if (((flags & kHasNlink) && !rd.u(&r.nlink)) || !rd.u(&r.uid) || !rd.u(&r.gid) ||
        !rd.u(&r.size) || ((flags & kHasRdev) && !rd.u(&r.rdev)))
        return false;
    r.mapped = default_mapped(r);
    if (((flags & kHasMapped) && !rd.u(&r.mapped)) || ((flags & kHasParent) && !rd.u(&r.parent)) ||
        !rd.s(&r.mtime_s) || !rd.u(&r.mtime_ns))
        return false;
    std::int64_t c_since_m = 0, a_since_c = 0, a_ns_since_c = 0;
    r.ctime_ns = r.mtime_ns;
    if ((flags & kHasCtime) && (!rd.s(&c_since_m) || !rd.u(&r.ctime_ns))) return false;
    r.ctime_s = after(r.mtime_s, c_since_m);
    if ((flags & kHasAtime) &&
        (!rd.s(&a_since_c) || !rd.s(&a_ns_since_c) || a_ns_since_c < -std::int64_t{r.ctime_ns} ||
         a_ns_since_c > std::int64_t{std::numeric_limits<std::uint32_t>::max()} - r.ctime_ns))
        return false;
    r.atime_s = after(r.ctime_s, a_since_c);
    r.atime_ns = static_cast<std::uint32_t>(r.ctime_ns + a_ns_since_c);
    // A flag set for a value that is its default: not how encode() writes it.
    if (((flags & kHasNlink) && r.nlink == 1) || ((flags & kHasRdev) && r.rdev == 0) ||
        ((flags & kHasMapped) && r.mapped == default_mapped(r)) ||
        ((flags & kHasParent) && r.parent == 0) ||
        ((flags & kHasCtime) && c_since_m == 0 && r.ctime_ns == r.mtime_ns) ||
        ((flags & kHasAtime) && a_since_c == 0 && a_ns_since_c == 0))
        return false;
    // Only a regular file (its first extent block) and a symlink (its target) have a tail.
    if (!rd.at_end() && !S_ISREG(r.mode) && !S_ISLNK(r.mode)) return false;
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
