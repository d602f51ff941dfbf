// POSIX ACLs in the Linux xattr form ("system.posix_acl_access" and
// "system.posix_acl_default"): a little-endian header {u32 version = 2}
// followed by entries {u16 tag, u16 perm, u32 id}, sorted by tag and id.
// With FUSE_CAP_POSIX_ACL the kernel enforces ACLs but leaves storing them,
// keeping the mode in sync and inheriting default ACLs to the file system;
// this class holds the rules for that (the ones fs/posix_acl.c applies for
// local file systems).
// Thread-safety: a PosixAcl is a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs::vfs {

inline constexpr std::string_view kAclAccessXattr = "system.posix_acl_access";
inline constexpr std::string_view kAclDefaultXattr = "system.posix_acl_default";

class PosixAcl {
public:
    enum Tag : std::uint16_t {
        kUserObj = 0x01,
        kUser = 0x02,
        kGroupObj = 0x04,
        kGroup = 0x08,
        kMask = 0x10,
        kOther = 0x20,
    };
    static constexpr std::uint32_t kVersion = 2;
    static constexpr std::uint32_t kUndefinedId = 0xffffffffu;

    struct Entry {
        std::uint16_t tag = 0;
        std::uint16_t perm = 0;  // rwx as 4|2|1
        std::uint32_t id = kUndefinedId;
        bool operator==(const Entry&) const = default;
    };

    PosixAcl() = default;
    explicit PosixAcl(std::vector<Entry> entries) : entries_(std::move(entries)) {}

    // Parses and validates an xattr value (EINVAL if malformed or not a
    // valid ACL). A header without entries gives an empty ACL.
    static Status parse(std::string_view value, PosixAcl* out);
    // The minimal ACL (user::, group::, other::) equivalent to a mode.
    static PosixAcl from_mode(std::uint32_t mode);

    std::string serialize() const;
    // EINVAL unless the entries form a valid ACL (as posix_acl_valid()).
    Status validate() const;

    bool empty() const { return entries_.empty(); }
    const std::vector<Entry>& entries() const { return entries_; }

    // The permission bits this access ACL implies (owner from user::, group
    // from mask:: if present else group::, others from other::) replace the
    // 0777 bits of *mode. Returns true if the ACL says no more than the mode
    // does (then it need not be stored).
    bool equivalent_mode(std::uint32_t* mode) const;

    // Turns a copy of the parent's default ACL into the new node's access
    // ACL: the requested mode masks the ACL and the ACL masks the mode (the
    // group bits come from mask::, or group:: when there is no mask).
    // Returns true if the resulting access ACL must be stored.
    bool apply_create_mode(std::uint32_t* mode);

    // chmod on a file with an access ACL: user::, mask:: (or group::) and
    // other:: take the new mode's bits; named entries stay.
    void apply_chmod(std::uint32_t mode);

    bool operator==(const PosixAcl&) const = default;

private:
    std::vector<Entry> entries_;
};

}  // namespace hiodsfs::vfs
