// Write-behind: a deferred write's metadata is held in memory and applied
// many writes to a transaction; every reader sees it at once, fsync makes
// it durable, and a write whose metadata cannot be applied is reported at
// the file's next fsync or close, once, without costing other files theirs.
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

EngineOptions held_options(const std::string& store) {
    EngineOptions o = options_for(store, ChunkingParams::cdc(2048, 8192, 32768));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;
    o.background_commit = false;
    return o;
}

std::uint64_t status_count(Engine& e, const char* name) {
    return nlohmann::json::parse(e.status_json()).at(name).get<std::uint64_t>();
}

// Random 4 KiB writes into [0, span), applied to the model as well; the
// offsets written go to *offsets if given.
void random_writes(Engine& e, InodeId ino, std::vector<std::uint8_t>* model, std::uint64_t span,
                   int n, std::mt19937_64& rng, std::set<std::uint64_t>* offsets = nullptr) {
    for (int i = 0; i < n; ++i) {
        const std::uint64_t off = (rng() % (span / 4096)) * 4096;
        if (offsets != nullptr) offsets->insert(off);
        auto b = random_bytes(rng, 4096);
        if (model->size() < off + b.size()) model->resize(off + b.size());
        std::copy(b.begin(), b.end(), model->begin() + static_cast<std::ptrdiff_t>(off));
        REQUIRE(e.write(ino, off, b.data(), b.size()).is_ok());
    }
}

// Bytes of the store's segment files.
std::uint64_t segment_bytes(const std::string& store) {
    std::uint64_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(store + "/segments"))
        if (f.is_regular_file()) n += f.file_size();
    return n;
}

// Closes the engine and checks the store as hiodsfs-fsck would.
void close_and_check(std::unique_ptr<Engine> e, const std::string& store) {
    REQUIRE(e->close().is_ok());
    e.reset();
    auto problems = check_invariants(store);
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
}

}  // namespace

TEST_CASE("held writes are applied many to a transaction and every reader sees them at once",
          "[engine][write-behind]") {
    TempDir dir;
    std::mt19937_64 rng(17);
    std::vector<std::uint8_t> model;
    InodeId ino = 0;
    {
        auto e = open_engine(held_options(dir.store()));
        ino = make_file(*e, "f").ino;
        std::set<std::uint64_t> offsets;
        random_writes(*e, ino, &model, 4u << 20, 1000, rng, &offsets);
        // No commit and no other operation came between the writes: the
        // first reader applies what is held.
        Attr a;
        REQUIRE(e->getattr(ino, &a).is_ok());
        CHECK(a.size == model.size());
        CHECK(read_all(*e, ino) == model);
        CHECK(status_count(*e, "held_writes_applied") == 1000);
        const std::uint64_t batches = status_count(*e, "held_write_batches");
        INFO(batches << " batches");
        CHECK(batches >= 1);
        CHECK(batches <= 1000 / 256 + 1);
        SpaceCounters c;
        REQUIRE(e->counters(&c).is_ok());
        CHECK(c.backlog_records > 0);
        CHECK(c.raw_bytes == offsets.size() * 4096);  // an overwritten piece is freed
        REQUIRE(e->fsync(ino, false).is_ok());
        REQUIRE(e->close().is_ok());
    }
    auto e = open_engine(held_options(dir.store()));
    CHECK(read_all(*e, ino) == model);
    REQUIRE(e->run_background().is_ok());
    CHECK(read_all(*e, ino) == model);
    close_and_check(std::move(e), dir.store());
}

TEST_CASE("a read beside an apply of held writes waits for it and sees them", "[engine][write-behind]") {
    // An apply takes the held writes out before it has applied them; a read
    // that does not take the metadata lock (MetaStore::begin_read) must
    // still count them as held, or it reads the file without them.
    TempDir dir;
    EngineOptions o = held_options(dir.store());
    std::mutex mu;
    std::condition_variable cv;
    bool armed = false, in_apply = false, go = false;
    EngineHooks hooks;
    hooks.held_write_fault = [&](InodeId) {
        std::unique_lock<std::mutex> l(mu);
        if (armed) {
            armed = false;
            in_apply = true;
            cv.notify_all();
            cv.wait(l, [&] { return go; });
        }
        return 0;
    };
    auto e = open_engine(o, hooks);
    const InodeId ino = make_file(*e, "f").ino;
    std::mt19937_64 rng(23);
    const std::vector<std::uint8_t> data = random_bytes(rng, 64 * 1024);
    REQUIRE(e->write(ino, 0, data.data(), data.size()).is_ok());  // held
    {
        std::lock_guard<std::mutex> l(mu);
        armed = true;
    }
    // Another operation applies them first, and stops inside the apply.
    auto other = std::async(std::launch::async, [&] { return e->sync_all(); });
    {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return in_apply; });
    }
    std::vector<std::uint8_t> got(data.size(), 0xee);
    std::size_t n = 0;
    auto reading = std::async(std::launch::async, [&] { return e->read(ino, 0, got.size(), got.data(), &n); });
    reading.wait_for(std::chrono::milliseconds(200));  // time to read too early, if it would
    {
        std::lock_guard<std::mutex> l(mu);
        go = true;
        cv.notify_all();
    }
    REQUIRE(other.get().is_ok());
    REQUIRE(reading.get().is_ok());
    CHECK(n == data.size());
    CHECK(got == data);
}

TEST_CASE("held writes survive a crash once fsynced, and only the unsynced ones are lost",
          "[engine][write-behind]") {
    TempDir dir;
    std::mt19937_64 rng(5);
    std::vector<std::uint8_t> synced_model, model;
    InodeId ino = 0;
    {
        auto e = open_engine(held_options(dir.store()));
        ino = make_file(*e, "f").ino;
        random_writes(*e, ino, &model, 1u << 20, 300, rng);
        REQUIRE(e->fsync(ino, false).is_ok());
        synced_model = model;
        // Held, never applied or committed: gone with the crash.
        random_writes(*e, ino, &model, 2u << 20, 100, rng);
        abandon_engine(*e);
    }
    auto e = open_engine(held_options(dir.store()));
    CHECK(read_all(*e, ino) == synced_model);
    close_and_check(std::move(e), dir.store());
}

TEST_CASE("a held write that cannot be applied is reported at fsync, once, and costs no other file",
          "[engine][write-behind]") {
    TempDir dir;
    std::atomic<InodeId> failing{0};
    EngineOptions o = held_options(dir.store());
    EngineHooks hooks;
    hooks.held_write_fault = [&](InodeId ino) { return ino == failing.load() ? ENOSPC : 0; };
    std::vector<std::string> logged;
    o.log = [&](const std::string& m) { logged.push_back(m); };
    std::mutex changed_mu;
    std::set<InodeId> changed;  // files whose cached attributes the layer above must drop
    o.attrs_changed = [&](InodeId ino) {
        std::lock_guard<std::mutex> g(changed_mu);
        changed.insert(ino);
    };
    std::mt19937_64 rng(9);
    std::vector<std::uint8_t> a_model, b_model;
    InodeId a = 0, b = 0;
    {
        auto e = open_engine(o, hooks);
        a = make_file(*e, "a").ino;
        b = make_file(*e, "b").ino;
        random_writes(*e, a, &a_model, 1u << 20, 50, rng);
        REQUIRE(e->fsync(a, false).is_ok());
        const std::vector<std::uint8_t> a_synced = a_model;
        failing = a;
        // Interleaved, so both files' writes are in the same batches.
        for (int i = 0; i < 40; ++i) {
            random_writes(*e, a, &a_model, 1u << 20, 10, rng);
            random_writes(*e, b, &b_model, 1u << 20, 10, rng);
        }
        Status st = e->fsync(a, false);
        CHECK(st.err() == EIO);
        CHECK(st.message().find("lost") != std::string::npos);
        CHECK(e->fsync(a, false).is_ok());  // told once, as a kernel tells a writeback error
        REQUIRE(e->fsync(b, false).is_ok());
        CHECK(read_all(*e, b) == b_model);
        CHECK(read_all(*e, a) == a_synced);
        CHECK(status_count(*e, "held_writes_lost") == 400);
        REQUIRE(logged.size() >= 1);
        CHECK(logged.front().find("inode " + std::to_string(a)) != std::string::npos);
        {
            std::lock_guard<std::mutex> g(changed_mu);
            CHECK(changed == std::set<InodeId>{a});
        }
        failing = 0;
        REQUIRE(e->close().is_ok());
    }
    auto e = open_engine(held_options(dir.store()));
    CHECK(read_all(*e, b) == b_model);
    close_and_check(std::move(e), dir.store());
}

TEST_CASE("a lost write is told to each open file once, however the others close it",
          "[engine][write-behind][errseq]") {
    TempDir dir;
    std::atomic<InodeId> failing{0};
    EngineOptions o = held_options(dir.store());
    EngineHooks hooks;
    hooks.held_write_fault = [&](InodeId ino) { return ino == failing.load() ? EIO : 0; };
    auto e = open_engine(o, hooks);
    const InodeId a = make_file(*e, "a").ino;
    const std::string block(4096, 'a');
    // Two files open on a (as at open: before the loss).
    WriteErrorCursor one = e->write_error_cursor(a), two = e->write_error_cursor(a);
    failing = a;
    REQUIRE(e->write(a, 0, block.data(), block.size()).is_ok());
    Attr attr;
    (void)e->getattr(a, &attr);  // applies the held write, which is lost
    failing = 0;
    CHECK(e->flush(a, &one).err() == EIO);
    CHECK(e->flush(a, &one).is_ok());
    CHECK(e->fsync(a, false, &two).err() == EIO);  // one's close took nothing from two
    CHECK(e->fsync(a, false, &two).is_ok());
    // Opened now: the files open then were told, so there is nothing to tell.
    CHECK(e->fsync(a, false).is_ok());
    WriteErrorCursor later = e->write_error_cursor(a);
    CHECK(e->flush(a, &later).is_ok());

    // A loss no open file was told of goes to the next to ask, once.
    failing = a;
    REQUIRE(e->write(a, 4096, block.data(), block.size()).is_ok());
    (void)e->getattr(a, &attr);
    failing = 0;
    WriteErrorCursor next = e->write_error_cursor(a);
    CHECK(e->fsync(a, false, &next).err() == EIO);
    CHECK(e->fsync(a, false).is_ok());
    CHECK(e->flush(a, &one).err() == EIO);  // and to those open when it happened
    CHECK(e->flush(a, &later).err() == EIO);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("segments that hold only writes that were never applied are known to the metadata, and reclaim frees them",
          "[engine][write-behind]") {
    // Lost held writes leave their bytes behind; whole segments of them must
    // still get an entry (of no live bytes), or nothing ever frees them and
    // hiodsfs-fsck finds segments no metadata refers to.
    TempDir dir;
    std::atomic<InodeId> failing{0};
    EngineOptions o = held_options(dir.store());
    o.segments.max_segment_bytes = 64 * 1024;
    EngineHooks hooks;
    hooks.held_write_fault = [&](InodeId ino) { return ino == failing.load() ? EIO : 0; };
    std::mt19937_64 rng(21);
    std::vector<std::uint8_t> a_model, b_model;
    {
        auto e = open_engine(o, hooks);
        const InodeId a = make_file(*e, "a").ino;
        const InodeId b = make_file(*e, "b").ino;
        random_writes(*e, b, &b_model, 1u << 20, 8, rng);
        REQUIRE(e->fsync(b, false).is_ok());
        failing = a;
        random_writes(*e, a, &a_model, 1u << 20, 100, rng);  // about six segments of nothing but a's
        CHECK(e->fsync(a, false).err() == EIO);
        failing = 0;
        REQUIRE(e->close().is_ok());
    }
    auto problems = check_invariants(dir.store());
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
    EngineOptions again = held_options(dir.store());
    again.reclaim = ReclaimMode::kManual;
    auto e = open_engine(again);
    CHECK(read_all(*e, 3) == b_model);
    const std::uint64_t before = segment_bytes(dir.store());
    REQUIRE(e->run_reclaim().is_ok());
    CHECK(before > 6 * 60 * 1024);
    CHECK(segment_bytes(dir.store()) < 64 * 1024);  // b's 32 KiB are all that is left
    CHECK(read_all(*e, 3) == b_model);
    close_and_check(std::move(e), dir.store());
}
