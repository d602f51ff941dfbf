#include "vfs/posix_acl.h"

#include <cerrno>

namespace hiodsfs::vfs {

namespace {

constexpr std::size_t kHeaderSize = 4;
constexpr std::size_t kEntrySize = 8;

std::uint32_t load_le(const char* p, int bytes) {
    std::uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

void store_le(std::string* out, std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Position of a tag in the canonical entry order; -1 for an unknown tag.
int tag_rank(std::uint16_t tag) {
    switch (tag) {
        case PosixAcl::kUserObj:
            return 0;
        case PosixAcl::kUser:
            return 1;
        case PosixAcl::kGroupObj:
            return 2;
        case PosixAcl::kGroup:
            return 3;
        case PosixAcl::kMask:
            return 4;
        case PosixAcl::kOther:
            return 5;
        default:
            return -1;
    }
}

}  // namespace

Status PosixAcl::parse(std::string_view value, PosixAcl* out) {
    if (value.size() < kHeaderSize || (value.size() - kHeaderSize) % kEntrySize != 0)
        return Status::error(EINVAL, "POSIX ACL xattr has a bad size");
    if (load_le(value.data(), 4) != kVersion)
        return Status::error(EINVAL, "POSIX ACL xattr has an unknown version");
    std::vector<Entry> entries;
    entries.reserve((value.size() - kHeaderSize) / kEntrySize);
    for (std::size_t off = kHeaderSize; off < value.size(); off += kEntrySize) {
        const char* p = value.data() + off;
        Entry e;
        e.tag = static_cast<std::uint16_t>(load_le(p, 2));
        e.perm = static_cast<std::uint16_t>(load_le(p + 2, 2));
        e.id = load_le(p + 4, 4);
        entries.push_back(e);
    }
    PosixAcl acl(std::move(entries));
    if (!acl.empty()) HIODSFS_TRY(acl.validate());
    *out = std::move(acl);
    return Status::ok();
}

PosixAcl PosixAcl::from_mode(std::uint32_t mode) {
    return PosixAcl({{kUserObj, static_cast<std::uint16_t>((mode >> 6) & 7), kUndefinedId},
                     {kGroupObj, static_cast<std::uint16_t>((mode >> 3) & 7), kUndefinedId},
                     {kOther, static_cast<std::uint16_t>(mode & 7), kUndefinedId}});
}

std::string PosixAcl::serialize() const {
    std::string out;
    out.reserve(kHeaderSize + kEntrySize * entries_.size());
    store_le(&out, kVersion, 4);
    for (const Entry& e : entries_) {
        store_le(&out, e.tag, 2);
        store_le(&out, e.perm, 2);
        // The kernel writes the undefined id for the unnamed entries.
        bool named = e.tag == kUser || e.tag == kGroup;
        store_le(&out, named ? e.id : kUndefinedId, 4);
    }
    return out;
}

Status PosixAcl::validate() const {
    int last_rank = -1;
    std::uint32_t last_id = 0;
    int user_obj = 0, group_obj = 0, other = 0, mask = 0, named = 0;
    for (const Entry& e : entries_) {
        int rank = tag_rank(e.tag);
        if (rank < 0) return Status::error(EINVAL, "POSIX ACL has an unknown entry tag");
        if (e.perm & ~7u) return Status::error(EINVAL, "POSIX ACL has bad permission bits");
        if (rank < last_rank) return Status::error(EINVAL, "POSIX ACL entries are out of order");
        bool is_named = e.tag == kUser || e.tag == kGroup;
        if (is_named) {
            // Named entries of one kind must have strictly increasing ids.
            if (rank == last_rank && e.id <= last_id)
                return Status::error(EINVAL, "POSIX ACL has duplicate or unsorted ids");
            last_id = e.id;
            ++named;
        } else if (rank == last_rank) {
            return Status::error(EINVAL, "POSIX ACL repeats an entry");
        }
        last_rank = rank;
        user_obj += e.tag == kUserObj;
        group_obj += e.tag == kGroupObj;
        other += e.tag == kOther;
        mask += e.tag == kMask;
    }
    if (user_obj != 1 || group_obj != 1 || other != 1)
        return Status::error(EINVAL, "POSIX ACL lacks a user::, group:: or other:: entry");
    if (named > 0 && mask != 1)
        return Status::error(EINVAL, "POSIX ACL with named entries needs a mask:: entry");
    return Status::ok();
}

bool PosixAcl::equivalent_mode(std::uint32_t* mode) const {
    std::uint32_t user = 0, group = 0, other = 0, mask = 0;
    bool has_mask = false, equivalent = true;
    for (const Entry& e : entries_) {
        switch (e.tag) {
            case kUserObj:
                user = e.perm & 7;
                break;
            case kGroupObj:
                group = e.perm & 7;
                break;
            case kOther:
                other = e.perm & 7;
                break;
            case kMask:
                mask = e.perm & 7;
                has_mask = true;
                equivalent = false;
                break;
            default:
                equivalent = false;
                break;
        }
    }
    std::uint32_t bits = (user << 6) | ((has_mask ? mask : group) << 3) | other;
    *mode = (*mode & ~0777u) | bits;
    return equivalent;
}

bool PosixAcl::apply_create_mode(std::uint32_t* mode) {
    std::uint32_t m = *mode & 0777u;
    Entry* group_obj = nullptr;
    Entry* mask = nullptr;
    bool needed = false;
    for (Entry& e : entries_) {
        switch (e.tag) {
            case kUserObj:
                e.perm &= (m >> 6) & 7;
                m = (m & ~0700u) | ((m & 0700u) & (std::uint32_t{e.perm} << 6));
                break;
            case kOther:
                e.perm &= m & 7;
                m = (m & ~07u) | ((m & 07u) & e.perm);
                break;
            case kGroupObj:
                group_obj = &e;
                break;
            case kMask:
                mask = &e;
                needed = true;
                break;
            default:
                needed = true;
                break;
        }
    }
    // Group bits meet the mask if there is one, else group:: (a valid ACL
    // always has one of them).
    if (Entry* g = mask ? mask : group_obj) {
        g->perm &= (m >> 3) & 7;
        m = (m & ~070u) | ((m & 070u) & (std::uint32_t{g->perm} << 3));
    }
    *mode = (*mode & ~0777u) | m;
    return needed;
}

void PosixAcl::apply_chmod(std::uint32_t mode) {
    Entry* group_obj = nullptr;
    Entry* mask = nullptr;
    for (Entry& e : entries_) {
        switch (e.tag) {
            case kUserObj:
                e.perm = static_cast<std::uint16_t>((mode >> 6) & 7);
                break;
            case kOther:
                e.perm = static_cast<std::uint16_t>(mode & 7);
                break;
            case kGroupObj:
                group_obj = &e;
                break;
            case kMask:
                mask = &e;
                break;
            default:
                break;
        }
    }
    if (Entry* g = mask ? mask : group_obj) g->perm = static_cast<std::uint16_t>((mode >> 3) & 7);
}

}  // namespace hiodsfs::vfs
