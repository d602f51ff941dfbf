// hiodsfs-fsck and the segments: --scrub reads every chunk and names the
// files a corrupt one affects, flags it so the content written again is
// stored afresh; a segment cut short or lost is found, its ranges named,
// and --repair leaves a store that mounts read-write.
#include "fsck/fsck.h"

#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>

#include "../engine/engine_test_util.h"
#include "../skip.h"
#include "fsck_test_util.h"
#include "engine/chunk_index.h"
#include "meta/fingerprint_index.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

TEST_CASE("fsck --scrub names the files a corrupt chunk affects; it stays unrepaired", "[fsck]") {
    Store s;
    ChunkId id = s.extent(s.a, 0).chunk;  // shared by /a and /dir/c
    ChunkRecord r = s.chunk(id);
    flip_byte(s.segment_file(r.segment), r.offset + 100);
    Run run = fsck({s.path()});  // headers are intact: only the scrub reads payloads
    INFO(run.out);
    CHECK(run.code == 0);
    run = fsck({s.path(), "--scrub"});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "ERROR: bad chunk " + std::to_string(id) + ": "));
    CHECK(has(run, "payload checksum mismatch"));
    CHECK(has(run, "/a bytes 0-4095"));
    CHECK(has(run, "/dir/c bytes 0-4095"));
    // No hint that --repair would help: it cannot, and the verdict says so.
    CHECK_FALSE(has(run, "--repair"));
    CHECK(has(run, "left uncorrected: they cannot be repaired without losing data"));
    CHECK(has(run, "restore those from a backup"));
    run = fsck({s.path(), "--scrub", "--repair"});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "cannot be repaired without losing data"));
    // The engine refuses to return the bad bytes; the rest of the file reads.
    auto e = s.open();
    std::vector<std::uint8_t> buf(4096);
    std::size_t got = 0;
    CHECK(e->read(s.a, 0, 4096, buf.data(), &got).err() == EIO);
    REQUIRE(e->read(s.a, 4096, 4096, buf.data(), &got).is_ok());
    CHECK(std::equal(buf.begin(), buf.end(), s.a_data.begin() + 4096));
    CHECK(e->status_json().find("\"read_errors\": 1") != std::string::npos);
    REQUIRE(e->close().is_ok());
}

// Written again before any mount read the bad chunk (and flagged it), a
// file must not be stored as a reference to it: the scrub flags what it
// finds, as a failed read does.
TEST_CASE("fsck --scrub flags a bad chunk, so the content written again is stored afresh",
          "[fsck][scrub]") {
    Store s;
    const ChunkId id = s.extent(s.a, 0).chunk;  // shared by /a and /dir/c
    const ChunkRecord r = s.chunk(id);
    // A scrub that finds nothing writes nothing.
    auto metadata = [&] {
        std::ifstream in(s.path() + "/meta/data.mdb", std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string before = metadata();
    CHECK(fsck({s.path(), "--scrub"}).code == 0);
    CHECK(metadata() == before);
    flip_byte(s.segment_file(r.segment), r.offset + 100);
    // -n changes nothing, and says the chunk is still shared by writes.
    Run run = fsck({s.path(), "--scrub", "-n"});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "ERROR: bad chunk " + std::to_string(id) + ": "));
    CHECK(has(run, "not flagged (this run writes nothing)"));
    CHECK_FALSE(s.chunk(id).flags & ChunkRecord::kDamaged);
    run = fsck({s.path(), "--scrub"});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "flagged damaged, so no write shares it again"));
    CHECK(s.chunk(id).flags & ChunkRecord::kDamaged);
    // The good copy written again, as fsck's advice says.
    {
        auto e = s.open();
        const InodeId again = make_file(*e, "a-again").ino;
        write_all(*e, again, 0, s.a_data);
        REQUIRE(e->close().is_ok());
        e = s.open();
        CHECK(read_all(*e, again) == s.a_data);
        REQUIRE(e->close().is_ok());
        // Written raw and deduplicated by the background pass: the same.
        auto o = options_for(s.path(), ChunkingParams::fixed(4096));
        o.background_threads = 0;
        o.mode = DedupMode::kDeferred;
        e = open_engine(o);
        const InodeId deferred = make_file(*e, "a-deferred").ino;
        write_all(*e, deferred, 0, s.a_data);
        REQUIRE(e->run_background().is_ok());
        REQUIRE(e->close().is_ok());
        e = s.open();
        CHECK(read_all(*e, deferred) == s.a_data);
        REQUIRE(e->close().is_ok());
    }
    // Now --repair finds the intact copy and heals both files.
    run = fsck({s.path(), "--scrub", "--repair"});
    INFO(run.out);
    CHECK(run.code == 1);
    CHECK(s.read(s.a) == s.a_data);
    run = fsck({s.path(), "--scrub"});
    INFO(run.out);
    CHECK(run.code == 0);
}

// A user who can make files in the mount chooses their names: printed raw,
// a newline in one would forge lines of root's report.

TEST_CASE("fsck finds a truncated segment and names the lost ranges", "[fsck]") {
    Store s;
    ChunkRecord r = s.chunk(s.extent(s.b, 28672).chunk);  // the last chunk written
    REQUIRE(::truncate(s.segment_file(r.segment).c_str(), static_cast<off_t>(r.offset + 10)) == 0);
    Run run = fsck({s.path()});
    INFO(run.out);
    CHECK(run.code == 4);
    CHECK(has(run, "runs past the end of the file"));
    // One of the file's names (it has two) and the lost range.
    CHECK((has(run, "/dir/b bytes 28672-32767") || has(run, "/b-link bytes 28672-32767")));
    run = fsck({s.path(), "--repair"});
    CHECK(run.code == 4);
}

namespace {

// Four files over several small segments, each file's bytes known.
struct SpreadStore {
    TempDir dir;
    std::map<std::string, std::vector<std::uint8_t>> data;
    std::map<std::string, InodeId> ino;

    EngineOptions options() const {
        EngineOptions o = options_for(dir.store(), ChunkingParams::fixed(4096));
        o.background_threads = 0;
        o.segments.max_segment_bytes = 64 * 1024;  // 15 chunks a segment
        return o;
    }

    SpreadStore() {
        std::mt19937_64 rng(77);
        auto e = open_engine(options());
        for (const auto& [name, kib] : std::vector<std::pair<std::string, std::size_t>>{
                 {"a", 40}, {"b", 100}, {"c", 40}, {"d", 20}}) {
            data[name] = random_bytes(rng, kib * 1024);
            ino[name] = make_file(*e, name).ino;
            write_all(*e, ino[name], 0, data[name]);
        }
        REQUIRE(e->close().is_ok());
    }

    std::string segment_file(SegmentId seg) const {
        char name[32];
        std::snprintf(name, sizeof name, "/segments/%08x.seg", seg);
        return dir.store() + name;
    }

    // Segment id -> the files with a chunk in it.
    std::map<SegmentId, std::set<std::string>> users() {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        const auto chunks = all_chunk_records(*t);
        std::map<SegmentId, std::set<std::string>> out;
        for (const auto& [i, m2] : all_extents(*t))
            for (const auto& [name, n] : ino)
                if (n == i) out[chunks.at(m2.e.chunk).segment].insert(name);
        return out;
    }

    // Which 4 KiB blocks of a file read, which give EIO (anything else fails).
    std::vector<bool> readable_blocks(Engine& e, const std::string& name) {
        std::vector<bool> ok;
        const auto& d = data.at(name);
        std::vector<std::uint8_t> buf(4096);
        for (std::size_t off = 0; off < d.size(); off += 4096) {
            std::size_t got = 0;
            const Status st = e.read(ino.at(name), off, 4096, buf.data(), &got);
            if (st) {
                CHECK(got == 4096);
                CHECK(std::equal(buf.begin(), buf.end(),
                                 d.begin() + static_cast<std::ptrdiff_t>(off)));
            } else {
                CHECK(st.err() == EIO);
            }
            ok.push_back(st.is_ok());
        }
        return ok;
    }
};

}  // namespace

// A segment deleted or cut short: the files it held are named, --repair
// leaves a store that mounts read-write (fsck's advice, to write those files
// again, needs that), the lost ranges read EIO, the rest reads right, and
// once they are written again the store is clean.
TEST_CASE("fsck --repair of a store that lost a segment leaves it mountable read-write",
          "[fsck][lost]") {
    SpreadStore s;
    auto users = s.users();
    REQUIRE(users.size() >= 4);
    const SegmentId newest = users.rbegin()->first;
    SegmentId middle = 0;
    for (const auto& [seg, names] : users)
        if (names.count("b") && !names.count("a") && seg != newest) middle = seg;
    REQUIRE(middle != 0);
    const std::string how =
        GENERATE(as<std::string>{}, "middle deleted", "newest deleted", "newest cut short");
    INFO(how);
    std::set<std::string> hurt;
    if (how == "middle deleted") {
        REQUIRE(::unlink(s.segment_file(middle).c_str()) == 0);
        hurt = users[middle];
    } else if (how == "newest deleted") {
        REQUIRE(::unlink(s.segment_file(newest).c_str()) == 0);
        hurt = users[newest];
    } else {
        REQUIRE(::truncate(s.segment_file(newest).c_str(), 10000) == 0);
        hurt = users[newest];
    }
    {
        std::unique_ptr<Engine> e;
        CHECK(Engine::open(s.options(), &e).err() == EUCLEAN);  // refused read-write, as before
    }
    Run run = fsck({s.dir.store()});
    INFO(run.out);
    CHECK(run.code == 4);
    for (const std::string& name : hurt) CHECK(has(run, "/" + name + " bytes "));
    CHECK(has(run, "cannot be mounted read-write"));
    CHECK(has(run, "hiodsfs-fsck --repair " + s.dir.store() + " repairs "));
    run = fsck({s.dir.store(), "--repair"});
    INFO(run.out);
    CHECK(run.code == 4);  // the lost bytes stay lost
    CHECK(has(run, "REPAIRED: "));
    for (const std::string& name : hurt) CHECK(has(run, "/" + name + " bytes "));
    {
        auto e = open_engine(s.options());  // read-write
        for (const auto& [name, d] : s.data) {
            INFO("file " << name);
            const auto blocks = s.readable_blocks(*e, name);
            const bool all = std::all_of(blocks.begin(), blocks.end(), [](bool b) { return b; });
            CHECK(all == (hurt.count(name) == 0));
        }
        // The advice: write the named files again.
        for (const std::string& name : hurt) {
            SetAttr cut;
            cut.valid = SetAttr::kSize;
            Attr after;
            REQUIRE(e->setattr(s.ino[name], cut, &after).is_ok());
            write_all(*e, s.ino[name], 0, s.data[name]);
        }
        for (const auto& [name, d] : s.data) CHECK(read_all(*e, s.ino[name]) == d);
        // New data lands after everything the metadata ever referred to.
        const InodeId more = make_file(*e, "more").ino;
        write_all(*e, more, 0, s.data["a"]);
        REQUIRE(e->close().is_ok());
    }
    run = fsck({s.dir.store()});
    INFO(run.out);
    CHECK(run.code == 0);
    for (const auto& p : check_invariants(s.dir.store())) FAIL_CHECK(p);
    auto e = open_engine(s.options());
    for (const auto& [name, d] : s.data) CHECK(read_all(*e, s.ino[name]) == d);
    REQUIRE(e->close().is_ok());
}
