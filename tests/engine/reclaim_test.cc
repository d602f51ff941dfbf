// Space reclaim: deleted files are freed by the reclaimer (not in the
// deleting request), and compaction copies live chunks out of mostly-dead
// segments and deletes them, safely against crashes and concurrent reads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/fsync_log.h"
#include "engine_test_util.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

const ChunkingParams kChunking = ChunkingParams::cdc(2048, 8192, 32768);

EngineOptions reclaim_options(const std::string& store) {
    EngineOptions o = options_for(store, kChunking);
    o.reclaim = ReclaimMode::kManual;  // nothing runs until run_reclaim()
    o.background_threads = 0;
    o.background_commit = false;
    o.segments.max_segment_bytes = 1ull << 20;
    o.segments.write_buffer_bytes = 64 * 1024;
    return o;
}

void require_ok(const Status& st) {
    INFO(st.to_string());
    REQUIRE(st.is_ok());
}

// Segment files on disk: id -> size.
std::map<SegmentId, std::uint64_t> segment_files(const std::string& store) {
    std::map<SegmentId, std::uint64_t> out;
    for (const auto& e : std::filesystem::directory_iterator(store + "/segments")) {
        std::string name = e.path().filename().string();
        if (name.size() != 12 || name.substr(8) != ".seg") continue;
        out[static_cast<SegmentId>(std::stoul(name.substr(0, 8), nullptr, 16))] = e.file_size();
    }
    return out;
}

// Per-segment invariants of a closed store: every chunk lies in a segment
// file that exists, and each segment's live count is what its chunks hold.
std::vector<std::string> check_segments(const std::string& store, bool exact_dead_bytes = true) {
    std::vector<std::string> problems = check_invariants(store, exact_dead_bytes);
    auto files = segment_files(store);
    std::unique_ptr<MetaStore> m;
    Status st = MetaStore::open(store + "/meta", 1ull << 32, true, &m);
    if (!st) return {"open metadata: " + st.to_string()};
    std::unique_ptr<Txn> t;
    if (!m->begin(&t)) return {"begin"};
    std::map<SegmentId, std::uint64_t> live;
    for (const auto& [id, r] : all_chunk_records(*t)) {
        live[r.segment] += r.length;
        auto f = files.find(r.segment);
        if (f == files.end())
            problems.push_back("chunk " + std::to_string(id) + " is in missing segment " + std::to_string(r.segment));
        else if (r.offset + r.length > f->second)
            problems.push_back("chunk " + std::to_string(id) + " lies past its segment's end");
    }
    std::map<SegmentId, std::uint64_t> counted;
    {
        Cursor c = t->cursor(Db::kSegments);
        for (bool ok = c.first(); ok; ok = c.next()) counted[key_number(c.key())] = get_be64(c.value());
    }
    for (const auto& [seg, bytes] : live)
        if (counted[seg] != bytes)
            problems.push_back("segment " + std::to_string(seg) + " counts " + std::to_string(counted[seg]) +
                               " live bytes, its chunks hold " + std::to_string(bytes));
    for (const auto& [seg, bytes] : counted)
        if (bytes != 0 && live.count(seg) == 0)
            problems.push_back("segment " + std::to_string(seg) + " counts " + std::to_string(bytes) +
                               " live bytes but holds no chunk");
    return problems;
}

// check_segments() of a closed store finds nothing (`when` names the moment).
void check_store(const std::string& store, const char* when, bool exact_dead_bytes = true) {
    auto problems = check_segments(store, exact_dead_bytes);
    INFO(problems.size() << " problems " << when << ", first: " << (problems.empty() ? "" : problems.front()));
    CHECK(problems.empty());
}

// Writes `keep` and `drop` interleaved in 64 KiB pieces, so every segment
// holds some of each; fsyncs both.
void write_interleaved(Engine& e, InodeId keep, const std::vector<std::uint8_t>& kd, InodeId drop,
                       const std::vector<std::uint8_t>& dd) {
    const std::size_t piece = 64 * 1024;
    std::size_t ko = 0, dof = 0;
    while (ko < kd.size() || dof < dd.size()) {
        if (ko < kd.size()) {
            std::size_t n = std::min(piece, kd.size() - ko);
            require_ok(e.write(keep, ko, kd.data() + ko, n));
            ko += n;
        }
        for (int i = 0; i < 4 && dof < dd.size(); ++i) {  // four times as much to drop
            std::size_t n = std::min(piece, dd.size() - dof);
            require_ok(e.write(drop, dof, dd.data() + dof, n));
            dof += n;
        }
    }
    require_ok(e.fsync(keep, false));
    require_ok(e.fsync(drop, false));
}

// Writes "keep" and "drop" interleaved, deletes "drop" and makes all of it
// durable: every segment is then mostly dead. Returns keep's inode.
InodeId keep_and_delete(Engine& e, const std::vector<std::uint8_t>& keep_data,
                        const std::vector<std::uint8_t>& drop_data) {
    Attr keep = make_file(e, "keep"), drop = make_file(e, "drop");
    write_interleaved(e, keep.ino, keep_data, drop.ino, drop_data);
    require_ok(e.unlink(kRootInode, "drop"));
    require_ok(e.sync_all());
    return keep.ino;
}

}  // namespace

TEST_CASE("compaction moves live chunks out of mostly-dead segments; data reads back identical",
          "[engine][reclaim]") {
    TempDir dir;
    std::mt19937_64 rng(11);
    auto keep_data = random_bytes(rng, 2 << 20);
    auto drop_data = random_bytes(rng, 8 << 20);
    {
        auto e = open_engine(reclaim_options(dir.store()));
        Attr keep = make_file(*e, "keep"), drop = make_file(*e, "drop");
        write_interleaved(*e, keep.ino, keep_data, drop.ino, drop_data);
        SpaceCounters before;
        require_ok(e->counters(&before));
        require_ok(e->unlink(kRootInode, "drop"));
        require_ok(e->run_reclaim());
        SpaceCounters after;
        require_ok(e->counters(&after));
        INFO("before: disk " << before.disk_bytes << " after: disk " << after.disk_bytes << ", stored "
                             << after.stored_bytes << ", dead " << after.dead_bytes);
        CHECK(after.logical_bytes == keep_data.size());
        CHECK(after.stored_bytes == before.stored_bytes - drop_data.size());
        // Every segment left is at least half live (or the active one),
        // so the disk holds at most about twice the live data.
        CHECK(after.disk_bytes < 2 * after.stored_bytes + (1u << 20));
        CHECK(after.disk_bytes < before.disk_bytes / 2);
        CHECK(after.dead_bytes < after.stored_bytes);
        CHECK(read_all(*e, keep.ino) == keep_data);
        // Nothing left to do: a second run changes nothing.
        require_ok(e->run_reclaim());
        SpaceCounters again;
        require_ok(e->counters(&again));
        CHECK(again.disk_bytes == after.disk_bytes);
        require_ok(e->close());
    }
    check_store(dir.store(), "in the store");
    auto e = open_engine(reclaim_options(dir.store()));
    Attr a;
    require_ok(e->lookup(kRootInode, "keep", &a));
    CHECK(read_all(*e, a.ino) == keep_data);
}

TEST_CASE("wholly dead segments are deleted, the active one too once sealed", "[engine][reclaim]") {
    TempDir dir;
    std::mt19937_64 rng(12);
    auto data = random_bytes(rng, 6 << 20);
    auto e = open_engine(reclaim_options(dir.store()));
    SpaceCounters empty;
    require_ok(e->counters(&empty));
    Attr f = make_file(*e, "big");
    write_all(*e, f.ino, 0, data);
    require_ok(e->fsync(f.ino, false));
    require_ok(e->unlink(kRootInode, "big"));
    require_ok(e->run_reclaim());
    SpaceCounters c;
    require_ok(e->counters(&c));
    INFO("disk " << c.disk_bytes << " dead " << c.dead_bytes);
    CHECK(c.logical_bytes == 0);
    CHECK(c.stored_bytes == 0);
    CHECK(c.chunk_count == 0);
    CHECK(c.disk_bytes == 0);  // the files are gone; a new, empty active segment remains
    CHECK(c.dead_bytes == 0);
    auto files = segment_files(dir.store());
    CHECK(files.size() == 1);
    require_ok(e->close());
    check_store(dir.store(), "in the store");
}

// What SpaceCounters::dead_bytes must say of a closed store: the payload of
// the chunk records in its segment files that no chunk points at (headers
// and fsync log records are no chunk's payload).
std::uint64_t dead_payload(const std::string& store) {
    std::uint64_t payload = 0;
    for_each_segment_record(store, false, [&](const SegmentRecord& r) {
        if (r.chunk != kLogRecord) payload += r.location.length;
    });
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(store + "/meta", 1ull << 32, true, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    std::uint64_t live = 0;
    for (const auto& [id, r] : all_chunk_records(*t)) live += r.length;
    REQUIRE(live <= payload);
    return payload - live;
}

TEST_CASE("dead_bytes counts exactly the dead payload after segments are deleted or compacted",
          "[engine][reclaim][log]") {
    // 0: only wholly dead segments go; 0.9: mostly dead ones are compacted too.
    const double threshold = GENERATE(0.0, 0.9);
    INFO("compact_threshold " << threshold);
    TempDir dir;
    std::mt19937_64 rng(31);
    EngineOptions o = reclaim_options(dir.store());
    o.compact_threshold = threshold;
    std::uint64_t counted = 0;
    {
        auto e = open_engine(o);
        // Fsyncs put log records among the chunks of every file.
        std::vector<InodeId> inos;
        for (int i = 0; i < 6; ++i) {
            inos.push_back(make_file(*e, "f" + std::to_string(i)).ino);
            write_all(*e, inos.back(), 0, random_bytes(rng, 700 * 1024), 100 * 1024);
            require_ok(e->fsync(inos.back(), false));
            require_ok(e->sync_all());  // each file in a group of its own
        }
        for (int i : {0, 1, 2, 4}) require_ok(e->unlink(kRootInode, "f" + std::to_string(i)));
        require_ok(e->run_reclaim());
        SpaceCounters c;
        require_ok(e->counters(&c));
        counted = c.dead_bytes;
        require_ok(e->close());
    }
    const std::uint64_t truth = dead_payload(dir.store());
    // Without compaction the segments shared with f3 and f5 keep dead bytes.
    if (threshold == 0.0) CHECK(truth > 0);
    CHECK(counted == truth);
    check_store(dir.store(), "after reclaim");
}

TEST_CASE("deleting a large file only queues it; the reclaimer frees it in steps", "[engine][reclaim]") {
    TempDir dir;
    std::mt19937_64 rng(13);
    // Fixed 1 KiB chunks: 6000 extents, more than one purge step frees.
    EngineOptions o = reclaim_options(dir.store());
    o.chunking = ChunkingParams::fixed(1024);
    auto big = random_bytes(rng, 6000 * 1024);
    auto small = random_bytes(rng, 100 * 1024);
    {
        auto e = open_engine(o);
        Attr b = make_file(*e, "big"), s = make_file(*e, "small");
        write_all(*e, b.ino, 0, big);
        write_all(*e, s.ino, 0, small);
        require_ok(e->flush(b.ino));
        require_ok(e->flush(s.ino));
        SpaceCounters c0;
        require_ok(e->counters(&c0));
        REQUIRE(c0.logical_bytes == big.size() + small.size());
        // A small file is freed in the request, as before.
        require_ok(e->unlink(kRootInode, "small"));
        SpaceCounters c1;
        require_ok(e->counters(&c1));
        CHECK(c1.logical_bytes == big.size());
        CHECK(c1.inode_count == c0.inode_count - 1);
        // The large one: the request removed the name and did no freeing.
        require_ok(e->unlink(kRootInode, "big"));
        Attr gone;
        CHECK(e->lookup(kRootInode, "big", &gone).err() == ENOENT);
        SpaceCounters c2;
        require_ok(e->counters(&c2));
        CHECK(c2.logical_bytes == big.size());
        CHECK(c2.stored_bytes == c1.stored_bytes);
        CHECK(c2.inode_count == c1.inode_count);
        // Queued work survives a restart (reclaim still manual).
        require_ok(e->close());
    }
    CHECK(check_invariants(dir.store()).empty());
    {
        auto e = open_engine(o);
        SpaceCounters c;
        require_ok(e->counters(&c));
        CHECK(c.logical_bytes == big.size());
        require_ok(e->run_reclaim());
        require_ok(e->counters(&c));
        CHECK(c.logical_bytes == 0);
        CHECK(c.stored_bytes == 0);
        CHECK(c.inode_count == 1);
        CHECK(c.disk_bytes == 0);
        require_ok(e->close());
    }
    check_store(dir.store(), "in the store");
}

TEST_CASE("a large file deleted while open is freed after its last handle goes", "[engine][reclaim]") {
    TempDir dir;
    std::mt19937_64 rng(14);
    auto data = random_bytes(rng, 3 << 20);
    EngineOptions o = reclaim_options(dir.store());
    SECTION("reclaim off: freed by unpin in the request, and at the next open after a crash") {
        o.reclaim = ReclaimMode::kOff;
    }
    SECTION("manual reclaim: queued at unpin, freed by the reclaimer") {}
    auto e = open_engine(o);
    Attr f = make_file(*e, "f");
    write_all(*e, f.ino, 0, data);
    require_ok(e->fsync(f.ino, false));
    e->pin(f.ino);
    require_ok(e->unlink(kRootInode, "f"));
    require_ok(e->run_reclaim());  // pinned: not freed
    CHECK(read_all(*e, f.ino) == data);
    SpaceCounters c;
    require_ok(e->counters(&c));
    CHECK(c.logical_bytes == data.size());
    e->unpin(f.ino);
    require_ok(e->counters(&c));
    CHECK(c.logical_bytes == (o.reclaim == ReclaimMode::kOff ? 0 : data.size()));
    require_ok(e->run_reclaim());
    require_ok(e->counters(&c));
    CHECK(c.logical_bytes == 0);
    CHECK(c.inode_count == 1);
}

TEST_CASE("compaction under power loss at every stage keeps every file", "[engine][reclaim][crash][slow]") {
    // The k-th write or sync of the compaction fails (a dying disk), then
    // power is lost; after the restart the store is consistent, every file
    // reads back, and a second reclaim finishes the job.
    std::mt19937_64 rng(15);
    auto keep_data = random_bytes(rng, 1 << 20);
    auto drop_data = random_bytes(rng, 4 << 20);
    for (int fault = 0; fault < 26; ++fault) {
        const DyingDisk disk(fault);
        INFO("fault " << disk.describe());
        TempDir dir;
        FaultInjectionEnv fenv(Env::posix());
        fenv.set_forward_syncs(false);
        EngineOptions o = reclaim_options(dir.store());
        o.env = &fenv;
        o.segments.write_buffer_bytes = 32 * 1024;
        InodeId keep_ino = 0;
        {
            auto e = open_engine(o);
            keep_ino = keep_and_delete(*e, keep_data, drop_data);
            disk.arm(fenv);
            Status st = e->run_reclaim();  // fails somewhere, or finishes
            (void)st;
            abandon_engine(*e);  // the crash
        }
        require_ok(fenv.drop_unsynced(static_cast<std::uint64_t>(fault) * 31 + 7));
        // Power lost in a deletion's commit, after its unlink, leaves the
        // dead-bytes counter over by what the file held; lost after a
        // commit but before the move of the copies made so far, it leaves
        // those copies uncounted. hiodsfs-fsck notes either, --repair sets
        // the counter; every later step keeps the difference.
        check_store(dir.store(), "after the crash", false);
        auto e = open_engine(o);
        CHECK(read_all(*e, keep_ino) == keep_data);
        require_ok(e->run_reclaim());
        CHECK(read_all(*e, keep_ino) == keep_data);
        SpaceCounters c;
        require_ok(e->counters(&c));
        CHECK(c.logical_bytes == keep_data.size());
        CHECK(c.disk_bytes < 2 * c.stored_bytes + (1u << 20));
        require_ok(e->close());
        check_store(dir.store(), "at the end", false);
    }
}

TEST_CASE("a compaction that stops part-way counts the copies it made as dead", "[engine][reclaim]") {
    // The copies of a job that gives up (here: a live record it cannot
    // read) or that a close stops are referred to by nothing: hiodsfs-stat's
    // dead bytes must count them, as hiodsfs-fsck checks.
    TempDir dir;
    std::mt19937_64 rng(23);
    auto keep_data = random_bytes(rng, 1 << 20);
    auto drop_data = random_bytes(rng, 4 << 20);
    EngineOptions o = reclaim_options(dir.store());
    InodeId keep_ino = 0;
    {
        auto e = open_engine(o);
        keep_ino = keep_and_delete(*e, keep_data, drop_data);
        require_ok(e->close());
    }
    {
        // Every live chunk but the first of its segment is damaged: a job
        // copies that one, then stops at the next.
        std::unique_ptr<MetaStore> m;
        require_ok(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m));
        std::unique_ptr<Txn> t;
        require_ok(m->begin(&t));
        // The chunks "keep" refers to ("drop"'s are still mapped, queued
        // for the purge that the reclaim below does first).
        std::set<ChunkId> used;
        for (const auto& [ino, m] : all_extents(*t))
            if (ino == keep_ino) used.insert(m.e.chunk);
        std::map<SegmentId, std::map<std::uint64_t, ChunkRecord>> by_segment;  // offset -> record
        for (const auto& [id, r] : all_chunk_records(*t))
            if (used.count(id)) by_segment[r.segment][r.offset] = r;
        t.reset();
        m.reset();
        int flipped = 0;
        for (const auto& [seg, records] : by_segment) {
            for (auto it = std::next(records.begin()); it != records.end(); ++it, ++flipped)
                flip_chunk_byte(dir.store(), it->second, 0);
        }
        REQUIRE(flipped > 0);
    }
    {
        auto e = open_engine(o);
        const Status st = e->run_reclaim();
        INFO(st.to_string());
        CHECK(st.message().find("stopped, the segment stays") != std::string::npos);  // the job gave up
        require_ok(e->close());
    }
    auto problems = check_invariants(dir.store());
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
}

TEST_CASE("a crash after compaction committed finds the old segments gone and every file intact",
          "[engine][reclaim][crash]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    EngineOptions o = reclaim_options(dir.store());
    o.env = &fenv;
    std::mt19937_64 rng(16);
    auto keep_data = random_bytes(rng, 1 << 20);
    auto drop_data = random_bytes(rng, 4 << 20);
    InodeId keep_ino = 0;
    std::size_t files_before = 0, files_after = 0;
    {
        auto e = open_engine(o);
        keep_ino = keep_and_delete(*e, keep_data, drop_data);
        files_before = segment_files(dir.store()).size();
        require_ok(e->run_reclaim());
        files_after = segment_files(dir.store()).size();
        CHECK(files_after < files_before);
        abandon_engine(*e);
    }
    // Worst case: nothing unsynced survives. Each deletion commits at once,
    // with the directory sync that makes it durable: no deleted file comes
    // back, and the dead-bytes counter took off what it held.
    require_ok(fenv.drop_all_unsynced());
    CHECK(segment_files(dir.store()).size() == files_after);
    check_store(dir.store(), "in the store");
    auto e = open_engine(o);
    CHECK(read_all(*e, keep_ino) == keep_data);
    require_ok(e->run_reclaim());
    SpaceCounters c;
    require_ok(e->counters(&c));
    CHECK(c.disk_bytes < 2 * c.stored_bytes + (1u << 20));
    CHECK(read_all(*e, keep_ino) == keep_data);
}

TEST_CASE("reads running during compaction always return the right bytes", "[engine][reclaim]") {
    TempDir dir;
    EngineOptions o = reclaim_options(dir.store());
    o.segments.max_open_segments = 2;  // readers reopen segment files often
    std::mt19937_64 rng(17);
    auto keep_data = random_bytes(rng, 2 << 20);
    auto e = open_engine(o);
    Attr keep = make_file(*e, "keep");
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> reads{0}, bad{0};
    std::string first_error;
    std::mutex error_mu;
    bool written = false;
    std::vector<std::thread> readers;
    for (int round = 0; round < 6; ++round) {
        Attr drop = make_file(*e, "drop");
        auto drop_data = random_bytes(rng, 3 << 20);
        if (!written) {
            write_interleaved(*e, keep.ino, keep_data, drop.ino, drop_data);
            written = true;
            for (int r = 0; r < 2; ++r) {
                readers.emplace_back([&, r] {
                    std::vector<std::uint8_t> buf(256 * 1024);
                    std::mt19937_64 rr(100 + r);
                    while (!stop.load()) {
                        std::uint64_t off = rr() % (keep_data.size() - buf.size());
                        std::size_t got = 0;
                        Status st = e->read(keep.ino, off, buf.size(), buf.data(), &got);
                        reads += 1;
                        if (!st || got != buf.size() ||
                            std::memcmp(buf.data(), keep_data.data() + off, buf.size()) != 0) {
                            bad += 1;
                            std::lock_guard<std::mutex> l(error_mu);
                            if (first_error.empty()) first_error = st.to_string();
                        }
                    }
                });
            }
        } else {
            write_all(*e, drop.ino, 0, drop_data);
            require_ok(e->fsync(drop.ino, false));
        }
        require_ok(e->unlink(kRootInode, "drop"));
        require_ok(e->run_reclaim());
    }
    stop = true;
    for (auto& t : readers) t.join();
    INFO("reads " << reads.load() << ", first error: " << first_error);
    CHECK(reads.load() > 0);
    CHECK(bad.load() == 0);
    CHECK(read_all(*e, keep.ino) == keep_data);
    require_ok(e->close());
    check_store(dir.store(), "in the store");
}

namespace {

// An Env that holds the first `held` opens of one file, each until the test
// lets it go: the test sees which thread is where without sleeping.
class OpenGateEnv final : public Env {
public:
    OpenGateEnv(Env* base, std::string path, int held)
        : base_(base), path_(std::move(path)), held_(held) {}

    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        if (path == path_) {
            std::unique_lock l(mu_);
            if (armed_ && arrived_ < held_) {
                const int me = ++arrived_;
                cv_.notify_all();
                cv_.wait(l, [&] { return released_ >= me; });
            }
        }
        return base_->open(path, mode, out);
    }
    Status unlink(const std::string& p) override { return base_->unlink(p); }
    Status rename(const std::string& a, const std::string& b) override {
        return base_->rename(a, b);
    }
    Status mkdir(const std::string& p) override { return base_->mkdir(p); }
    Status list_dir(const std::string& p, std::vector<std::string>* n) override {
        return base_->list_dir(p, n);
    }
    bool exists(const std::string& p) override { return base_->exists(p); }
    Status sync_dir(const std::string& p) override { return base_->sync_dir(p); }

    void arm() {
        std::lock_guard l(mu_);
        armed_ = true;
    }
    // Waits until the n-th held open has arrived (false after a minute).
    bool wait_arrived(int n) {
        std::unique_lock l(mu_);
        return cv_.wait_for(l, std::chrono::seconds(60), [&] { return arrived_ >= n; });
    }
    // Lets the n-th held open go on.
    void release(int n) {
        std::lock_guard l(mu_);
        released_ = std::max(released_, n);
        cv_.notify_all();
    }
    void release_all() { release(held_); }

private:
    Env* const base_;
    const std::string path_;
    const int held_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool armed_ = false;
    int arrived_ = 0, released_ = 0;
};

}  // namespace

// A read plans its chunks, then reads them. An overwrite in a window (no
// stream lock held) may free a planned chunk meanwhile, and compaction
// delete its segment: the read must plan again, not answer EIO.
TEST_CASE("a read whose chunk an overwrite freed and compaction removed plans again",
          "[engine][reclaim]") {
    TempDir dir;
    EngineOptions o = reclaim_options(dir.store());
    o.compact_threshold = 0.99;
    // One handle cached: the first segment is opened anew by whoever reads it.
    o.segments.max_open_segments = 1;
    std::mt19937_64 rng(71);
    const auto f_data = random_bytes(rng, 256 * 1024), filler = random_bytes(rng, 2000 * 1024);
    const auto patch = random_bytes(rng, 4096);
    constexpr std::uint64_t kAt = 100 * 1024;
    InodeId f = 0;
    {
        auto e = open_engine(o);
        f = make_file(*e, "f").ino;
        write_all(*e, f, 0, f_data);                            // segment 1
        write_all(*e, make_file(*e, "filler").ino, 0, filler);  // on into segments 2 and 3
        require_ok(e->close());
    }
    const std::string first = dir.store() + "/segments/00000001.seg";
    REQUIRE(segment_files(dir.store()).size() >= 3);
    OpenGateEnv gate(Env::posix(), first, 2);
    o.env = &gate;
    auto e = open_engine(o);
    gate.arm();
    // The overwrite opens its window and reads the old bytes around it:
    // held at the first open of segment 1, its chunks not yet mapped.
    Status wrote;
    std::thread writer([&] { wrote = e->write(f, kAt, patch.data(), patch.size()); });
    REQUIRE(gate.wait_arrived(1));
    // The read plans the old chunks (the overwrite has mapped nothing) and
    // is held at the second open of segment 1, before its pread.
    std::vector<std::uint8_t> got(patch.size());
    std::size_t n = 0;
    Status read;
    std::thread reader([&] { read = e->read(f, kAt, got.size(), got.data(), &n); });
    if (!gate.wait_arrived(2)) {
        gate.release_all();
        writer.join();
        reader.join();
        FAIL("the read never reached segment 1");
    }
    // The overwrite maps its chunks: the old ones die, their bytes dead.
    SpaceCounters before;
    require_ok(e->counters(&before));
    gate.release(1);
    bool freed = false;
    for (int i = 0; i < 6000 && !freed; ++i) {
        SpaceCounters c;
        require_ok(e->counters(&c));
        freed = c.dead_bytes > before.dead_bytes;
        if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(freed);
    // Compaction moves what still lives in segment 1 and deletes it.
    require_ok(e->run_reclaim());
    CHECK(segment_files(dir.store()).count(1) == 0);
    gate.release(2);
    reader.join();
    writer.join();
    require_ok(wrote);
    INFO(read.to_string());
    CHECK(read.is_ok());
    CHECK(n == patch.size());
    CHECK(got == patch);
    CHECK(nlohmann::json::parse(e->status_json())["read_replans"].get<std::uint64_t>() >= 1);
    auto want = f_data;
    std::copy(patch.begin(), patch.end(), want.begin() + kAt);
    CHECK(read_all(*e, f) == want);
    require_ok(e->close());
    e.reset();
    check_store(dir.store(), "after the race");
}

// Overwrites under a load that keeps the pass paused leave the old bytes
// dead, and the reclaimer went by the same throttle: the store's disk use
// grew for as long as the load lasted. Past its bound (twice the live
// bytes, and a floor) the dead space is reclaimed whatever the throttle says.
TEST_CASE("dead space past its bound is reclaimed while the throttle keeps the background paused",
          "[engine][reclaim][spare]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kChunking);
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;  // no pass: the raw copies stay, and die when overwritten
    o.reclaim = ReclaimMode::kBackground;
    o.control.interval_ms = 50;
    o.segments.max_segment_bytes = 1ull << 20;
    EngineHooks hooks;
    hooks.background_speed = [] { return 0.0; };  // paused, always
    hooks.dead_space_floor = 4ull << 20;
    auto e = open_engine(o, hooks);
    std::mt19937_64 rng(91);
    const Attr a = make_file(*e, "f");
    std::vector<std::uint8_t> data;
    for (int i = 0; i < 12; ++i) {
        data = random_bytes(rng, 2u << 20);
        write_all(*e, a.ino, 0, data, 256 * 1024);
        require_ok(e->fsync(a.ino, false));
    }
    // 24 MiB written over 2 MiB: 22 MiB died, 11 times the live bytes. The
    // control loop sees it (perhaps already while they were written), and
    // the reclaimer runs though the speed is 0; without that, the dead
    // bytes would stay.
    SpaceCounters c = counters_of(*e);
    INFO("after the overwrites: stored " << c.stored_bytes << ", dead " << c.dead_bytes);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
        c = counters_of(*e);
        if (c.dead_bytes <= 2 * c.stored_bytes || c.dead_bytes <= hooks.dead_space_floor) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    INFO("then: stored " << c.stored_bytes << ", dead " << c.dead_bytes << ", disk " << c.disk_bytes);
    CHECK((c.dead_bytes <= 2 * c.stored_bytes || c.dead_bytes <= hooks.dead_space_floor));
    CHECK(c.disk_bytes <= 4 * c.stored_bytes + hooks.dead_space_floor);
    CHECK(read_all(*e, a.ino) == data);
    require_ok(e->close());
    e.reset();
    check_store(dir.store(), "after the forced reclaim", false);
}
