// SpaceAdmission (engine/space_admission.h) alone, over a file system whose
// free space the test sets: the reserve, requests admitted but not yet
// written, the cached statvfs, and a write that waits while reclaim frees.
#include "engine/space_admission.h"

#include <sys/statvfs.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>

using namespace hiodsfs;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// A file system with 4 KiB blocks whose available bytes the test sets.
struct FakeFs {
    std::atomic<std::uint64_t> avail{0};
    std::atomic<int> calls{0};
    std::atomic<bool> fails{false};
    SpaceAdmission::Statvfs statvfs() {
        return [this](struct statvfs* v) {
            calls.fetch_add(1);
            if (fails.load()) return Status::error(EIO, "statvfs failed");
            *v = {};
            v->f_frsize = 4096;
            v->f_bavail = avail.load() / 4096;
            return Status::ok();
        };
    }
};

// Admission with a reserve of 64 MiB over a FakeFs with `avail` bytes free.
struct Admitting {
    FakeFs fs;
    SpaceAdmission space;
    explicit Admitting(std::uint64_t avail) {
        fs.avail = avail;
        space.start(64 * kMiB, fs.statvfs());
    }
};

}  // namespace

TEST_CASE("space admission: without a reserve everything is admitted, statvfs never asked",
          "[space-admission]") {
    FakeFs fs;
    SpaceAdmission space;
    space.start(0, fs.statvfs());
    std::optional<Admission> a;
    CHECK(space.admit(1ull << 40, &a).is_ok());
    CHECK(space.check(1ull << 40, 0).is_ok());
    CHECK(fs.calls.load() == 0);
    CHECK(space.reserve() == 0);
}

TEST_CASE("space admission: a request that would reach into the reserve gets ENOSPC",
          "[space-admission]") {
    Admitting t(100 * kMiB);
    SpaceAdmission& space = t.space;
    CHECK(space.reserve() == 64 * kMiB);
    std::optional<Admission> fits;
    CHECK(space.admit(30 * kMiB, &fits).is_ok());
    fits.reset();
    std::optional<Admission> too_big;
    Status st = space.admit(40 * kMiB, &too_big);
    REQUIRE_FALSE(st.is_ok());
    CHECK(st.err() == ENOSPC);
    CHECK_THAT(st.message(), Catch::Contains("64 MiB kept"));
    // Compaction may go below the reserve, to a floor of its own.
    CHECK(space.check(40 * kMiB, 16 * kMiB).is_ok());
}

TEST_CASE("space admission: requests admitted and not yet written count against the room",
          "[space-admission]") {
    Admitting t(100 * kMiB);
    SpaceAdmission& space = t.space;
    std::optional<Admission> first, second;
    REQUIRE(space.admit(20 * kMiB, &first).is_ok());
    // Together they would pass the reserve: the second is refused while
    // the first is still being written...
    CHECK(space.admit(20 * kMiB, &second).err() == ENOSPC);
    second.reset();
    // ...and admitted once it is written (its Admission gone).
    first.reset();
    CHECK(space.admit(20 * kMiB, &second).is_ok());
}

TEST_CASE("space admission: far from the reserve, requests are answered without a statvfs each",
          "[space-admission]") {
    Admitting t(10'000 * kMiB);
    FakeFs& fs = t.fs;
    SpaceAdmission& space = t.space;
    constexpr int kRequests = 100;
    for (int i = 0; i < kRequests; ++i) {
        std::optional<Admission> a;
        REQUIRE(space.admit(128 * 1024, &a).is_ok());
    }
    CHECK(fs.calls.load() >= 1);
    CHECK(fs.calls.load() < kRequests);
}

TEST_CASE("space admission: a failing statvfs lets the write itself say", "[space-admission]") {
    FakeFs fs;
    fs.fails = true;
    SpaceAdmission space;
    space.start(64 * kMiB, fs.statvfs());
    std::optional<Admission> a;
    CHECK(space.admit(1ull << 40, &a).is_ok());
}

TEST_CASE("space admission: without reclaim a full disk answers ENOSPC at once",
          "[space-admission]") {
    Admitting t(65 * kMiB);
    SpaceAdmission& space = t.space;
    std::optional<Admission> a;
    CHECK(space.admit_write(10 * kMiB, &a).err() == ENOSPC);
}

TEST_CASE(
    "space admission: a write on a full disk waits while reclaim frees, and the pass yields to it",
    "[space-admission]") {
    Admitting t(65 * kMiB);
    FakeFs& fs = t.fs;
    SpaceAdmission& space = t.space;
    std::atomic<std::uint64_t> disk{500 * kMiB};
    std::atomic<int> wakes{0};
    Status background;
    SpaceAdmission::Reclaim reclaim;
    reclaim.wake = [&] {
        // While the write waits, a sweep of the pass is not admitted.
        if (wakes.fetch_add(1) == 0) {
            std::optional<Admission> sweep;
            background = space.admit(kMiB, &sweep, true);
        }
        // Each wake frees a segment of 20 MiB.
        disk.fetch_sub(20 * kMiB);
        fs.avail.fetch_add(20 * kMiB);
    };
    reclaim.disk_bytes = [&] { return disk.load(); };
    reclaim.files_freed = [] { return std::uint64_t{0}; };
    space.set_reclaim(std::move(reclaim));
    std::optional<Admission> a;
    Status st = space.admit_write(30 * kMiB, &a);
    INFO(st.to_string());
    CHECK(st.is_ok());
    CHECK(wakes.load() >= 2);
    CHECK(background.err() == ENOSPC);
    CHECK_THAT(background.message(), Catch::Contains("waiting for room"));
    // No write waits any more: the pass is admitted again.
    std::optional<Admission> sweep;
    CHECK(space.admit(kMiB, &sweep, true).is_ok());
}

TEST_CASE("space admission: a write gives up when reclaim frees nothing", "[space-admission]") {
    Admitting t(65 * kMiB);
    SpaceAdmission& space = t.space;
    std::atomic<int> wakes{0};
    SpaceAdmission::Reclaim reclaim;
    reclaim.wake = [&] { wakes.fetch_add(1); };
    reclaim.disk_bytes = [] { return std::uint64_t{500 * kMiB}; };
    reclaim.files_freed = [] { return std::uint64_t{0}; };
    space.set_reclaim(std::move(reclaim));
    std::optional<Admission> a;
    CHECK(space.admit_write(10 * kMiB, &a).err() == ENOSPC);
    CHECK(wakes.load() >= 1);
}
