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

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {
const ChunkingParams kFixed = ChunkingParams::fixed(4096);

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

// The ids and records of every chunk.
std::map<ChunkId, ChunkRecord> chunk_records(Txn& t) {
    std::map<ChunkId, ChunkRecord> out;
    Cursor c = t.cursor(Db::kChunks);
    for (bool ok = c.first(); ok; ok = c.next()) {
        ChunkRecord r;
        REQUIRE(from_bytes(c.value(), &r));
        out[get_be64(c.key())] = r;
    }
    return out;
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
        auto chunks = chunk_records(t);
        REQUIRE(chunks.size() == 1);
        id = chunks.begin()->first;
        ChunkRecord r = chunks.begin()->second;
        REQUIRE(r.refs() == 1);
        r.set_refs(0xffffffffull);
        REQUIRE(t.put(Db::kChunks, key_u64(id), as_bytes(r)).is_ok());
    });
    {
        auto e = open_engine(options_for(dir.store(), kFixed));
        InodeId b_ino = make_file(*e, "b").ino;
        write_all(*e, b_ino, 0, data);  // shares the chunk: 2^32 references
        REQUIRE(e->close().is_ok());
    }
    edit_metadata(dir.store(), [&](Txn& t) {
        auto chunks = chunk_records(t);
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
        auto chunks = chunk_records(t);
        REQUIRE(chunks.count(id) == 1);
        CHECK(chunks[id].refs() == 0xffffffffull);
        // Back to the truth, so the store checks clean.
        ChunkRecord r = chunks[id];
        r.set_refs(1);
        REQUIRE(t.put(Db::kChunks, key_u64(id), as_bytes(r)).is_ok());
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
        auto chunks = chunk_records(t);
        REQUIRE(chunks.size() == 1);
        ChunkRecord r = chunks.begin()->second;
        r.set_refs(ChunkRecord::kMaxRefs);
        REQUIRE(r.refs() == ChunkRecord::kMaxRefs);
        REQUIRE(t.put(Db::kChunks, key_u64(chunks.begin()->first), as_bytes(r)).is_ok());
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
          "[engine][trust][stress]") {
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
