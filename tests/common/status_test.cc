// hiodsfs/status.h (src/common/status.cc): the one-line reason a Status
// carries, the errno it maps to, and HIODSFS_TRY's early return; a digest's
// hex form.
#include "hiodsfs/status.h"

#include <catch2/catch.hpp>
#include <cerrno>

#include "hiodsfs/types.h"

using namespace hiodsfs;

namespace {

int tried = 0;

Status step(Status s) {
    ++tried;
    return s;
}

Status two_steps(Status first) {
    HIODSFS_TRY(step(first));
    HIODSFS_TRY(step(Status::ok()));
    return Status::ok();
}

}  // namespace

TEST_CASE("a Status is ok or names its errno and reason", "[common][status]") {
    const Status ok = Status::ok();
    CHECK(ok.is_ok());
    CHECK(static_cast<bool>(ok));
    CHECK(ok.err() == 0);
    CHECK(ok.to_string() == "ok");

    const Status full = Status::error(ENOSPC, "the store's file system is full");
    CHECK_FALSE(full.is_ok());
    CHECK(full.err() == ENOSPC);
    CHECK(full.to_string() == "the store's file system is full");

    const Status gone = Status::from_errno(ENOENT, "open segments/00000001");
    CHECK(gone.err() == ENOENT);
    CHECK(gone.message() == "open segments/00000001: No such file or directory");
}

TEST_CASE("HIODSFS_TRY returns the first failure and stops there", "[common][status]") {
    tried = 0;
    CHECK(two_steps(Status::ok()).is_ok());
    CHECK(tried == 2);
    tried = 0;
    const Status s = two_steps(Status::error(EIO, "bad chunk"));
    CHECK(s.err() == EIO);
    CHECK(s.message() == "bad chunk");
    CHECK(tried == 1);
}

TEST_CASE("a digest's hex form is 64 lower-case digits, high nibble first", "[common][status]") {
    Digest d{};
    d.bytes[0] = 0xab;
    d.bytes[31] = 0x0f;
    const std::string hex = d.hex();
    REQUIRE(hex.size() == 64);
    CHECK(hex.substr(0, 2) == "ab");
    CHECK(hex.substr(2, 60) == std::string(60, '0'));
    CHECK(hex.substr(62) == "0f");
}
