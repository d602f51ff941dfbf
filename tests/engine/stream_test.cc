// A file's write stream under concurrent appends: several threads
// continuing one file at once, overtaking each other as the kernel's
// writeback threads do, with readers, fsyncs and I/O faults in between.
// Reads must see every acknowledged byte, and a failed commit must lose
// nothing that was acknowledged before it.
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "engine_test_util.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

const ChunkingParams kSmallCdc = ChunkingParams::cdc(1024, 4096, 16384);

// Writes `data` to ino in `piece`-sized appends from `threads` threads, each
// piece issued after the one before it was (so the requests overlap in the
// engine, in order as far as the scheduler allows). Returns the status of
// every piece; sets (*acked)[k] once piece k's write returned success.
std::vector<Status> append_concurrently(Engine& e, InodeId ino, const std::vector<std::uint8_t>& data,
                                        std::size_t piece, int threads,
                                        std::vector<std::atomic<bool>>* acked = nullptr) {
    const std::size_t pieces = (data.size() + piece - 1) / piece;
    std::vector<Status> result(pieces);
    std::atomic<std::size_t> next{0}, turn{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i) {
        ts.emplace_back([&] {
            for (;;) {
                std::size_t k = next.fetch_add(1);
                if (k >= pieces) return;
                while (turn.load() != k) std::this_thread::yield();
                turn.store(k + 1);
                std::size_t off = k * piece, n = std::min(piece, data.size() - off);
                result[k] = e.write(ino, off, data.data() + off, n);
                if (acked != nullptr && result[k].is_ok()) (*acked)[k] = true;
            }
        });
    }
    for (auto& t : ts) t.join();
    return result;
}

}  // namespace

TEST_CASE("concurrent in-order appends read back exactly, with readers and fsyncs in between",
          "[engine][stream]") {
    for (auto params : {kSmallCdc, ChunkingParams::fixed(4096)}) {
        DYNAMIC_SECTION(params.describe()) {
            TempDir dir;
            auto e = open_engine(options_for(dir.store(), params));
            Attr a = make_file(*e, "f");
            std::mt19937_64 rng(5);
            auto data = random_bytes(rng, 24 << 20);
            // Some duplicate regions, so shared and new chunks mix in a request.
            std::copy(data.begin(), data.begin() + (4 << 20), data.begin() + (12 << 20));
            const std::size_t piece = 128 * 1024;
            std::vector<std::atomic<bool>> acked(data.size() / piece);
            std::atomic<bool> done{false};
            std::atomic<int> bad_reads{0};
            std::thread reader([&] {
                // A piece acknowledged before the read began reads back
                // exactly; a piece still in flight (the threads may overtake
                // each other) reads as its bytes or as a hole.
                std::vector<std::uint8_t> buf(256 * 1024);
                std::mt19937_64 r(9);
                while (!done.load()) {
                    Attr cur;
                    if (!e->getattr(a.ino, &cur).is_ok()) { bad_reads++; continue; }
                    if (cur.size == 0) continue;
                    std::uint64_t off = r() % cur.size;
                    std::vector<char> was_acked(acked.size());
                    for (std::size_t k = 0; k < acked.size(); ++k) was_acked[k] = acked[k].load();
                    std::size_t got = 0;
                    if (!e->read(a.ino, off, buf.size(), buf.data(), &got).is_ok()) { bad_reads++; continue; }
                    for (std::size_t i = 0; i < got; ++i) {
                        std::uint64_t at = off + i;
                        if (buf[i] == data[at]) continue;
                        if (was_acked[at / piece] || buf[i] != 0) {
                            UNSCOPED_INFO("wrong byte at " << at);
                            bad_reads++;
                            break;
                        }
                    }
                    if (r() % 8 == 0) (void)e->fsync(a.ino, false);
                }
            });
            auto st = append_concurrently(*e, a.ino, data, piece, 4, &acked);
            done = true;
            reader.join();
            for (std::size_t k = 0; k < st.size(); ++k) {
                INFO("piece " << k << ": " << st[k].to_string());
                REQUIRE(st[k].is_ok());
            }
            CHECK(bad_reads.load() == 0);
            CHECK(read_all(*e, a.ino) == data);
            REQUIRE(e->close().is_ok());
            auto problems = check_invariants(dir.store());
            for (auto& p : problems) UNSCOPED_INFO(p);
            CHECK(problems.empty());
            auto again = open_engine(options_for(dir.store(), params));
            Attr b;
            REQUIRE(again->lookup(kRootInode, "f", &b).is_ok());
            CHECK(read_all(*again, b.ino) == data);
        }
    }
}

TEST_CASE("a commit failing under concurrent appends loses nothing acknowledged",
          "[engine][stream][fault][slow]") {
    for (bool permanent : {false, true}) {
        for (std::uint64_t at = 1; at < 40; at += 4) {
            INFO((permanent ? "permanent" : "one") << " I/O error at segment write " << at);
            TempDir dir;
            FaultInjectionEnv fenv(Env::posix());
            fenv.set_forward_syncs(false);
            EngineOptions o = options_for(dir.store(), kSmallCdc);
            o.env = &fenv;
            o.background_commit = false;
            o.segments.write_buffer_bytes = 32 * 1024;
            std::mt19937_64 rng(at);
            auto data = random_bytes(rng, 4 << 20);
            const std::size_t piece = 64 * 1024;
            std::vector<Status> st;
            bool synced = false;
            {
                auto e = open_engine(o);
                Attr a = make_file(*e, "f");
                // The first megabyte is durable before the fault can fire.
                std::vector<std::uint8_t> head(data.begin(), data.begin() + (1 << 20));
                write_all(*e, a.ino, 0, head, piece);
                REQUIRE(e->fsync(a.ino, false).is_ok());
                fenv.fail_write_at(at, WriteFault::kIoError, permanent);
                st = append_concurrently(*e, a.ino, data, piece, 4);
                Status fs = e->fsync(a.ino, false);
                synced = fs.is_ok();
                if (!synced) CHECK(fs.err() == EIO);
                (void)e->close();
            }
            std::size_t failed = 0;
            for (const auto& s : st) failed += !s.is_ok();
            CHECK((failed > 0 || synced));
            fenv.clear_faults();
            {
                auto e = open_engine(o);
                Attr a;
                REQUIRE(e->lookup(kRootInode, "f", &a).is_ok());
                auto got = read_all(*e, a.ino);
                got.resize(std::max(got.size(), data.size()));  // a short file reads as zeros past its end
                CHECK(std::equal(data.begin(), data.begin() + (1 << 20), got.begin()));
                // A piece acknowledged before a successful fsync is there
                // exactly; any other byte is the written byte or a hole.
                std::size_t lost = 0, wrong = 0;
                for (std::size_t k = 0; k < st.size(); ++k) {
                    for (std::size_t i = k * piece; i < std::min(data.size(), (k + 1) * piece); ++i) {
                        if (got[i] == data[i]) continue;
                        if (synced && st[k].is_ok()) ++lost;
                        else if (got[i] != 0) ++wrong;
                    }
                }
                CHECK(lost == 0);
                CHECK(wrong == 0);
                REQUIRE(e->close().is_ok());
            }
            auto problems = check_invariants(dir.store());
            for (auto& p : problems) UNSCOPED_INFO(p);
            CHECK(problems.empty());
        }
    }
}

TEST_CASE("sequential writes into a preallocated file cut the chunks an append would",
          "[engine][stream]") {
    std::mt19937_64 rng(17);
    auto data = random_bytes(rng, 8 << 20);
    auto stored = [&](bool preallocate) {
        TempDir dir;
        auto e = open_engine(options_for(dir.store(), kSmallCdc));
        Attr a = make_file(*e, "f");
        if (preallocate) REQUIRE(e->fallocate(a.ino, 0, 0, data.size()).is_ok());
        write_all(*e, a.ino, 0, data, 100 * 1000);
        REQUIRE(e->fsync(a.ino, false).is_ok());
        CHECK(read_all(*e, a.ino) == data);
        SpaceCounters c;
        REQUIRE(e->counters(&c).is_ok());
        REQUIRE(e->close().is_ok());
        return std::make_pair(c.chunk_count, c.stored_bytes);
    };
    // The holes ahead of each write are no reason to cut at its end.
    CHECK(stored(true) == stored(false));
}

// Each write sets mtime and ctime, whichever metadata operation carries them:
// the one that maps its chunks, the realignment's after an overwrite inside
// the file, a held-back write's batch, or one of their own.
TEST_CASE("every write moves mtime and ctime, appended, inside the file or held back",
          "[engine][stream]") {
    for (auto mode : {DedupMode::kInline, DedupMode::kDeferred}) {
        DYNAMIC_SECTION((mode == DedupMode::kInline ? "inline" : "deferred")) {
            TempDir dir;
            EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(2048, 8192, 32768));
            o.mode = mode;
            o.background_threads = 0;
            auto e = open_engine(o);
            Attr a = make_file(*e, "f");
            std::mt19937_64 rng(4);
            write_all(*e, a.ino, 0, random_bytes(rng, 1 << 20), 64 * 1024);
            REQUIRE(e->flush(a.ino).is_ok());
            auto later = [](const struct timespec& x, const struct timespec& y) {
                return x.tv_sec > y.tv_sec || (x.tv_sec == y.tv_sec && x.tv_nsec > y.tv_nsec);
            };
            // Small writes at the end, inside chunks, across cut points, and
            // one that fills in no chunk of its own.
            for (std::uint64_t off : {std::uint64_t{1 << 20}, std::uint64_t{4096}, std::uint64_t{300000},
                                      std::uint64_t{(1 << 20) - 100}, std::uint64_t{777}}) {
                Attr before;
                REQUIRE(e->getattr(a.ino, &before).is_ok());
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                auto b = random_bytes(rng, 100);
                REQUIRE(e->write(a.ino, off, b.data(), b.size()).is_ok());
                Attr after;
                REQUIRE(e->getattr(a.ino, &after).is_ok());
                INFO("write of 100 bytes at " << off);
                CHECK(later(after.mtime, before.mtime));
                CHECK(later(after.ctime, before.ctime));
                CHECK(after.size == std::max<std::uint64_t>(before.size, off + b.size()));
            }
            REQUIRE(e->close().is_ok());
        }
    }
}

TEST_CASE("a read that does not wait for an unlink in progress still reads the bytes the stream holds",
          "[engine][stream]") {
    // A read takes the file's stream, then reads the metadata without
    // waiting for operations in progress (MetaStore::begin_read). An unlink
    // that frees the file must not drop the stream before its operation is
    // visible: the read would find the old metadata and an empty stream,
    // and read zeros where the stream's unwritten tail is.
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kSmallCdc);
    std::mutex mu;
    std::condition_variable cv;
    bool armed = false, in_unlink = false, go = false;
    EngineHooks hooks;
    hooks.on_publish = [&] {
        std::unique_lock<std::mutex> l(mu);
        if (!armed) return;
        armed = false;
        in_unlink = true;
        cv.notify_all();
        cv.wait(l, [&] { return go; });
    };
    auto e = open_engine(o, hooks);
    const Attr a = make_file(*e, "f");
    std::mt19937_64 rng(7);
    const std::vector<std::uint8_t> data = random_bytes(rng, 10000);
    REQUIRE(e->write(a.ino, 0, data.data(), data.size()).is_ok());
    {
        std::lock_guard<std::mutex> l(mu);
        armed = true;
    }
    auto unlinking = std::async(std::launch::async, [&] { return e->unlink(kRootInode, "f"); });
    {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return in_unlink; });
    }
    // The unlink holds the metadata store, its changes not yet visible.
    std::vector<std::uint8_t> got(data.size() + 100, 0xee);
    std::size_t n = 0;
    auto reading = std::async(std::launch::async, [&] { return e->read(a.ino, 0, got.size(), got.data(), &n); });
    const bool finished = reading.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    {
        std::lock_guard<std::mutex> l(mu);
        go = true;
        cv.notify_all();
    }
    REQUIRE(finished);  // a read that waits for the unlink fails here
    const Status read_status = reading.get();
    REQUIRE(unlinking.get().is_ok());
    REQUIRE(read_status.is_ok());
    REQUIRE(n == data.size());
    got.resize(n);
    CHECK(got == data);
    Attr gone;
    CHECK(e->lookup(kRootInode, "f", &gone).err() == ENOENT);
}
