// The fsync log (engine/fsync_log.h): an fsync makes a file durable with
// one record in the segment stream, without a group commit, and a crash
// before the next commit keeps it: the record is replayed at open.
#include <atomic>
#include <fstream>

#include "engine/fsync_log.h"
#include "engine/store_layout.h"
#include "engine_test_util.h"
#include "fsck/fsck.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// What FORMAT says of a closed store, and of one open with an fsync log.
const std::string kFormatLine = "format " + std::to_string(kFormatVersion);
const std::string kLogOpenFormatLine = "format " + std::to_string(kLogOpenVersionOffset + kFormatVersion);


const ChunkingParams kLogTestChunking = ChunkingParams::cdc(1024, 4096, 16384);

// No committer: the only commits are the ones a test makes.
EngineOptions log_test_options(const std::string& store, Env* env, std::vector<std::string>* logged) {
    EngineOptions o = options_for(store, kLogTestChunking);
    o.env = env;
    o.background_commit = false;
    o.segments.max_segment_bytes = 512 * 1024;
    o.log = [logged](const std::string& m) { logged->push_back(m); };
    return o;
}

std::uint64_t count_log_records(const std::string& store) {
    std::uint64_t n = 0;
    for_each_segment_record(store, true, [&](const SegmentRecord& r) {
        if (r.chunk != kLogRecord) return;
        CHECK(r.payload_ok);
        ++n;
    });
    return n;
}

bool any_line_mentions(const std::vector<std::string>& lines, const std::string& what) {
    for (const auto& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

// The format line of STORE/FORMAT: the number hiodsfs 0.3.0 checks (it
// refuses any but 4 and ignores the lines it does not know).
std::string format_line_of(const std::string& store) {
    std::ifstream in(store + "/FORMAT");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("format ", 0) == 0) return line;
    return "";
}

// A store whose only change since its first commit is file "f" holding d,
// fsynced (one log record), and then the crash.
void crash_after_one_fsync(const EngineOptions& o, const std::vector<std::uint8_t>& d) {
    auto e = open_engine(o);
    const InodeId ino = make_file(*e, "f").ino;
    write_all(*e, ino, 0, d);
    REQUIRE(e->fsync(ino, false).is_ok());
    abandon_engine(*e);
}

}  // namespace

TEST_CASE("an fsync is a log record, replayed after a crash; what was not fsynced is not", "[engine][crash][log]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    std::vector<std::string> logged;
    std::mt19937_64 rng(11);
    const auto a = random_bytes(rng, 300000), a2 = random_bytes(rng, 5000), b = random_bytes(rng, 200000);
    InodeId a_ino = 0;
    {
        auto e = open_engine(log_test_options(dir.store(), &fenv, &logged));
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, a);
        REQUIRE(e->fsync(a_ino, false).is_ok());
        Attr dir_attr;
        REQUIRE(e->create(kRootInode, "d", NewNode{S_IFDIR | 0755}, &dir_attr).is_ok());
        write_all(*e, a_ino, 1000, a2);  // an overwrite, fsynced by the second record
        REQUIRE(e->fsync(a_ino, false).is_ok());
        REQUIRE(e->fsync(a_ino, false).is_ok());  // nothing new: no record
        const InodeId b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, b);
        REQUIRE(e->flush(b_ino).is_ok());  // not an fsync
        abandon_engine(*e);  // the crash: the open group is never committed
    }
    REQUIRE(fenv.drop_unsynced(5).is_ok());
    CHECK(count_log_records(dir.store()) == 2);
    auto e = open_engine(log_test_options(dir.store(), &fenv, &logged));
    CHECK(any_line_mentions(logged, "applied 2 fsync log records"));
    auto want = a;
    std::copy(a2.begin(), a2.end(), want.begin() + 1000);
    CHECK(read_all(*e, a_ino) == want);
    Attr x;
    CHECK(e->lookup(kRootInode, "d", &x).is_ok());
    CHECK(e->lookup(kRootInode, "b", &x).err() == ENOENT);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
    // Committed at close: the next open has nothing to apply.
    logged.clear();
    e = open_engine(log_test_options(dir.store(), &fenv, &logged));
    CHECK_FALSE(any_line_mentions(logged, "fsync log"));
    CHECK(read_all(*e, a_ino) == want);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("records already committed are not applied again; later ones are", "[engine][crash][log]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    std::vector<std::string> logged;
    std::mt19937_64 rng(12);
    const auto v1 = random_bytes(rng, 50000), v2 = random_bytes(rng, 50000), v3 = random_bytes(rng, 50000);
    InodeId ino = 0;
    {
        auto e = open_engine(log_test_options(dir.store(), &fenv, &logged));
        ino = make_file(*e, "f").ino;
        write_all(*e, ino, 0, v1);
        REQUIRE(e->fsync(ino, false).is_ok());  // record 1
        write_all(*e, ino, 0, v2);
        REQUIRE(e->fsync(ino, false).is_ok());  // record 2
        REQUIRE(e->sync_all().is_ok());         // commits records 1 and 2 and the rest
        write_all(*e, ino, 0, v3);
        REQUIRE(e->fsync(ino, false).is_ok());  // record 3, after the commit
        abandon_engine(*e);
    }
    REQUIRE(fenv.drop_unsynced(6).is_ok());
    auto e = open_engine(log_test_options(dir.store(), &fenv, &logged));
    CHECK(any_line_mentions(logged, "applied 1 fsync log records"));
    CHECK(read_all(*e, ino) == v3);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("an fsync logged before a failed commit survives it", "[engine][trust][log]") {
    TempDir dir;
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), nullptr, &logged);
    std::atomic<int> fail_with{0};
    EngineHooks hooks;
    hooks.commit_fault = [&] { return fail_with.load(); };
    std::mt19937_64 rng(13);
    const auto b = random_bytes(rng, 100000);
    {
        auto e = open_engine(o, hooks);
        const InodeId b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, b);
        REQUIRE(e->fsync(b_ino, false).is_ok());
        fail_with = ENOSPC;
        CHECK(e->sync_all().err() == EIO);  // the group is lost, and the store stops
        fail_with = 0;
        CHECK(e->fsync(b_ino, false).err() == EIO);
        CHECK_FALSE(e->close().is_ok());
    }
    auto e = open_engine(o, hooks);
    Attr x;
    REQUIRE(e->lookup(kRootInode, "b", &x).is_ok());
    CHECK(read_all(*e, x.ino) == b);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("a read-only open of a store with unapplied fsyncs is refused in one line", "[engine][log]") {
    TempDir dir;
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), nullptr, &logged);
    std::mt19937_64 rng(14);
    const auto d = random_bytes(rng, 30000);
    crash_after_one_fsync(o, d);
    EngineOptions ro = o;
    ro.read_only = true;
    std::unique_ptr<Engine> e;
    Status st = Engine::open(ro, &e);
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("1 fsynced changes") != std::string::npos);
    CHECK(st.message().find("read-write once") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
    EngineOptions stat = ro;
    stat.read_only_at_last_commit = true;  // hiodsfs-stat: the last commit's figures
    e = open_engine(stat);
    Attr before;
    CHECK(e->lookup(kRootInode, "f", &before).err() == ENOENT);
    e.reset();
    e = open_engine(o);  // applies it
    REQUIRE(e->close().is_ok());
    e.reset();
    e = open_engine(ro);
    Attr x;
    REQUIRE(e->lookup(kRootInode, "f", &x).is_ok());
    CHECK(read_all(*e, x.ino) == d);
}

TEST_CASE("a record whose write failed is written with the next one, and both replay", "[engine][crash][log]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
    std::mt19937_64 rng(15);
    const auto a = random_bytes(rng, 20000), b = random_bytes(rng, 20000);
    InodeId a_ino = 0, b_ino = 0;
    {
        auto e = open_engine(o);
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, a);
        REQUIRE(e->flush(a_ino).is_ok());  // a's chunks written out; the record is the next write
        fenv.fail_write_at(0, WriteFault::kNoSpace);
        CHECK_FALSE(e->fsync(a_ino, false).is_ok());
        b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, b);
        // The buffered record is written now, and after it one holding b.
        REQUIRE(e->fsync(b_ino, false).is_ok());
        abandon_engine(*e);
    }
    REQUIRE(fenv.drop_unsynced(7).is_ok());
    CHECK(count_log_records(dir.store()) == 2);
    auto e = open_engine(o);
    CHECK(any_line_mentions(logged, "applied 2 fsync log records"));
    CHECK(read_all(*e, a_ino) == a);
    CHECK(read_all(*e, b_ino) == b);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("fsck checks the state before unapplied fsyncs and says so; --repair applies them", "[engine][log]") {
    TempDir dir;
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), nullptr, &logged);
    std::mt19937_64 rng(16);
    const auto d = random_bytes(rng, 40000);
    crash_after_one_fsync(o, d);
    auto has_note = [](const FsckReport& r, const std::string& what) {
        for (const auto& n : r.notes)
            if (n.find(what) != std::string::npos) return true;
        return false;
    };
    FsckOptions fo;
    fo.store = dir.store();
    FsckReport check;
    REQUIRE(run_fsck(fo, &check).is_ok());
    for (const auto& p : check.problems) UNSCOPED_INFO(p.what);
    CHECK(check.exit_code() == 0);
    CHECK(has_note(check, "1 fsync log records are not in the metadata yet"));
    CHECK(format_line_of(dir.store()) == kLogOpenFormatLine);  // a check writes nothing
    fo.repair = true;
    FsckReport repair;
    REQUIRE(run_fsck(fo, &repair).is_ok());
    CHECK(repair.exit_code() == 0);
    CHECK(has_note(repair, "applied 1 fsync log records"));
    // Nothing left for 0.3.0 to miss: the mark goes.
    CHECK(format_line_of(dir.store()) == kFormatLine);
    logged.clear();
    auto e = open_engine(o);
    CHECK_FALSE(any_line_mentions(logged, "fsync log"));  // nothing left to apply
    Attr x;
    REQUIRE(e->lookup(kRootInode, "f", &x).is_ok());
    CHECK(read_all(*e, x.ino) == d);
    REQUIRE(e->close().is_ok());
}

// A segment that holds nothing but a log record (a full disk made the
// stream move on, or metadata-only fsyncs filled one) is known to the
// metadata like any other: fsck finds nothing, and reclaim may free it.
TEST_CASE("a segment holding only log records is recorded, so fsck is clean and reclaim frees it",
          "[engine][log]") {
    TempDir dir;
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), nullptr, &logged);
    o.chunking = kFixed;
    o.segments.max_segment_bytes = 4096;  // every chunk, and every record, in a segment of its own
    std::mt19937_64 rng(17);
    const auto d = random_bytes(rng, 3 * 4096);
    {
        auto e = open_engine(o);
        const InodeId ino = make_file(*e, "f").ino;
        write_all(*e, ino, 0, d);
        Attr dir_attr;
        REQUIRE(e->create(kRootInode, "d", NewNode{S_IFDIR | 0755}, &dir_attr).is_ok());
        for (int i = 0; i < 40; ++i) make_file(*e, "n" + std::to_string(i), dir_attr.ino);
        REQUIRE(e->fsync(dir_attr.ino, false).is_ok());  // a record larger than a segment
        write_all(*e, ino, 0, random_bytes(rng, 4096));   // the stream moves on past it
        REQUIRE(e->close().is_ok());
    }
    CHECK(count_log_records(dir.store()) == 1);
    for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
    o.reclaim = ReclaimMode::kManual;
    auto e = open_engine(o);
    REQUIRE(e->run_reclaim().is_ok());
    REQUIRE(e->close().is_ok());
    CHECK(count_log_records(dir.store()) == 0);  // its segment is gone
    Attr x;
    e = open_engine(o);
    REQUIRE(e->lookup(kRootInode, "d", &x).is_ok());
    CHECK(x.nlink == 2);
    std::vector<DirEntry> entries;
    REQUIRE(e->readdir(x.ino, &entries).is_ok());
    CHECK(entries.size() >= 40);
    REQUIRE(e->close().is_ok());
}

// Capturing a group's changes for a record costs every change a copy, so
// only the groups that follow an fsync do: writes that are never fsynced
// pay nothing. An fsync in a group that was not captured commits instead.
TEST_CASE("only groups after an fsync are captured; an fsync in another commits", "[engine][crash][log]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    std::vector<std::string> logged;
    const EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
    std::mt19937_64 rng(18);
    const auto a = random_bytes(rng, 30000), a2 = random_bytes(rng, 30000), b = random_bytes(rng, 30000),
               c = random_bytes(rng, 30000);
    InodeId a_ino = 0, b_ino = 0, c_ino = 0;
    {
        auto e = open_engine(o);
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, a);
        REQUIRE(e->fsync(a_ino, false).is_ok());  // record 1: the first group after open captures
        REQUIRE(e->sync_all().is_ok());           // it had an fsync: the next group captures too
        write_all(*e, a_ino, 0, a2);
        REQUIRE(e->sync_all().is_ok());  // no fsync in this one: the next does not capture
        b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, b);
        REQUIRE(e->fsync(b_ino, false).is_ok());  // a commit, not a record
        c_ino = make_file(*e, "c").ino;
        write_all(*e, c_ino, 0, c);
        REQUIRE(e->fsync(c_ino, false).is_ok());  // record 2: the group after an fsync captures
        abandon_engine(*e);
    }
    REQUIRE(fenv.drop_unsynced(8).is_ok());
    CHECK(count_log_records(dir.store()) == 2);
    auto e = open_engine(o);
    CHECK(any_line_mentions(logged, "applied 1 fsync log records"));
    CHECK(read_all(*e, a_ino) == a2);
    CHECK(read_all(*e, b_ino) == b);
    CHECK(read_all(*e, c_ino) == c);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

// Records are appended one at a time and synced after the lock: each
// thread's fsync must still cover its own record, whichever sync wrote it.
TEST_CASE("fsyncs of four threads at once each survive a power loss", "[engine][crash][log][stress]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
    constexpr int kThreads = 4, kVersions = 25;
    auto version = [](int thread, int v) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(thread * 1000 + v));
        return random_bytes(rng, 3000 + static_cast<std::size_t>((v * 7919) % 20000));
    };
    std::vector<InodeId> inos(kThreads);
    {
        auto e = open_engine(o);
        for (int i = 0; i < kThreads; ++i) inos[i] = make_file(*e, "f" + std::to_string(i)).ino;
        std::vector<std::thread> threads;
        std::atomic<int> failures{0};
        for (int i = 0; i < kThreads; ++i)
            threads.emplace_back([&, i] {
                for (int v = 0; v < kVersions; ++v) {
                    const auto d = version(i, v);
                    SetAttr cut;
                    cut.valid = SetAttr::kSize;
                    Attr after;
                    if (!e->setattr(inos[i], cut, &after).is_ok() || !e->fsync(inos[i], false).is_ok())
                        ++failures;
                    // Not write_all: Catch2's assertions are for the main thread.
                    if (!e->write(inos[i], 0, d.data(), d.size()).is_ok() || !e->fsync(inos[i], false).is_ok())
                        ++failures;
                }
            });
        for (auto& t : threads) t.join();
        CHECK(failures == 0);
        abandon_engine(*e);
    }
    REQUIRE(fenv.drop_unsynced(9).is_ok());
    auto e = open_engine(o);
    CHECK(any_line_mentions(logged, "fsync log records"));
    for (int i = 0; i < kThreads; ++i) {
        INFO("file f" << i);
        CHECK(read_all(*e, inos[i]) == version(i, kVersions - 1));
    }
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}


TEST_CASE("FORMAT says format 1005 while an fsync log may hold records, so 0.3.0 refuses; 5 after a clean close",
          "[engine][log][trust]") {
    TempDir dir;
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), Env::posix(), &logged);
    std::mt19937_64 rng(41);
    const auto d = random_bytes(rng, 50000);
    InodeId ino = 0;
    {
        auto e = open_engine(o);
        CHECK(format_line_of(dir.store()) == kLogOpenFormatLine);
        ino = make_file(*e, "f").ino;
        write_all(*e, ino, 0, d);
        REQUIRE(e->fsync(ino, false).is_ok());
        abandon_engine(*e);  // a crash: the record is not committed
    }
    CHECK(format_line_of(dir.store()) == kLogOpenFormatLine);
    {
        auto e = open_engine(o);
        CHECK(any_line_mentions(logged, "applied 1 fsync log records"));
        CHECK(read_all(*e, ino) == d);
        REQUIRE(e->close().is_ok());
    }
    CHECK(format_line_of(dir.store()) == kFormatLine);
    CHECK(check_invariants(dir.store()).empty());
    // A read-only open writes nothing; a store without the log is never marked.
    EngineOptions ro = o;
    ro.read_only = true;
    REQUIRE(open_engine(ro)->close().is_ok());
    CHECK(format_line_of(dir.store()) == kFormatLine);
    EngineOptions no_log = o;
    no_log.fsync_log = false;
    {
        auto e = open_engine(no_log);
        CHECK(format_line_of(dir.store()) == kFormatLine);
        REQUIRE(e->close().is_ok());
    }
}

TEST_CASE("where FORMAT cannot be marked (a full disk), fsyncs commit instead and nothing is logged",
          "[engine][log][trust]") {
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    std::vector<std::string> logged;
    EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
    REQUIRE(open_engine(o)->close().is_ok());
    REQUIRE(format_line_of(dir.store()) == kFormatLine);
    std::mt19937_64 rng(43);
    const auto d = random_bytes(rng, 30000);
    InodeId ino = 0;
    {
        fenv.fail_write_at(0, WriteFault::kNoSpace);  // the open's next write: FORMAT.tmp
        auto e = open_engine(o);
        fenv.clear_faults();
        CHECK(any_line_mentions(logged, "commit the metadata this time: FORMAT could not be marked"));
        CHECK(format_line_of(dir.store()) == kFormatLine);
        ino = make_file(*e, "f").ino;
        write_all(*e, ino, 0, d);
        REQUIRE(e->fsync(ino, false).is_ok());
        abandon_engine(*e);
    }
    CHECK(count_log_records(dir.store()) == 0);
    auto e = open_engine(o);
    CHECK(read_all(*e, ino) == d);  // the fsync committed it
    REQUIRE(e->close().is_ok());
}

// The sync runs after commit_mu_, so a failed fdatasync meets fsyncs of
// other threads in flight: each fsync either fails or is durable, and no
// file goes back past what its last good fsync had. The counted sync may
// also be a new segment's directory sync, which does not stop the store.
TEST_CASE("a failed fdatasync under four threads' fsyncs: later ones fail, acknowledged ones survive",
          "[engine][crash][log][fault][stress]") {
    for (std::uint64_t at : {2, 7, 15}) {
        INFO("the fdatasync " << at << " from the start fails");
        TempDir dir;
        FaultInjectionEnv fenv(Env::posix());
        fenv.set_forward_syncs(false);
        std::vector<std::string> logged;
        EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
        constexpr int kThreads = 4, kVersions = 20;
        constexpr std::size_t kSize = 20000;
        auto version = [](int thread, int v) {
            std::mt19937_64 rng(static_cast<std::uint64_t>(thread * 1000 + v + 7));
            return random_bytes(rng, kSize);
        };
        std::vector<InodeId> inos(kThreads);
        std::vector<int> acked(kThreads, -1);  // the last version whose fsync returned 0
        std::vector<int> failed_at(kThreads, kVersions);
        std::atomic<int> wrong_errors{0};
        {
            auto e = open_engine(o);
            for (int i = 0; i < kThreads; ++i) {
                inos[i] = make_file(*e, "f" + std::to_string(i)).ino;
                const auto d = version(i, 0);
                write_all(*e, inos[i], 0, d);
                REQUIRE(e->fsync(inos[i], false).is_ok());
                acked[i] = 0;
            }
            fenv.fail_sync_at(at, EIO);
            std::vector<std::thread> threads;
            for (int i = 0; i < kThreads; ++i)
                threads.emplace_back([&, i] {
                    for (int v = 1; v < kVersions; ++v) {
                        const auto d = version(i, v);
                        Status st = e->write(inos[i], 0, d.data(), d.size());
                        if (st) st = e->fsync(inos[i], false);
                        if (!st) {
                            if (st.err() != EIO) ++wrong_errors;
                            failed_at[i] = v;
                            return;
                        }
                        acked[i] = v;
                    }
                });
            for (auto& t : threads) t.join();
            CHECK(wrong_errors == 0);
            REQUIRE(fenv.injected_faults() == 1);
            const std::string fault = fenv.last_injected_fault();
            INFO("the injected fault: " << fault);
            Status after = e->fsync(inos[0], false);
            if (fault.rfind("fdatasync ", 0) == 0) {
                // A segment's pages may be gone: the store stopped, and no
                // fsync succeeds after the failed sync.
                CHECK(after.err() == EIO);
            } else {
                // A new segment's directory sync: entries live in the file
                // system's journal, so the next sync retries it and succeeds.
                REQUIRE(fault.rfind("fsync directory ", 0) == 0);
                CHECK(after.is_ok());
            }
            abandon_engine(*e);
        }
        // Whatever no successful sync covered is gone: an fsync that
        // returned 0 without one shows here.
        REQUIRE(fenv.drop_all_unsynced().is_ok());
        auto e = open_engine(o);
        for (int i = 0; i < kThreads; ++i) {
            INFO("file f" << i << ", version " << acked[i] << " acknowledged, " << failed_at[i] << " failed");
            const auto got = read_all(*e, inos[i]);
            REQUIRE(got.size() == kSize);
            // Each byte is of the acknowledged version or of one written after it.
            std::vector<std::vector<std::uint8_t>> allowed;
            for (int v = acked[i]; v <= failed_at[i] && v < kVersions; ++v) allowed.push_back(version(i, v));
            std::size_t bad = 0;
            for (std::size_t b = 0; b < kSize; ++b) {
                bool ok = false;
                for (const auto& a : allowed) ok = ok || a[b] == got[b];
                bad += !ok;
            }
            CHECK(bad == 0);
        }
        REQUIRE(e->close().is_ok());
        e.reset();
        CHECK(check_invariants(dir.store()).empty());
    }
}

// A record in segment N may refer to chunks in N-1's tail. Were N-1 not
// synced before N took its first byte, a power loss could keep N's record
// and lose those chunks: replay would then map bytes that are gone. Each
// seed keeps a different random prefix of every unsynced file.
TEST_CASE("a record after a roll-over never outlives the previous segment's tail",
          "[engine][crash][log]") {
    std::mt19937_64 rng(44);
    const auto a = random_bytes(rng, 100000), b = random_bytes(rng, 700000);
    int replayed = 0;  // seeds that kept b's record: the case that matters
    for (std::uint64_t seed = 1; seed <= 24; ++seed) {
        INFO("seed " << seed);
        TempDir dir;
        FaultInjectionEnv fenv(Env::posix());
        fenv.set_forward_syncs(false);
        std::vector<std::string> logged;
        const EngineOptions o = log_test_options(dir.store(), &fenv, &logged);
        InodeId b_ino = 0;
        {
            auto e = open_engine(o);
            const InodeId a_ino = make_file(*e, "a").ino;
            write_all(*e, a_ino, 0, a);
            REQUIRE(e->fsync(a_ino, false).is_ok());  // so the group after the commit is captured
            REQUIRE(e->sync_all().is_ok());           // the frontier, in the first segment
            b_ino = make_file(*e, "b").ino;
            write_all(*e, b_ino, 0, b);  // fills the first segment, rolls over into the next
            // The fsync's sync never happens: the record is written, not synced.
            fenv.fail_sync_at(0, EIO, true);
            CHECK(e->fsync(b_ino, false).err() == EIO);
            CHECK(count_log_records(dir.store()) >= 2);
            abandon_engine(*e);
        }
        REQUIRE(fenv.drop_unsynced(seed).is_ok());
        auto e = open_engine(o);
        Attr x;
        const Status found = e->lookup(kRootInode, "b", &x);
        if (found) {
            ++replayed;
            // Replayed: b is whole; never a file whose chunks are gone.
            std::vector<std::uint8_t> got(b.size());
            std::size_t n = 0;
            const Status st = e->read(b_ino, 0, got.size(), got.data(), &n);
            INFO(st.to_string());
            CHECK(st.is_ok());
            CHECK(n == b.size());
            CHECK(got == b);
        } else {
            CHECK(found.err() == ENOENT);
        }
        REQUIRE(e->close().is_ok());
        e.reset();
        for (const auto& p : check_invariants(dir.store())) FAIL_CHECK(p);
    }
    CHECK(replayed > 0);
}
