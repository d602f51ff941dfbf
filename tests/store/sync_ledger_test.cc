// SyncLedger: what a sync has left to do. A file written again while a
// sync ran stays dirty, a directory entry made meanwhile still needs its
// sync, and the durable position only moves forward.

#include "store/sync_ledger.h"

#include <memory>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::TempDir;

std::shared_ptr<File> ledger_test_file(const TempDir& tmp, const std::string& name) {
    std::unique_ptr<File> f;
    REQUIRE_OK(Env::posix()->open(tmp / name, OpenMode::kCreateNew, &f));
    return std::shared_ptr<File>(std::move(f));
}

TEST_CASE("sync ledger: a sync settles what it took; a file written meanwhile stays dirty",
          "[segment]") {
    TempDir tmp;
    SyncLedger ledger;
    CHECK(ledger.pending().empty());
    CHECK(ledger.covers(SegmentPosition{}));
    CHECK_FALSE(ledger.covers(SegmentPosition{1, 1}));

    auto f1 = ledger_test_file(tmp, "1");
    auto f2 = ledger_test_file(tmp, "2");
    ledger.wrote(1, f1);
    ledger.wrote(2, f2);
    SyncLedger::Pending p = ledger.pending();
    REQUIRE(p.files.size() == 2);
    CHECK_FALSE(p.need_dir);
    ledger.wrote(2, f2);  // while the sync of p runs
    ledger.synced(p, SegmentPosition{2, 100});
    CHECK_FALSE(ledger.is_dirty(1));
    CHECK(ledger.is_dirty(2));
    CHECK(ledger.covers(SegmentPosition{2, 100}));
    CHECK(ledger.covers(SegmentPosition{1, 5000}));
    CHECK_FALSE(ledger.covers(SegmentPosition{2, 101}));

    p = ledger.pending();
    REQUIRE(p.files.size() == 1);
    CHECK(p.files[0].first == 2);
    ledger.synced(p, SegmentPosition{2, 200});
    CHECK(ledger.pending().empty());

    // A sync that settles after a later one never moves the position back.
    ledger.synced(SyncLedger::Pending{}, SegmentPosition{2, 150});
    CHECK(ledger.covers(SegmentPosition{2, 200}));
}

TEST_CASE("sync ledger: a directory entry changed during a sync needs the next one; forget",
          "[segment]") {
    TempDir tmp;
    SyncLedger ledger;
    ledger.entry_changed();
    SyncLedger::Pending p = ledger.pending();
    CHECK(p.need_dir);
    CHECK_FALSE(p.empty());
    ledger.entry_changed();  // while the sync of p runs
    ledger.synced(p, SegmentPosition{});
    CHECK(ledger.pending().need_dir);
    ledger.synced(ledger.pending(), SegmentPosition{});
    CHECK(ledger.pending().empty());

    ledger.wrote(3, ledger_test_file(tmp, "3"));
    CHECK(ledger.is_dirty(3));
    ledger.forget(3);  // synced when sealed, or removed
    CHECK_FALSE(ledger.is_dirty(3));
    CHECK(ledger.pending().empty());
}

}  // namespace
}  // namespace hiodsfs
