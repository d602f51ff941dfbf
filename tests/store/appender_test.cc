// Appender, through SegmentStore: what sync() and sync_through() promise
// and how little they do, write and sync faults at every point of a
// workload, a failed fdatasync that stops the store, simulated power loss,
// and syncs racing with appends and roll-overs.


#include "store/appender.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hiodsfs/segment_store.h"
#include "segment_test_util.h"
#include "store/fault_env.h"

namespace hiodsfs {
namespace {

using namespace test;

TEST_CASE("segment store: sync does only what is needed", "[segment]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), small_options(8192, 4096), &s));
    REQUIRE_OK(s->sync());  // the new segment's directory entry
    REQUIRE(env.sync_count() == 1);
    REQUIRE_OK(s->sync());  // nothing changed: no system call at all
    REQUIRE(env.sync_count() == 1);
    REQUIRE(env.write_count() == 0);

    Rec r;
    REQUIRE_OK(append(*s, 1, std::vector<char>(1000, 'a'), &r));
    REQUIRE_OK(s->sync());  // one write, one fdatasync, no directory sync
    REQUIRE(env.write_count() == 1);
    REQUIRE(env.sync_count() == 2);
    REQUIRE(env.unsynced_bytes() == 0);

    // Two segments written plus a new entry: two fdatasyncs and a sync_dir.
    REQUIRE_OK(append(*s, 2, std::vector<char>(3000, 'b'), &r));
    REQUIRE_OK(s->flush());
    REQUIRE_OK(append(*s, 3, std::vector<char>(5000, 'c'), &r));
    REQUIRE(r.loc.segment == 2);
    REQUIRE_OK(s->sync());
    REQUIRE(env.sync_count() == 5);
    REQUIRE(env.unsynced_bytes() == 0);
    REQUIRE_OK(s->sync());
    REQUIRE(env.sync_count() == 5);
}

// A segment's roll-over syncs it under the append lock: the flusher starts
// its write-back as it fills (every 8 MiB), so that sync finds little left.
TEST_CASE("segment store: the flusher starts a filling segment's write-back as it goes", "[segment]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), small_options(64u << 20, 256u << 10), &s));
    Rec r;
    for (ChunkId id = 1; id <= 384; ++id) REQUIRE_OK(append(*s, id, std::vector<char>(64u << 10, 'w'), &r));
    REQUIRE_OK(s->flush());
    REQUIRE(r.loc.segment == 1);  // one segment: no roll-over synced it
    // 24 MiB appended: two steps of 8 MiB started at least.
    CHECK(env.writeback_bytes() >= (16u << 20));
    CHECK(env.writeback_bytes() <= (24u << 20) + 4096);
}

TEST_CASE("segment store: sync_through returns at once for what a sync covered, however much came after",
          "[segment]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), small_options(8192, 4096), &s));
    auto end_of = [](const Rec& r) { return SegmentPosition{r.loc.segment, r.loc.offset + r.loc.length}; };
    Rec a, b, c;
    REQUIRE_OK(append(*s, 1, std::vector<char>(1000, 'a'), &a));
    REQUIRE_OK(s->sync_through(end_of(a)));  // data and the new segment's entry
    const std::uint64_t after_a = env.sync_count();
    REQUIRE(after_a == 2);
    REQUIRE(env.unsynced_bytes() == 0);
    // b is written but not synced: a is still covered, nothing is synced.
    REQUIRE_OK(append(*s, 2, std::vector<char>(3000, 'b'), &b));
    REQUIRE_OK(s->flush());
    REQUIRE_OK(s->sync_through(end_of(a)));
    REQUIRE(env.sync_count() == after_a);
    REQUIRE(env.unsynced_bytes() > 0);
    // c goes to a new segment; asking for it syncs both files and the entry.
    REQUIRE_OK(append(*s, 3, std::vector<char>(5000, 'c'), &c));
    REQUIRE(c.loc.segment == 2);
    REQUIRE_OK(s->sync_through(end_of(c)));
    REQUIRE(env.sync_count() == after_a + 3);
    REQUIRE(env.unsynced_bytes() == 0);
    REQUIRE_OK(s->sync_through(end_of(b)));
    REQUIRE(env.sync_count() == after_a + 3);
}

TEST_CASE("segment store: threads each syncing through their own record keep every promise",
          "[segment][threads]") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        INFO("seed " << seed);
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        const auto opts = small_options(32 << 10, 2048);
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
        constexpr int kThreads = 4, kEach = 150;
        std::vector<std::vector<Rec>> appended(kThreads);
        std::vector<std::size_t> promised(kThreads, 0);  // appended[t][0, promised[t]) are durable
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                std::mt19937_64 rng(seed * 100 + static_cast<std::uint64_t>(t));
                for (int i = 0; i < kEach; ++i) {
                    Rec r;
                    const ChunkId id = static_cast<ChunkId>(t * kEach + i + 1);
                    if (!append(*s, id, test::random_bytes(rng, 1 + rng() % 1500), &r)) {
                        ++failures;
                        return;
                    }
                    const SegmentPosition end{r.loc.segment, r.loc.offset + r.loc.length};
                    appended[t].push_back(std::move(r));
                    // A third of the records are fsynced, and the last one.
                    if (rng() % 3 != 0 && i != kEach - 1) continue;
                    if (!s->sync_through(end)) {
                        ++failures;
                        return;
                    }
                    promised[t] = appended[t].size();
                }
            });
        for (auto& th : threads) th.join();
        REQUIRE(failures == 0);
        s.reset();
        // Whatever no sync covered is gone: a sync skipped is a record lost.
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
        for (int t = 0; t < kThreads; ++t) {
            INFO("thread " << t);
            check_promises(*s, appended[t], promised[t]);
        }
    }
}

TEST_CASE("segment store: write faults at every write of a workload", "[segment][fault]") {
    // How many pwrites the workload makes without faults.
    std::uint64_t writes = 0;
    {
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
        Workload w;
        w.run(*s, 1, kWorkloadRecords, 11);
        REQUIRE(w.errors.empty());
        writes = env.write_count();
        REQUIRE(writes >= 15);
    }
    for (WriteFault kind : {WriteFault::kNoSpace, WriteFault::kIoError, WriteFault::kShortWrite}) {
        for (bool permanent : {false, true}) {
            for (std::uint64_t n = 0; n < writes; ++n) {
                INFO("fault kind " << static_cast<int>(kind) << " permanent " << permanent
                                   << " at write " << n);
                TempDir tmp;
                FaultInjectionEnv env(Env::posix());
                env.set_forward_syncs(false);
                Workload w;
                {
                    std::unique_ptr<SegmentStore> s;
                    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
                    env.fail_write_at(n, kind, permanent);
                    w.run(*s, 1, kWorkloadRecords, 11);
                    REQUIRE(env.injected_faults() >= 1);
                    // A passing fault may hit the flusher thread's write, which
                    // the next flush repeats with nobody told; one that stays
                    // must reach an append or a sync.
                    if (permanent) REQUIRE(!w.errors.empty());
                    const int want = kind == WriteFault::kNoSpace ? ENOSPC : EIO;
                    for (const Status& st : w.errors) REQUIRE(st.err() == want);
                    if (!permanent) {
                        // A passing fault loses nothing: the buffer was kept
                        // and is written again, so one more sync covers it all.
                        w.sync(*s);
                        REQUIRE(w.durable == w.appended.size());
                    }
                    // Everything accepted is readable while the store is open.
                    for (const Rec& r : w.appended) REQUIRE_OK(read_back(*s, r));
                }
                REQUIRE_OK(env.drop_all_unsynced());
                check_after_crash(env, tmp.path(), w);
            }
        }
    }
}

TEST_CASE("segment store: sync faults at every sync of a workload", "[segment][fault]") {
    std::uint64_t syncs = 0;
    {
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
        Workload w;
        w.run(*s, 1, kWorkloadRecords, 12);
        syncs = env.sync_count();
        REQUIRE(syncs >= 12);
    }
    for (std::uint64_t n = 0; n < syncs; ++n) {
        INFO("sync fault at sync " << n);
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        Workload w;
        {
            std::unique_ptr<SegmentStore> s;
            REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
            env.fail_sync_at(n, EIO);
            w.run(*s, 1, kWorkloadRecords, 12);
            REQUIRE(env.injected_faults() == 1);
            REQUIRE(!w.errors.empty());
            for (const Status& st : w.errors) REQUIRE(st.err() == EIO);
            // Records appended after a failed sync are never promised.
            REQUIRE(w.durable <= w.appended.size());
        }
        REQUIRE_OK(env.drop_all_unsynced());
        check_after_crash(env, tmp.path(), w);
    }
}

TEST_CASE("segment store: after a failed fdatasync the store refuses to go on",
          "[segment][fault]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
    REQUIRE_OK(s->sync());
    Rec a, b;
    REQUIRE_OK(append(*s, 1, std::vector<char>(100, 'a'), &a));
    env.fail_sync_at(0, EIO);
    REQUIRE(s->sync().err() == EIO);
    // A later sync would succeed at the Env level, but must not be trusted.
    Status st = append(*s, 2, std::vector<char>(100, 'b'), &b);
    REQUIRE(st.err() == EIO);
    REQUIRE(st.message().find("reopen") != std::string::npos);
    REQUIRE(s->sync().err() == EIO);
    REQUIRE(s->flush().err() == EIO);
    REQUIRE_OK(read_back(*s, a));  // reads still work
    s.reset();
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), fault_options(), &s));
    REQUIRE_OK(append(*s, 3, std::vector<char>(100, 'c'), &b));
    REQUIRE_OK(s->sync());
}

TEST_CASE("segment store: power loss at random points keeps every synced record",
          "[segment][crash]") {
    int lost = 0, survived = 0;
    for (std::uint64_t seed = 1; seed <= 150; ++seed) {
        INFO("seed " << seed);
        std::mt19937_64 rng(seed);
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        SegmentStoreOptions opts;
        opts.max_segment_bytes = std::uint64_t{8192} << (rng() % 4);
        opts.write_buffer_bytes = std::size_t{1024} << (rng() % 4);
        opts.max_open_segments = 4;  // exercise closing and reopening files

        std::vector<Rec> durable;  // promised: must always read back
        std::vector<Rec> maybe;    // not promised: exact bytes or EIO
        ChunkId next_id = 1;
        for (int round = 0; round < 3; ++round) {
            std::unique_ptr<SegmentStore> s;
            REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
            // What survived the last crash is on disk now; it must stay readable.
            for (const Rec& r : durable) REQUIRE_OK(read_back(*s, r));
            std::vector<Rec> pending;
            std::vector<Rec> still_maybe;
            for (const Rec& r : maybe) {
                Status st = read_back(*s, r);
                REQUIRE((st.is_ok() || st.err() == EIO));
                if (st) {
                    ++survived;
                    pending.push_back(r);  // present now, but durable only after a sync
                } else {
                    ++lost;
                }
            }
            maybe.clear();

            const int ops = 10 + static_cast<int>(rng() % 60);
            for (int i = 0; i < ops; ++i) {
                const auto dice = rng() % 100;
                if (dice < 80) {
                    Rec r;
                    std::size_t len = rng() % 3000;
                    if (rng() % 20 == 0)
                        len = static_cast<std::size_t>(opts.max_segment_bytes) + 100;
                    REQUIRE_OK(append(*s, next_id++, test::random_bytes(rng, len), &r));
                    pending.push_back(std::move(r));
                } else if (dice < 92) {
                    REQUIRE_OK(s->sync());
                    durable.insert(durable.end(), pending.begin(), pending.end());
                    pending.clear();
                } else if (dice < 96) {
                    REQUIRE_OK(s->flush());
                } else if (!pending.empty()) {
                    REQUIRE_OK(read_back(*s, pending[rng() % pending.size()]));
                }
            }
            // Crash with the store open or after closing it (which flushes).
            const std::uint64_t crash_seed = seed * 31 + static_cast<std::uint64_t>(round);
            if (rng() % 2 == 0) {
                REQUIRE_OK(env.drop_unsynced(crash_seed));
                s.reset();
            } else {
                s.reset();
                REQUIRE_OK(env.drop_unsynced(crash_seed));
            }
            maybe = std::move(pending);
        }
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
        for (const Rec& r : durable) REQUIRE_OK(read_back(*s, r));
        for (const Rec& r : maybe) require_intact_or_absent(*s, r);
    }
    // The crashes really lost unsynced records, and really kept some.
    REQUIRE(lost > 0);
    REQUIRE(survived > 0);
}

// Wraps an Env so a test can hold File::sync() at a chosen moment.
class PausingEnv final : public Env {
public:
    explicit PausingEnv(Env* base) : base_(base) {}

    // Each File::sync() calls this after the data is durable, before
    // returning (from the syncing thread).
    std::function<void()> after_sync = [] {};

    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        std::unique_ptr<File> f;
        HIODSFS_TRY(base_->open(path, mode, &f));
        *out = std::make_unique<PausingFile>(this, std::move(f));
        return Status::ok();
    }
    Status unlink(const std::string& path) override { return base_->unlink(path); }
    Status rename(const std::string& from, const std::string& to) override {
        return base_->rename(from, to);
    }
    Status mkdir(const std::string& path) override { return base_->mkdir(path); }
    Status list_dir(const std::string& path, std::vector<std::string>* names) override {
        return base_->list_dir(path, names);
    }
    bool exists(const std::string& path) override { return base_->exists(path); }
    Status sync_dir(const std::string& path) override { return base_->sync_dir(path); }

private:
    class PausingFile final : public File {
    public:
        PausingFile(PausingEnv* env, std::unique_ptr<File> base)
            : env_(env), base_(std::move(base)) {}
        Status pwrite(const void* d, std::size_t n, std::uint64_t off) override {
            return base_->pwrite(d, n, off);
        }
        Status pread(void* d, std::size_t n, std::uint64_t off, std::size_t* got) override {
            return base_->pread(d, n, off, got);
        }
        Status sync() override {
            Status st = base_->sync();
            env_->after_sync();
            return st;
        }
        Status size(std::uint64_t* out) override { return base_->size(out); }
        Status truncate(std::uint64_t n) override { return base_->truncate(n); }

    private:
        PausingEnv* env_;
        std::unique_ptr<File> base_;
    };

    Env* base_;
};

TEST_CASE("segment store: sync racing with appends keeps its promise", "[segment][threads]") {
    // sync() runs fdatasync without the writer lock; records appended before
    // the call must be durable however the appends interleave with it.
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        INFO("seed " << seed);
        TempDir tmp;
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        const auto opts = small_options(32 << 10, 2048);
        std::unique_ptr<SegmentStore> s;
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));

        std::mutex mu;
        std::vector<Rec> appended;
        std::atomic<bool> done{false};
        // appended[0, promised) were appended before a good sync
        std::atomic<std::size_t> promised{0};
        std::atomic<bool> sync_failed{false};
        Status sync_status;
        std::thread syncer([&] {
            while (!done.load() && sync_status) {
                std::size_t before;
                {
                    std::lock_guard lock(mu);
                    before = appended.size();
                }
                sync_status = s->sync();
                if (sync_status) promised.store(std::max(promised.load(), before));
            }
            sync_failed.store(!sync_status);
        });
        std::mt19937_64 rng(seed);
        Status append_status;
        for (ChunkId id = 1; id <= 600 && append_status; ++id) {
            Rec r;
            append_status = append(*s, id, test::random_bytes(rng, 1 + rng() % 1500), &r);
            std::lock_guard lock(mu);
            if (append_status) appended.push_back(std::move(r));
        }
        // On a busy machine the syncer may not have run yet: the case needs
        // one sync that began after an append.
        while (append_status && promised.load() == 0 && !sync_failed.load()) std::this_thread::yield();
        done.store(true);
        syncer.join();
        REQUIRE_OK(append_status);
        REQUIRE_OK(sync_status);
        REQUIRE(promised.load() > 0);
        s.reset();
        REQUIRE_OK(env.drop_unsynced(seed));
        REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
        check_promises(*s, appended, promised);
    }
}

TEST_CASE("segment store: a segment sealed during a sync is synced by the next one",
          "[segment][threads]") {
    TempDir tmp;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    PausingEnv env(&fenv);
    const auto opts = small_options(8192, 1024);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, tmp.path(), opts, &s));
    std::mt19937_64 rng(13);
    std::vector<Rec> recs;
    auto add = [&](std::size_t len) {
        Rec r;
        REQUIRE_OK(append(*s, recs.size() + 1, test::random_bytes(rng, len), &r));
        recs.push_back(std::move(r));
    };
    add(500);
    REQUIRE_OK(s->sync());

    // Hold the next fdatasync, after it made the file durable, until the main
    // thread has written more data to the same segment and rolled over.
    std::mutex mu;
    std::condition_variable cv;
    bool in_sync = false, release = false;
    std::atomic<bool> pause{true};  // only the first sync waits
    env.after_sync = [&] {
        if (!pause.exchange(false)) return;
        std::unique_lock lock(mu);
        in_sync = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
    };
    add(500);
    Status first;
    std::thread syncer([&] { first = s->sync(); });
    {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return in_sync; });
    }
    const SegmentId seg = recs.back().loc.segment;
    while (recs.back().loc.segment == seg) add(900);  // fills, flushes, rolls over
    {
        std::lock_guard lock(mu);
        release = true;
    }
    cv.notify_all();
    syncer.join();
    REQUIRE_OK(first);
    REQUIRE_OK(s->sync());  // promises everything appended so far
    s.reset();
    REQUIRE_OK(fenv.drop_all_unsynced());
    REQUIRE_OK(SegmentStore::open(&fenv, tmp.path(), opts, &s));
    require_all(*s, recs);
}

}  // namespace
}  // namespace hiodsfs
