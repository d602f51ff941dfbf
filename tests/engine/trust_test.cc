// A damaged or stressed store never loses data: missing or damaged
// metadata is refused, committed segment bytes are never reused, a chunk
// that failed its checksum is never shared again, a failed group commit
// stops the store, one stream per file however the pass and the kernel
// interleave, and reference counts that do not wrap.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/store_layout.h"
#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// Opens the closed store's metadata read-write and hands fn a Txn; commits.
template <typename Fn>
void edit_metadata(const std::string& store, Fn fn) {
    std::unique_ptr<MetaStore> m;
    Status st = MetaStore::open(store + "/meta", 1ull << 32, false, &m);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        fn(*t);
        REQUIRE(t->commit().is_ok());
    }
    REQUIRE(m->commit_group(nullptr).is_ok());
}

// The first offset where got and want differ (-1: equal); a number prints
// where Catch2 would print both vectors.
long first_difference(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
    const std::size_t n = std::min(got.size(), want.size());
    for (std::size_t i = 0; i < n; ++i)
        if (got[i] != want[i]) return static_cast<long>(i);
    return got.size() == want.size() ? -1 : static_cast<long>(n);
}

}  // namespace

TEST_CASE("a reference count past 2^32 does not wrap and free a live chunk", "[engine][trust]") {
    TempDir dir;
    const auto data = std::vector<std::uint8_t>(4096, 0x5a);
    InodeId a_ino = 0;
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, data);
        REQUIRE(e->close().is_ok());
    }
    // Stand in for 2^32 - 1 extents sharing the chunk (too many to write).
    ChunkId id = 0;
    edit_metadata(dir.store(), [&](Txn& t) {
        auto chunks = all_chunk_records(t);
        REQUIRE(chunks.size() == 1);
        id = chunks.begin()->first;
        ChunkRecord r = chunks.begin()->second;
        REQUIRE(r.refs() == 1);
        r.set_refs(0xffffffffull);
        REQUIRE(put_chunk(t, id, r).is_ok());
    });
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        InodeId b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, data);  // shares the chunk: 2^32 references
        REQUIRE(e->close().is_ok());
    }
    edit_metadata(dir.store(), [&](Txn& t) {
        auto chunks = all_chunk_records(t);
        REQUIRE(chunks.count(id) == 1);
        CHECK(chunks[id].refs() == 0x100000000ull);
    });
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        CHECK(read_all(*e, a_ino) == data);
        REQUIRE(e->unlink(kRootInode, "b").is_ok());
        CHECK(read_all(*e, a_ino) == data);
        REQUIRE(e->close().is_ok());
    }
    edit_metadata(dir.store(), [&](Txn& t) {
        auto chunks = all_chunk_records(t);
        REQUIRE(chunks.count(id) == 1);
        CHECK(chunks[id].refs() == 0xffffffffull);
        // Back to the truth, so the store checks clean.
        ChunkRecord r = chunks[id];
        r.set_refs(1);
        REQUIRE(put_chunk(t, id, r).is_ok());
    });
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("a chunk shared as often as its count can say refuses one more reference",
          "[engine][trust]") {
    TempDir dir;
    const auto data = std::vector<std::uint8_t>(4096, 0x33);
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        write_all(*e, make_file(*e, "a").ino, 0, data);
        REQUIRE(e->close().is_ok());
    }
    edit_metadata(dir.store(), [&](Txn& t) {
        auto chunks = all_chunk_records(t);
        REQUIRE(chunks.size() == 1);
        ChunkRecord r = chunks.begin()->second;
        r.set_refs(ChunkRecord::kMaxRefs);
        REQUIRE(r.refs() == ChunkRecord::kMaxRefs);
        REQUIRE(put_chunk(t, chunks.begin()->first, r).is_ok());
    });
    auto e = open_engine(options_for(dir.store(), kFixed));
    InodeId b = make_file(*e, "b").ino;
    CHECK(e->write(b, 0, data.data(), data.size()).err() == EOVERFLOW);
    Attr a;
    REQUIRE(e->lookup(kRootInode, "a", &a).is_ok());
    CHECK(read_all(*e, a.ino) == data);
}

// The kernel forgets an inode (its last pin goes) while the background pass
// is re-chunking it, then opens it again and writes: the pass and the new
// writes must share one stream, or the pass's chunks of the old bytes land
// over the newer write.
TEST_CASE("writes, forgets and the pass at full speed on one file lose no write",
          "[engine][trust][stress][slow]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), ChunkingParams::cdc(1024, 4096, 16384));
    o.mode = DedupMode::kDeferred;
    o.background_threads = 0;  // the test's own thread runs the pass flat out
    auto e = open_engine(o);
    std::mt19937_64 rng(1234);
    constexpr std::size_t kSize = 256 * 1024;
    std::vector<std::uint8_t> model = random_bytes(rng, kSize);
    InodeId ino = make_file(*e, "f").ino;
    write_all(*e, ino, 0, model);

    std::atomic<bool> stop{false};
    std::atomic<int> pass_errors{0};
    std::thread pass([&] {
        while (!stop.load()) {
            if (!e->run_background()) pass_errors += 1;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    struct Join {  // also when a REQUIRE below throws
        std::atomic<bool>& stop;
        std::thread& t;
        ~Join() {
            stop = true;
            if (t.joinable()) t.join();
        }
    } join{stop, pass};
    const int rounds = 1500;
    for (int i = 0; i < rounds; ++i) {
        e->pin(ino);  // an open
        const std::size_t len = 1 + rng() % (24 * 1024);
        const std::size_t off = rng() % (kSize - len);
        auto bytes = random_bytes(rng, len);
        Status st = e->write(ino, off, bytes.data(), len);
        INFO("round " << i << ": " << st.to_string());
        REQUIRE(st.is_ok());
        std::copy(bytes.begin(), bytes.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
        if (i % 7 == 0) REQUIRE(e->flush(ino).is_ok());
        e->unpin(ino);  // the last close and the kernel's forget
        if (i % 100 == 99) {
            INFO("round " << i);
            REQUIRE(first_difference(read_all(*e, ino), model) == -1);
        }
    }
    stop = true;
    pass.join();
    CHECK(pass_errors.load() == 0);
    REQUIRE(e->run_background().is_ok());
    CHECK(first_difference(read_all(*e, ino), model) == -1);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
    auto again = open_engine(o);
    CHECK(first_difference(read_all(*again, ino), model) == -1);
}

namespace {
namespace fs = std::filesystem;

// Every segment file with its bytes, to show a refused open touched nothing.
std::map<std::string, std::string> segment_contents(const std::string& store) {
    std::map<std::string, std::string> out;
    for (const auto& ent : fs::directory_iterator(store + "/segments")) {
        std::ifstream in(ent.path(), std::ios::binary);
        out[ent.path().filename().string()] =
            std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return out;
}

struct TwoFiles {
    std::vector<std::uint8_t> a, b;
    InodeId a_ino = 0, b_ino = 0;
};

// Two files of unique data over several segments, committed; engine closed.
TwoFiles make_store(const EngineOptions& o) {
    TwoFiles w;
    std::mt19937_64 rng(99);
    auto e = open_engine(o);
    w.a = random_bytes(rng, 3 << 20);
    w.b = random_bytes(rng, 300 * 1024);
    w.a_ino = make_file(*e, "a").ino;
    write_all(*e, w.a_ino, 0, w.a);
    w.b_ino = make_file(*e, "b").ino;
    write_all(*e, w.b_ino, 0, w.b);
    REQUIRE(e->close().is_ok());
    return w;
}

Status try_open(const EngineOptions& o) {
    std::unique_ptr<Engine> e;
    return Engine::open(o, &e);
}

// A store refused read-write and read-only alike: EUCLEAN, in one line
// that names `advice`.
void check_refused(const EngineOptions& o, const std::string& advice) {
    for (bool read_only : {false, true}) {
        EngineOptions again = o;
        again.read_only = read_only;
        Status st = try_open(again);
        INFO(st.to_string());
        CHECK(st.err() == EUCLEAN);
        CHECK(st.message().find(advice) != std::string::npos);
        CHECK(st.message().find('\n') == std::string::npos);
    }
}

EngineOptions small_segments(const std::string& store) {
    EngineOptions o = options_for(store, kFixed);
    o.segments.max_segment_bytes = 1 << 20;
    o.reclaim = ReclaimMode::kBackground;  // a compactor that would run if it could
    return o;
}
}  // namespace

TEST_CASE("a store whose metadata is missing or made anew is refused and left untouched",
          "[engine][trust][slow]") {
    for (const char* how : {"data.mdb", "meta/", "an empty environment"}) {
        INFO(how);
        TempDir dir;
        const EngineOptions o = small_segments(dir.store());
        make_store(o);
        const auto before = segment_contents(dir.store());
        REQUIRE(before.size() >= 3);
        if (std::string(how) == "data.mdb") {
            fs::remove(dir.store() + "/meta/data.mdb");
        } else {
            fs::remove_all(dir.store() + "/meta");
            if (std::string(how) == "an empty environment") {
                std::unique_ptr<MetaStore> m;
                REQUIRE(MetaStore::open(dir.store() + "/meta", 1ull << 30, false, &m).is_ok());
            }
        }
        check_refused(o, "hiodsfs-fsck");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        CHECK(segment_contents(dir.store()) == before);
        // fsck refuses too, rather than checking a fresh environment.
        FsckReport report;
        FsckOptions fo;
        fo.store = dir.store();
        fo.repair = true;
        Status st = run_fsck(fo, &report);
        INFO(st.to_string());
        CHECK(st.err() == EUCLEAN);
        CHECK(segment_contents(dir.store()) == before);
    }
}

namespace {
std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// run_fsck's exit code (as the tool's): check, or repair, with --chunking if given.
int fsck_exit(const std::string& store, bool repair, const ChunkingParams* chunking = nullptr) {
    FsckOptions fo{store};
    fo.repair = repair;
    if (chunking != nullptr) {
        fo.chunking = *chunking;
        fo.chunking_given = true;
    }
    FsckReport report;
    Status st = run_fsck(fo, &report);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    return report.exit_code();
}
}  // namespace

TEST_CASE("a store whose FORMAT was deleted opens again from the metadata's copy", "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    const TwoFiles w = make_store(o);
    const std::string format_path = dir.store() + "/FORMAT";
    const std::string format = slurp(format_path);
    REQUIRE(format.find("chunking " + kFixed.describe()) != std::string::npos);
    REQUIRE(fs::remove(format_path));
    std::vector<std::string> logged;
    o.log = [&logged](const std::string& line) { logged.push_back(line); };
    o.chunking_given = false;  // the store's own parameters, from the copy

    // Read-only: the files, and nothing written.
    EngineOptions ro = o;
    ro.read_only = true;
    {
        std::unique_ptr<Engine> e;
        Status st = Engine::open(ro, &e);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        CHECK(e->chunking() == kFixed);
        CHECK(first_difference(read_all(*e, w.a_ino), w.a) == -1);
    }
    CHECK_FALSE(fs::exists(format_path));

    // Read-write: FORMAT is written again, word for word, and said so.
    {
        std::unique_ptr<Engine> e;
        Status st = Engine::open(o, &e);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        CHECK(first_difference(read_all(*e, w.a_ino), w.a) == -1);
        CHECK(first_difference(read_all(*e, w.b_ino), w.b) == -1);
        REQUIRE(e->close().is_ok());
    }
    CHECK(slurp(format_path) == format);
    bool said = false;
    for (const auto& line : logged) said = said || line.find("FORMAT was missing") != std::string::npos;
    CHECK(said);
    CHECK(fsck_exit(dir.store(), false) == 0);
}

TEST_CASE("a FORMAT that disagrees with the metadata's copy is refused until fsck rewrites it",
          "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    const TwoFiles w = make_store(o);
    const std::string format_path = dir.store() + "/FORMAT";
    const std::string format = slurp(format_path);
    std::string edited = format;
    const std::string was = "chunking " + kFixed.describe();
    edited.replace(edited.find(was), was.size(), "chunking " + ChunkingParams::fixed(8192).describe());
    std::ofstream(format_path, std::ios::trunc) << edited;
    o.chunking_given = false;
    check_refused(o, "hiodsfs-fsck --repair");
    CHECK(slurp(format_path) == edited);
    CHECK(fsck_exit(dir.store(), false) == 4);
    CHECK(fsck_exit(dir.store(), true) == 1);
    CHECK(slurp(format_path) == format);
    auto e = open_engine(o);
    CHECK(first_difference(read_all(*e, w.a_ino), w.a) == -1);
}

TEST_CASE("FORMAT deleted from a store whose metadata holds no copy: refused, and fsck --chunking rewrites it",
          "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    const TwoFiles w = make_store(o);
    const std::string format_path = dir.store() + "/FORMAT";
    const std::string format = slurp(format_path);
    // What a store an older hiodsfs made looks like.
    edit_metadata(dir.store(), [](Txn& t) {
        bool existed = false;
        REQUIRE(t.del(Db::kSuper, kFormatCopyKey, &existed).is_ok());
        REQUIRE(existed);
    });
    REQUIRE(fs::remove(format_path));
    const auto before = segment_contents(dir.store());
    o.chunking_given = false;
    Status st = try_open(o);
    INFO(st.to_string());
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("--chunking") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
    CHECK_FALSE(fs::exists(format_path));
    CHECK(segment_contents(dir.store()) == before);

    CHECK(fsck_exit(dir.store(), true) == 4);  // no chunking given: nothing to write it from
    CHECK_FALSE(fs::exists(format_path));
    CHECK(fsck_exit(dir.store(), true, &kFixed) == 1);
    CHECK(slurp(format_path) == format);
    auto e = open_engine(o);
    CHECK(first_difference(read_all(*e, w.a_ino), w.a) == -1);
}

TEST_CASE("a first open that crashed before writing FORMAT is made again, unless its segments hold data",
          "[engine][trust]") {
    for (const char* left : {"an empty environment", "no data.mdb", "a segment with data"}) {
        INFO(left);
        TempDir dir;
        const std::string store = dir.store();
        fs::create_directories(store);
        {
            std::unique_ptr<MetaStore> m;
            REQUIRE(MetaStore::open(store + "/meta", 1ull << 30, false, &m).is_ok());
        }
        fs::create_directories(store + "/segments");
        if (std::string(left) == "no data.mdb") fs::remove(store + "/meta/data.mdb");
        if (std::string(left) == "a segment with data")
            std::ofstream(store + "/segments/00000001.seg", std::ios::binary) << std::string(5000, 'x');
        const auto before = segment_contents(store);
        EngineOptions o = small_segments(store);
        std::unique_ptr<Engine> e;
        Status st = Engine::open(o, &e);
        INFO(st.to_string());
        if (std::string(left) == "a segment with data") {
            CHECK(st.err() == EUCLEAN);
            CHECK(st.message().find('\n') == std::string::npos);
            CHECK(segment_contents(store) == before);
            CHECK_FALSE(fs::exists(store + "/FORMAT"));
            continue;
        }
        REQUIRE(st.is_ok());
        auto f = make_file(*e, "x");
        write_all(*e, f.ino, 0, std::vector<std::uint8_t>(10000, 7));
        REQUIRE(e->close().is_ok());
        CHECK(fs::exists(store + "/FORMAT"));
        CHECK(fsck_exit(store, false) == 0);
    }
}

TEST_CASE("a store whose metadata pages are overwritten is refused at open", "[engine][trust]") {
    TempDir dir;
    const EngineOptions o = small_segments(dir.store());
    make_store(o);
    const auto before = segment_contents(dir.store());
    {
        // Every third page after the two meta pages, as a bad disk might.
        const std::string path = dir.store() + "/meta/data.mdb";
        const auto size = fs::file_size(path);
        const long page = ::sysconf(_SC_PAGESIZE);
        int fd = ::open(path.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        std::mt19937_64 rng(7);
        for (std::uint64_t pg = 2; pg * page < size; pg += 3) {
            auto junk = random_bytes(rng, static_cast<std::size_t>(page));
            REQUIRE(::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(pg * page)) == page);
        }
        ::close(fd);
    }
    Status st = try_open(o);
    INFO(st.to_string());
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().find("hiodsfs-fsck") != std::string::npos);
    CHECK(segment_contents(dir.store()) == before);
}

TEST_CASE("reclaim never deletes a segment the metadata does not know", "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    o.reclaim = ReclaimMode::kManual;
    make_store(o);
    // Forget one sealed segment's entry: its records are unknown now.
    SegmentId forgotten = 0;
    edit_metadata(dir.store(), [&](Txn& t) {
        Cursor c = t.cursor(Db::kSegments);
        REQUIRE(c.first());
        forgotten = static_cast<SegmentId>(key_number(c.key()));
        REQUIRE(t.del(Db::kSegments, key_u64(forgotten)).is_ok());
    });
    char name[32];
    std::snprintf(name, sizeof name, "%08x.seg", forgotten);
    const auto before = segment_contents(dir.store());
    REQUIRE(before.count(name) == 1);
    auto e = open_engine(o);
    REQUIRE(e->run_reclaim().is_ok());
    REQUIRE(e->close().is_ok());
    auto after = segment_contents(dir.store());
    REQUIRE(after.count(name) == 1);
    CHECK(after[name] == before.at(name));
}

TEST_CASE("a deleted or truncated segment that committed metadata refers to is refused read-write",
          "[engine][trust][slow]") {
    for (const char* damage : {"delete the newest", "truncate the newest", "delete a sealed one"}) {
        INFO(damage);
        TempDir dir;
        const EngineOptions o = small_segments(dir.store());
        const TwoFiles w = make_store(o);
        auto files = segment_contents(dir.store());
        REQUIRE(files.size() >= 3);
        const std::string newest = dir.store() + "/segments/" + files.rbegin()->first;
        const std::string sealed = dir.store() + "/segments/" + files.begin()->first;
        if (std::string(damage) == "delete the newest") {
            fs::remove(newest);
        } else if (std::string(damage) == "truncate the newest") {
            fs::resize_file(newest, fs::file_size(newest) / 2);
        } else {
            fs::remove(sealed);
        }
        const auto before = segment_contents(dir.store());
        Status st = try_open(o);
        INFO(st.to_string());
        CHECK(st.err() == EUCLEAN);
        CHECK(st.message().find("hiodsfs-fsck") != std::string::npos);
        CHECK(st.message().find("-o ro") != std::string::npos);
        CHECK(segment_contents(dir.store()) == before);  // nothing re-created or cut
        // Read-only, the rest can be copied out; the lost bytes are EIO.
        EngineOptions ro = o;
        ro.read_only = true;
        auto e = open_engine(ro);
        std::vector<std::uint8_t> buf(w.a.size());
        std::size_t got = 0;
        const bool a_ok = e->read(w.a_ino, 0, buf.size(), buf.data(), &got).is_ok();
        const bool b_ok = e->read(w.b_ino, 0, w.b.size(), buf.data(), &got).is_ok();
        CHECK_FALSE((a_ok && b_ok));  // some file lost bytes, and says so
        CHECK(segment_contents(dir.store()) == before);
    }
}

TEST_CASE("damage in the committed tail of the newest segment is kept, and no offset is reused",
          "[engine][trust]") {
    TempDir dir;
    const EngineOptions o = small_segments(dir.store());
    const TwoFiles w = make_store(o);
    auto files = segment_contents(dir.store());
    const std::string newest_name = files.rbegin()->first;
    const std::string newest = dir.store() + "/segments/" + newest_name;
    const auto size = fs::file_size(newest);
    {
        // A flipped byte in the last record's payload: committed, not torn.
        std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(size - 10));
        char c = 0;
        f.read(&c, 1);
        c ^= 0x40;
        f.seekp(static_cast<std::streamoff>(size - 10));
        f.write(&c, 1);
    }
    const std::string damaged = segment_contents(dir.store())[newest_name];
    {
        auto e = open_engine(o);
        std::mt19937_64 rng(5);
        auto c = random_bytes(rng, 200 * 1024);
        InodeId ino = make_file(*e, "c").ino;
        write_all(*e, ino, 0, c);
        REQUIRE(e->fsync(ino, false).is_ok());
        std::vector<std::uint8_t> buf(w.b.size());
        std::size_t got = 0;
        CHECK(e->read(w.b_ino, 0, buf.size(), buf.data(), &got).err() == EIO);
        CHECK(read_all(*e, ino) == c);
        REQUIRE(e->close().is_ok());
    }
    // The damaged segment is as it was: not cut, not appended over.
    CHECK(segment_contents(dir.store())[newest_name] == damaged);
}

TEST_CASE("a failed group commit stops the store until it is opened again", "[engine][trust]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kFixed);
    o.background_commit = false;
    o.fsync_log = false;  // every fsync commits (fsync_log_test.cc: a failed commit after a logged fsync)
    std::atomic<int> fail_with{0};
    EngineHooks hooks;
    hooks.commit_fault = [&] { return fail_with.load(); };
    std::vector<std::string> logged;
    o.log = [&](const std::string& m) { logged.push_back(m); };
    std::mt19937_64 rng(3);
    const auto a = random_bytes(rng, 100000), b = random_bytes(rng, 100000);
    InodeId a_ino = 0;
    {
        auto e = open_engine(o, hooks);
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, a);
        REQUIRE(e->fsync(a_ino, false).is_ok());
        InodeId b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, b);
        fail_with = ENOSPC;
        CHECK(e->fsync(b_ino, false).err() == EIO);
        fail_with = 0;
        // Sticky: the lost operations were acknowledged, so nothing after them may be.
        CHECK(e->fsync(a_ino, false).err() == EIO);
        CHECK(e->write(a_ino, 0, a.data(), 10).err() == EIO);
        Attr x;
        CHECK(e->create(kRootInode, "c", NewNode{S_IFREG | 0644}, &x).err() == EIO);
        CHECK(e->status_json().find("\"store_error\": \"metadata commit") != std::string::npos);
        SpaceCounters c;
        CHECK(e->counters(&c).is_ok());  // hiodsfs-stat still has figures
        CHECK_FALSE(e->close().is_ok());
    }
    REQUIRE(logged.size() == 1);
    CHECK(logged[0].find("mounted again") != std::string::npos);
    auto e = open_engine(o, hooks);
    CHECK(read_all(*e, a_ino) == a);
    Attr x;
    CHECK(e->lookup(kRootInode, "b", &x).err() == ENOENT);  // lost with its group, and consistently
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(dir.store()).empty());
}

TEST_CASE("a chunk that failed its checksum is never shared again, and fsck heals its files",
          "[engine][trust]") {
    TempDir dir;
    const EngineOptions o = options_for(dir.store(), kFixed);
    std::mt19937_64 rng(11);
    const auto data = random_bytes(rng, 64 * 1024);
    InodeId a_ino = 0;
    {
        auto e = open_engine(o);
        a_ino = make_file(*e, "a").ino;
        write_all(*e, a_ino, 0, data);
        REQUIRE(e->close().is_ok());
    }
    // Flip a payload byte of the chunk at file offset 8192.
    ChunkRecord rec;
    {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        bool found = false;
        const ExtentRecord ext = extent_at(*t, a_ino, 8192);
        REQUIRE(get_chunk(*t, ext.chunk, &rec, &found).is_ok());
        REQUIRE(found);
    }
    flip_chunk_byte(dir.store(), rec, 100);
    InodeId b_ino = 0;
    {
        auto e = open_engine(o);
        std::vector<std::uint8_t> buf(data.size());
        std::size_t got = 0;
        // The chunks around the bad one are read in runs (one pread each),
        // and read right.
        REQUIRE(e->read(a_ino, 12288, buf.size() - 12288, buf.data(), &got).is_ok());
        REQUIRE(got == buf.size() - 12288);
        CHECK(std::equal(buf.begin(), buf.begin() + static_cast<long>(got), data.begin() + 12288));
        CHECK(e->status_json().find("\"reads_coalesced\": 0,") == std::string::npos);
        // A run holding the bad chunk fails, and the chunk read alone is
        // found damaged: EIO for the request, never wrong bytes.
        CHECK(e->read(a_ino, 0, buf.size(), buf.data(), &got).err() == EIO);
        CHECK(e->status_json().find("\"read_errors\": 1,") != std::string::npos);
        // A good copy of the same content, fsynced: stored afresh, not shared.
        b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, data);
        REQUIRE(e->fsync(b_ino, false).is_ok());
        CHECK(e->status_json().find("\"damaged_chunks\": 1,") != std::string::npos);
        REQUIRE(e->close().is_ok());
    }
    {
        auto e = open_engine(o);
        CHECK(first_difference(read_all(*e, b_ino), data) == -1);
        std::vector<std::uint8_t> buf(data.size());
        std::size_t got = 0;
        CHECK(e->read(a_ino, 0, buf.size(), buf.data(), &got).err() == EIO);
        REQUIRE(e->close().is_ok());
    }
    // fsck names the bad chunk; --repair moves /a onto b's intact copy.
    FsckOptions fo;
    fo.store = dir.store();
    FsckReport report;
    REQUIRE(run_fsck(fo, &report).is_ok());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].what.find("bad chunk") != std::string::npos);
    CHECK(report.problems[0].what.find("/a") != std::string::npos);
    fo.repair = true;
    REQUIRE(run_fsck(fo, &report).is_ok());
    for (const auto& p : report.problems) UNSCOPED_INFO(p.what);
    CHECK(report.unrepaired() == 0);
    CHECK(check_invariants(dir.store()).empty());
    auto e = open_engine(o);
    CHECK(first_difference(read_all(*e, a_ino), data) == -1);
    CHECK(first_difference(read_all(*e, b_ino), data) == -1);
}

TEST_CASE("fsck reports segments the metadata does not know, and --repair lets reclaim free them",
          "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    o.reclaim = ReclaimMode::kOff;  // the deleted file's chunks die at once, nothing compacts
    make_store(o);
    {
        auto e = open_engine(o);
        REQUIRE(e->unlink(kRootInode, "a").is_ok());
        REQUIRE(e->close().is_ok());
    }
    // Forget every segment that holds nothing live, as an old version's
    // crash between a segment's entry and its file could leave them.
    std::vector<SegmentId> dead;
    edit_metadata(dir.store(), [&](Txn& t) {
        Cursor c = t.cursor(Db::kSegments);
        for (bool ok = c.first(); ok; ok = c.next())
            if (get_be64(c.value()) == 0) dead.push_back(static_cast<SegmentId>(key_number(c.key())));
        for (SegmentId seg : dead) REQUIRE(t.del(Db::kSegments, key_u64(seg)).is_ok());
    });
    REQUIRE(dead.size() >= 2);
    const std::size_t files_before = segment_contents(dir.store()).size();
    {
        o.reclaim = ReclaimMode::kManual;
        auto e = open_engine(o);
        REQUIRE(e->run_reclaim().is_ok());  // unknown: kept
        REQUIRE(e->close().is_ok());
    }
    CHECK(segment_contents(dir.store()).size() == files_before);
    FsckOptions fo;
    fo.store = dir.store();
    FsckReport report;
    REQUIRE(run_fsck(fo, &report).is_ok());
    std::size_t unknown = 0;
    for (const auto& p : report.problems)
        unknown += p.what.find("holds no chunk the metadata refers to") != std::string::npos;
    CHECK(unknown == dead.size());
    fo.repair = true;
    REQUIRE(run_fsck(fo, &report).is_ok());
    CHECK(report.unrepaired() == 0);
    {
        auto e = open_engine(o);
        REQUIRE(e->run_reclaim().is_ok());
        REQUIRE(e->close().is_ok());
    }
    CHECK(segment_contents(dir.store()).size() == files_before - dead.size());
    CHECK(check_invariants(dir.store()).empty());
}

// Reclaim deletes the segment that was the frontier of the last commit: the
// commit before the deletion must move the frontier on, or a crash right
// after the deletion would leave a store that refuses to open.
TEST_CASE("deleting the segment of the last commit's frontier survives a crash", "[engine][trust]") {
    TempDir dir;
    EngineOptions o = small_segments(dir.store());
    o.reclaim = ReclaimMode::kManual;
    o.background_commit = false;
    std::mt19937_64 rng(21);
    const auto data = random_bytes(rng, 300 * 1024);
    {
        auto e = open_engine(o);
        InodeId ino = make_file(*e, "a").ino;
        write_all(*e, ino, 0, data);
        REQUIRE(e->fsync(ino, false).is_ok());
        REQUIRE(e->unlink(kRootInode, "a").is_ok());
        REQUIRE(e->sync_all().is_ok());
        const auto before = segment_contents(dir.store());
        REQUIRE(e->run_reclaim().is_ok());  // seals the dead segment and deletes it
        REQUIRE(segment_contents(dir.store()).size() <= before.size());
        REQUIRE(segment_contents(dir.store()).count(before.begin()->first) == 0);
        abandon_engine(*e);  // a crash: whatever reclaim left uncommitted is lost
    }
    Status st = try_open(o);
    INFO(st.to_string());
    CHECK(st.is_ok());
    CHECK(check_invariants(dir.store()).empty());
}
