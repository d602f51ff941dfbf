// OpenSegments: segment files kept open for reads, the least recently used
// closed first past the limit, and a handle dropped here still readable by
// a reader that holds it.

#include "store/open_segments.h"

#include <memory>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::TempDir;

std::shared_ptr<File> open_test_file(const TempDir& tmp, SegmentId id) {
    std::unique_ptr<File> f;
    REQUIRE_OK(Env::posix()->open(tmp / ("f" + std::to_string(id)), OpenMode::kCreateNew, &f));
    return std::shared_ptr<File>(std::move(f));
}

TEST_CASE("open segments: past the limit the least recently used is closed, a find counts as a use",
          "[segment]") {
    TempDir tmp;
    OpenSegments open(2);
    std::weak_ptr<File> first;
    {
        auto f1 = open_test_file(tmp, 1);
        first = f1;
        open.put(1, std::move(f1));
    }
    open.put(2, open_test_file(tmp, 2));
    std::shared_ptr<File> got;
    REQUIRE(open.find(1, &got));  // 1 is now the most recently used
    got.reset();
    open.put(3, open_test_file(tmp, 3));
    CHECK(open.count() == 2);
    CHECK_FALSE(open.find(2, &got));
    CHECK(open.find(1, &got));
    CHECK(open.find(3, &got));
    got.reset();
    CHECK_FALSE(first.expired());
    open.put(4, open_test_file(tmp, 4));
    open.put(5, open_test_file(tmp, 5));
    CHECK(first.expired());  // closed once nothing holds it
}

TEST_CASE("open segments: a dropped file stays open for the reader that holds it; a put replaces",
          "[segment]") {
    TempDir tmp;
    OpenSegments open(4);
    open.put(1, open_test_file(tmp, 1));
    std::shared_ptr<File> reader;
    REQUIRE(open.find(1, &reader));
    std::weak_ptr<File> weak = reader;
    open.drop(1);
    open.drop(9);  // not open: nothing happens
    CHECK(open.count() == 0);
    std::shared_ptr<File> got;
    CHECK_FALSE(open.find(1, &got));
    REQUIRE_OK(reader->pwrite("abc", 3, 0));
    std::uint64_t size = 0;
    REQUIRE_OK(reader->size(&size));
    CHECK(size == 3);
    reader.reset();
    CHECK(weak.expired());

    auto a = open_test_file(tmp, 2);
    auto b = open_test_file(tmp, 3);
    File* const b_raw = b.get();
    open.put(2, a);
    open.put(2, b);
    CHECK(open.count() == 1);
    REQUIRE(open.find(2, &got));
    CHECK(got.get() == b_raw);
}

TEST_CASE("open segments: a limit of 0 still keeps one file open", "[segment]") {
    TempDir tmp;
    OpenSegments open(0);
    open.put(1, open_test_file(tmp, 1));
    open.put(2, open_test_file(tmp, 2));
    CHECK(open.count() == 1);
    std::shared_ptr<File> got;
    CHECK(open.find(2, &got));
    CHECK_FALSE(open.find(1, &got));
}

}  // namespace
}  // namespace hiodsfs
