// POSIX ACL xattr codec and the mode/ACL rules of fs/posix_acl.c.
#include "vfs/posix_acl.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <initializer_list>
#include <string>

using hiodsfs::Status;
using hiodsfs::vfs::PosixAcl;

namespace {

constexpr std::uint32_t kNone = PosixAcl::kUndefinedId;

// The little-endian bytes of an ACL xattr, built independently of the codec.
std::string xattr_bytes(std::uint32_t version, std::initializer_list<PosixAcl::Entry> entries) {
    std::string s;
    auto put = [&](std::uint32_t v, int n) {
        for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    put(version, 4);
    for (const auto& e : entries) {
        put(e.tag, 2);
        put(e.perm, 2);
        put(e.id, 4);
    }
    return s;
}

// What `setfacl -m d:u:nobody:rwx,d:g::rx,d:o::- dir` stored, as getfattr
// printed it (0sAgAAAAEABwD/////AgAHAP7/AAAEAAUA/////xAABwD/////IAAAAP////8=).
const std::string kSetfaclDefault = xattr_bytes(2, {{PosixAcl::kUserObj, 7, kNone},
                                                    {PosixAcl::kUser, 7, 65534},
                                                    {PosixAcl::kGroupObj, 5, kNone},
                                                    {PosixAcl::kMask, 7, kNone},
                                                    {PosixAcl::kOther, 0, kNone}});

}  // namespace

TEST_CASE("an ACL xattr parses and serializes to the same bytes") {
    PosixAcl acl;
    REQUIRE(PosixAcl::parse(kSetfaclDefault, &acl).is_ok());
    REQUIRE(acl.entries().size() == 5);
    CHECK(acl.entries()[1] == PosixAcl::Entry{PosixAcl::kUser, 7, 65534});
    CHECK(acl.serialize() == kSetfaclDefault);
    CHECK(kSetfaclDefault.size() == 4 + 5 * 8);
}

TEST_CASE("a header without entries is an empty ACL") {
    PosixAcl acl = PosixAcl::from_mode(0644);
    REQUIRE(PosixAcl::parse(xattr_bytes(2, {}), &acl).is_ok());
    CHECK(acl.empty());
}

TEST_CASE("malformed ACL xattrs are EINVAL") {
    PosixAcl acl;
    auto rejects = [&](const std::string& bytes) {
        Status st = PosixAcl::parse(bytes, &acl);
        return !st.is_ok() && st.err() == EINVAL;
    };
    using E = PosixAcl::Entry;
    CHECK(rejects(""));
    CHECK(rejects(std::string("\x02\x00\x00", 3)));
    CHECK(rejects(kSetfaclDefault.substr(0, kSetfaclDefault.size() - 1)));
    CHECK(rejects(xattr_bytes(1, {{PosixAcl::kUserObj, 6, kNone},
                                  {PosixAcl::kGroupObj, 4, kNone},
                                  {PosixAcl::kOther, 4, kNone}})));
    // Missing other::.
    CHECK(rejects(
        xattr_bytes(2, {E{PosixAcl::kUserObj, 6, kNone}, E{PosixAcl::kGroupObj, 4, kNone}})));
    // Out of order.
    CHECK(rejects(xattr_bytes(2, {{PosixAcl::kGroupObj, 4, kNone},
                                  {PosixAcl::kUserObj, 6, kNone},
                                  {PosixAcl::kOther, 4, kNone}})));
    // A named entry without mask::.
    CHECK(rejects(xattr_bytes(2, {{PosixAcl::kUserObj, 6, kNone},
                                  {PosixAcl::kUser, 6, 1000},
                                  {PosixAcl::kGroupObj, 4, kNone},
                                  {PosixAcl::kOther, 4, kNone}})));
    // The same user twice.
    CHECK(rejects(xattr_bytes(2, {{PosixAcl::kUserObj, 6, kNone},
                                  {PosixAcl::kUser, 6, 1000},
                                  {PosixAcl::kUser, 4, 1000},
                                  {PosixAcl::kGroupObj, 4, kNone},
                                  {PosixAcl::kMask, 6, kNone},
                                  {PosixAcl::kOther, 4, kNone}})));
    // Permission bits beyond rwx, and an unknown tag.
    CHECK(rejects(xattr_bytes(2, {{PosixAcl::kUserObj, 8, kNone},
                                  {PosixAcl::kGroupObj, 4, kNone},
                                  {PosixAcl::kOther, 4, kNone}})));
    CHECK(rejects(xattr_bytes(
        2, {{PosixAcl::kUserObj, 6, kNone}, {0x40, 4, kNone}, {PosixAcl::kOther, 4, kNone}})));
}

TEST_CASE("a minimal ACL is equivalent to its mode") {
    PosixAcl acl = PosixAcl::from_mode(0751);
    std::uint32_t mode = S_IFREG | S_ISGID | 0000;
    CHECK(acl.equivalent_mode(&mode));
    CHECK(mode == (S_IFREG | S_ISGID | 0751));
    PosixAcl back;
    REQUIRE(PosixAcl::parse(acl.serialize(), &back).is_ok());
    CHECK(back == acl);
}

TEST_CASE("with a mask, the group bits of the mode are the mask") {
    PosixAcl acl;
    REQUIRE(PosixAcl::parse(kSetfaclDefault, &acl).is_ok());
    std::uint32_t mode = S_IFDIR | 0;
    CHECK_FALSE(acl.equivalent_mode(&mode));
    CHECK((mode & 0777) == 0770);
}

TEST_CASE("a default ACL masked by the create mode, as touch and mkdir see it") {
    PosixAcl def;
    REQUIRE(PosixAcl::parse(kSetfaclDefault, &def).is_ok());

    PosixAcl file = def;
    std::uint32_t mode = S_IFREG | 0666;
    CHECK(file.apply_create_mode(&mode));
    CHECK(mode == (S_IFREG | 0660));     // what getfacl showed on the mount
    CHECK(file.entries()[0].perm == 6);  // user:: rw-
    CHECK(file.entries()[1].perm == 7);  // named entries keep their bits
    CHECK(file.entries()[3].perm == 6);  // mask:: rw-
    CHECK(file.entries()[4].perm == 0);  // other:: ---

    PosixAcl dir = def;
    mode = S_IFDIR | S_ISGID | 0777;
    CHECK(dir.apply_create_mode(&mode));
    CHECK(mode == (S_IFDIR | S_ISGID | 0770));
}

TEST_CASE("a default ACL without named entries yields no access ACL") {
    PosixAcl def = PosixAcl::from_mode(0750);
    std::uint32_t mode = S_IFREG | 0666;
    CHECK_FALSE(def.apply_create_mode(&mode));
    CHECK((mode & 0777) == 0640);
}

TEST_CASE("chmod rewrites owner, mask and other, and keeps named entries") {
    PosixAcl acl;
    REQUIRE(PosixAcl::parse(kSetfaclDefault, &acl).is_ok());
    acl.apply_chmod(0604);
    CHECK(acl.entries()[0].perm == 6);
    CHECK(acl.entries()[1].perm == 7);
    CHECK(acl.entries()[2].perm == 5);  // group:: is behind the mask
    CHECK(acl.entries()[3].perm == 0);
    CHECK(acl.entries()[4].perm == 4);

    PosixAcl minimal = PosixAcl::from_mode(0777);
    minimal.apply_chmod(0640);
    CHECK(minimal == PosixAcl::from_mode(0640));
}
