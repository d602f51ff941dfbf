// The Committer (src/engine/commit.cc) with WriteBehind (write_behind.cc)
// on a MetaStore and a SegmentStore of their own, no engine around them: a
// commit carries the writes held back and puts its frontier after their
// bytes, every segment this run made gets an entry, fsync's log records go
// to the segments, and a failed commit is said once.
#include "engine/commit.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/inode_ops.h"
#include "engine/pending_dirty.h"
#include "engine/write_behind.h"
#include "engine/write_errors.h"
#include "../meta/meta_temp_dir.h"
#include "engine_test_util.h"
#include "meta/chunk_table.h"
#include "meta/keys.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using hiodsfs::test::TempDir;

namespace {

// A MetaStore and SegmentStore in a temporary directory, with the two
// parts under test wired as the engine wires them.
struct Rig {
    explicit Rig(MetaStoreOptions meta_options = {}, Env* env = Env::posix(), std::size_t write_buffer = 1u << 20) {
        // A small map: TSan's address space has no room for the default 1 TiB.
        meta_options.map_bytes = 1ull << 30;
        const Status opened = MetaStore::open(dir.path() + "/meta", meta_options, &meta);
        INFO(opened.message());
        REQUIRE(opened.is_ok());
        SegmentStoreOptions seg_options;
        seg_options.max_segment_bytes = 1 << 20;
        seg_options.write_buffer_bytes = write_buffer;
        REQUIRE(SegmentStore::open(env, dir.path() + "/segments", seg_options, &segs).is_ok());
        REQUIRE(StoreDir::open(dir.path(), StoreDirOptions{}, &store).is_ok());
        WriteBehindParts held;
        held.meta = meta.get();
        held.segs = segs.get();
        held.pending = &pending;
        held.errors = &errors;
        held.log = [this](const std::string& line) { log.push_back(line); };
        write_behind = std::make_unique<WriteBehind>(std::move(held));
        meta->set_held_back(write_behind.get());
        CommitterParts parts;
        parts.meta = meta.get();
        parts.segs = segs.get();
        parts.write_behind = write_behind.get();
        parts.store = store.get();
        parts.log = [this](const std::string& line) { log.push_back(line); };
        parts.stop_with_segments = [this] {
            ++stop_checks;
            return false;
        };
        commit = std::make_unique<Committer>(std::move(parts));
    }
    ~Rig() { meta->set_held_back(nullptr); }

    void make_file(InodeId ino) {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t).is_ok());
        Inode in;
        in.r.mode = S_IFREG | 0644;
        in.r.nlink = 1;
        REQUIRE(store_inode(*t, ino, in).is_ok());
        REQUIRE(t->commit().is_ok());
    }
    Inode inode(InodeId ino) {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t).is_ok());
        Inode in;
        REQUIRE(load_inode(*t, ino, &in).is_ok());
        return in;
    }
    bool has_segment_entry(SegmentId seg) { return test::has(*meta, Db::kSegments, key_u64(seg)); }

    TempDir dir;
    std::unique_ptr<MetaStore> meta;
    std::unique_ptr<SegmentStore> segs;
    std::unique_ptr<StoreDir> store;
    PendingDirty pending;
    WriteErrors errors;
    std::vector<std::string> log;
    int stop_checks = 0;
    std::unique_ptr<WriteBehind> write_behind;
    std::unique_ptr<Committer> commit;
};

}  // namespace

TEST_CASE("a commit carries the held writes, with its frontier after their bytes", "[engine][commit]") {
    Rig rig;
    rig.make_file(5);
    const std::vector<std::uint8_t> data(10000, 0x5a);
    REQUIRE(rig.write_behind->hold(5, 0, data.data(), data.size(), 4096, nullptr).is_ok());
    CHECK(rig.write_behind->holding());
    const SegmentPosition appended = rig.segs->append_position();

    REQUIRE(rig.commit->commit_now().is_ok());
    CHECK_FALSE(rig.write_behind->holding());
    CHECK(rig.write_behind->applied() == 3);  // three raw pieces of at most 4096 bytes
    const SuperState committed = rig.meta->super_snapshot();
    CHECK(committed.frontier_segment == appended.segment);
    CHECK(committed.frontier_offset == appended.offset);
    CHECK(rig.write_behind->drained_at().segment == appended.segment);
    CHECK(rig.write_behind->drained_at().offset == appended.offset);
    const Inode in = rig.inode(5);
    CHECK(in.r.size == data.size());
    CHECK(committed.counters.raw_bytes == data.size());
    CHECK(rig.has_segment_entry(appended.segment));
    CHECK(rig.log.empty());
}

TEST_CASE("a write held after the group took the others lies past the frontier", "[engine][commit]") {
    Rig rig;
    rig.make_file(5);
    const std::vector<std::uint8_t> data(4096, 1);
    REQUIRE(rig.write_behind->hold(5, 0, data.data(), data.size(), 4096, nullptr).is_ok());
    REQUIRE(rig.commit->commit_now().is_ok());
    const SegmentPosition first = rig.segs->append_position();
    // Appended, not yet applied: the next group has it, this one's frontier does not.
    REQUIRE(rig.write_behind->hold(5, 4096, data.data(), data.size(), 4096, nullptr).is_ok());
    const SuperState committed = rig.meta->super_snapshot();
    CHECK(committed.frontier_offset == first.offset);
    REQUIRE(rig.commit->commit_now().is_ok());
    CHECK(rig.meta->super_snapshot().frontier_offset == rig.segs->append_position().offset);
    CHECK(rig.inode(5).r.size == 8192);
}

// A hold appends its pieces one by one, and may wait between them for the
// segment flusher. Pieces it has appended are in a segment before the
// hold returns: an operation that began then without them (compaction
// looking at that segment's live bytes) would find the segment emptier
// than it is, seal it, and delete it under the writes (a full-disk mount
// test lost a file's bytes so). holding() covers a hold under way, so
// that every operation waits for it and applies its writes first.
TEST_CASE("a hold still appending counts as held: no operation begins without its writes", "[engine][commit]") {
    FaultInjectionEnv env(Env::posix());
    // One piece a buffer: the third piece waits for the flusher's write of the first.
    Rig rig(MetaStoreOptions{}, &env, 4096);
    rig.make_file(5);
    std::mutex mu;
    std::condition_variable cv;
    bool writing = false, release = false;
    env.set_before_write([&] {
        std::unique_lock<std::mutex> l(mu);
        writing = true;
        cv.notify_all();
        cv.wait(l, [&] { return release; });
    });
    const std::vector<std::uint8_t> data(3 * 4096, 0x33);
    Status held;
    std::thread writer([&] { held = rig.write_behind->hold(5, 0, data.data(), data.size(), 4096, nullptr); });
    {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return writing; });
    }
    // The first piece is in the segment store, the hold not over.
    CHECK(rig.write_behind->holding());
    {
        std::lock_guard<std::mutex> l(mu);
        release = true;
    }
    cv.notify_all();
    // An operation begun now waits for the hold and applies all of it.
    std::unique_ptr<Txn> t;
    REQUIRE(rig.meta->begin(&t).is_ok());
    Inode in;
    REQUIRE(load_inode(*t, 5, &in).is_ok());
    t.reset();
    writer.join();
    env.set_before_write({});
    REQUIRE(held.is_ok());
    CHECK(in.r.size == data.size());
    CHECK(rig.write_behind->applied() == 3);
}

TEST_CASE("a segment made this run gets an entry though no chunk refers to it", "[engine][commit]") {
    Rig rig;
    // A write to a file that does not exist (freed with bytes in its
    // stream): its bytes are dead, and no chunk record is made.
    const std::vector<std::uint8_t> data(4096, 2);
    REQUIRE(rig.write_behind->hold(99, 0, data.data(), data.size(), 4096, nullptr).is_ok());
    const SegmentId seg = rig.segs->append_position().segment;
    REQUIRE(rig.commit->commit_now().is_ok());
    CHECK(rig.has_segment_entry(seg));
    CHECK(rig.meta->super_snapshot().counters.dead_bytes == data.size());
}

TEST_CASE("segments found at open are left as they were", "[engine][commit]") {
    Rig rig;
    const SegmentId seg = rig.segs->active_segment();
    rig.commit->found_at_open(seg);
    rig.make_file(5);  // an operation, so the commit has a group
    REQUIRE(rig.commit->commit_now().is_ok());
    CHECK_FALSE(rig.has_segment_entry(seg));
}

TEST_CASE("fsync's log record goes to the segments, once", "[engine][commit]") {
    Rig rig;
    rig.meta->set_logging(true);
    rig.make_file(5);
    const SegmentPosition before = rig.segs->append_position();
    REQUIRE(rig.commit->log_now().is_ok());
    const SegmentPosition after = rig.segs->append_position();
    CHECK((after.segment != before.segment || after.offset > before.offset));
    CHECK(rig.has_segment_entry(after.segment));
    // The entry is itself a change after the record: the next record has
    // it. After that, nothing new: no record.
    REQUIRE(rig.commit->log_now().is_ok());
    const SegmentPosition settled = rig.segs->append_position();
    REQUIRE(rig.commit->log_now().is_ok());
    CHECK(rig.segs->append_position().offset == settled.offset);
}

TEST_CASE("a failed commit is said once, and asks whether the segments stopped", "[engine][commit]") {
    MetaStoreOptions options;
    int faults = 0;
    options.commit_fault = [&faults] { return faults > 0 ? (--faults, EIO) : 0; };
    Rig rig(options);
    rig.make_file(5);
    faults = 2;
    const Status first = rig.commit->commit_now();
    CHECK(first.err() == EIO);
    CHECK(rig.stop_checks == 1);
    const Status second = rig.commit->commit_now();
    CHECK_FALSE(second.is_ok());
    REQUIRE(rig.log.size() == 1);
    CHECK(rig.log[0].rfind("hiodsfs: ", 0) == 0);
}
