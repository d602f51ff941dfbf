// The engine under I/O faults and power loss, through FaultInjectionEnv:
// every failing call returns its error cleanly, and after reopening every
// file made durable before the fault (or the crash) reads back exactly.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <mutex>

#include "engine_test_util.h"
#include "store/fault_env.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

std::string testing_join(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += "\n  " + l;
    return out;
}

struct Written {
    std::vector<std::uint8_t> data;
    bool durable = false;
};

EngineOptions fault_options(const std::string& store, Env* env, const ChunkingParams& params) {
    EngineOptions o = options_for(store, params);
    o.env = env;
    o.background_commit = false;  // commits happen exactly at fsync, so the test knows what is durable
    o.segments.write_buffer_bytes = 32 * 1024;  // many small pwrites to fail at
    o.segments.max_segment_bytes = 512 * 1024;
    return o;
}

// Writes files f0..f(n-1), each fsynced after it is written. Stops at the
// first error and returns it; *files records what is durable.
Status workload(Engine& e, std::mt19937_64& rng, int n, std::map<std::string, Written>* files) {
    for (int i = 0; i < n; ++i) {
        std::string name = "f" + std::to_string(i);
        Attr a;
        HIODSFS_TRY(e.create(kRootInode, name, NewNode{S_IFREG | 0644}, &a));
        Written& w = (*files)[name];
        w.data = random_bytes(rng, 100000 + rng() % 200000);
        if (i % 3 == 2) w.data = (*files)["f0"].data;  // some duplicates
        for (std::size_t off = 0; off < w.data.size(); off += 50000) {
            std::size_t len = std::min<std::size_t>(50000, w.data.size() - off);
            HIODSFS_TRY(e.write(a.ino, off, w.data.data() + off, len));
        }
        HIODSFS_TRY(e.fsync(a.ino, false));
        w.durable = true;
    }
    return Status::ok();
}

void check_durable(Engine& e, const std::map<std::string, Written>& files) {
    for (const auto& [name, w] : files) {
        if (!w.durable) continue;
        INFO("durable file " << name);
        Attr a;
        Status st = e.lookup(kRootInode, name, &a);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        REQUIRE(read_all(e, a.ino) == w.data);
    }
}

}  // namespace

TEST_CASE("I/O errors at each of the first writes fail cleanly and lose nothing durable",
          "[engine][fault]") {
    const WriteFault kinds[] = {WriteFault::kNoSpace, WriteFault::kIoError, WriteFault::kShortWrite};
    for (WriteFault kind : kinds) {
        for (std::uint64_t at = 0; at < 40; at += 3) {
            INFO("fault kind " << int(kind) << " at write " << at);
            TempDir dir;
            FaultInjectionEnv fenv(Env::posix());
            fenv.set_forward_syncs(false);
            std::map<std::string, Written> files;
            Status failure;
            {
                std::unique_ptr<Engine> e = open_engine(fault_options(dir.store(), &fenv, ChunkingParams::cdc(1024, 4096, 16384)));
                std::mt19937_64 rng(at * 7 + static_cast<int>(kind));
                fenv.fail_write_at(at, kind, /*permanent=*/true);
                failure = workload(*e, rng, 6, &files);
                if (!failure.is_ok()) {
                    int err = failure.err();
                    CHECK((err == ENOSPC || err == EIO));
                }
                // Closing may fail too (the device still fails); it must not crash.
                (void)e->close();
            }
            fenv.clear_faults();
            auto e = open_engine(fault_options(dir.store(), &fenv, ChunkingParams::cdc(1024, 4096, 16384)));
            check_durable(*e, files);
            // The store still works after the fault.
            std::map<std::string, Written> more;
            std::mt19937_64 rng2(99);
            Attr a;
            REQUIRE(e->create(kRootInode, "after", NewNode{S_IFREG | 0644}, &a).is_ok());
            auto d = random_bytes(rng2, 70000);
            REQUIRE(e->write(a.ino, 0, d.data(), d.size()).is_ok());
            REQUIRE(e->fsync(a.ino, false).is_ok());
            CHECK(read_all(*e, a.ino) == d);
            REQUIRE(e->close().is_ok());
            auto problems = check_invariants(dir.store());
            for (auto& p : problems) UNSCOPED_INFO(p);
            CHECK(problems.empty());
        }
    }
}

TEST_CASE("an overwrite whose chunks cannot be stored changes nothing of the file",
          "[engine][fault]") {
    // A small overwrite re-cuts the old bytes around it; whichever of its
    // chunks fails to be stored, the write fails whole: the file reads as
    // before it (now and after a restart), and nothing of it is stored later.
    int failures_seen = 0;
    for (auto params : {ChunkingParams::cdc(1024, 4096, 16384), ChunkingParams::fixed(4096)}) {
        for (std::uint64_t at = 0; at < 12; ++at) {
            INFO((params.kind == ChunkingParams::Kind::kFixed ? "fixed" : "cdc") << ", I/O errors from segment write " << at);
            TempDir dir;
            FaultInjectionEnv fenv(Env::posix());
            EngineOptions o = fault_options(dir.store(), &fenv, params);
            o.segments.write_buffer_bytes = 4096;  // nearly every new chunk is a pwrite
            std::mt19937_64 rng(at + 17);
            std::vector<std::uint8_t> model = random_bytes(rng, 256 * 1024);
            {
                auto e = open_engine(o);
                Attr a = make_file(*e, "f");
                write_all(*e, a.ino, 0, model, 64 * 1024);
                REQUIRE(e->fsync(a.ino, false).is_ok());
                // Until the faults clear, every write that must store a new
                // chunk fails; chunks already appended still read from memory.
                fenv.fail_write_at(at, WriteFault::kIoError, /*permanent=*/true);
                for (int k = 0; k < 24; ++k) {
                    const std::size_t len = 1000 + rng() % 7000;
                    const std::size_t off = rng() % (model.size() - len);
                    std::vector<std::uint8_t> d = random_bytes(rng, len);
                    Status st = e->write(a.ino, off, d.data(), d.size());
                    if (st.is_ok()) {
                        std::copy(d.begin(), d.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
                    } else {
                        ++failures_seen;
                        CHECK(st.err() == EIO);
                    }
                    INFO("after write " << k << " at " << off << " (" << st.to_string() << ")");
                    REQUIRE(read_all(*e, a.ino) == model);
                }
                fenv.clear_faults();
                REQUIRE(e->fsync(a.ino, false).is_ok());
                REQUIRE(read_all(*e, a.ino) == model);
                REQUIRE(e->close().is_ok());
            }
            auto e = open_engine(o);
            Attr a;
            REQUIRE(e->lookup(kRootInode, "f", &a).is_ok());
            CHECK(read_all(*e, a.ino) == model);
            REQUIRE(e->close().is_ok());
            auto problems = check_invariants(dir.store());
            for (auto& p : problems) UNSCOPED_INFO(p);
            CHECK(problems.empty());
        }
    }
    CHECK(failures_seen > 0);  // the faults reached the write path
}

TEST_CASE("a segment file that refuses writes stops the store: EIO, logged once, and in its status",
          "[engine][fault][store-stop]") {
    // EPERM is what a segment file made immutable (chattr +i) answers. The
    // store must not pass it on as if the caller lacked a permission, nor
    // go on taking changes it can never make durable.
    TempDir dir;
    FaultInjectionEnv fenv(Env::posix());
    fenv.set_forward_syncs(false);
    EngineOptions o = fault_options(dir.store(), &fenv, ChunkingParams::cdc(1024, 4096, 16384));
    std::mutex log_mu;
    std::vector<std::string> logged;
    o.log = [&](const std::string& line) {
        std::lock_guard<std::mutex> g(log_mu);
        logged.push_back(line);
    };
    std::mt19937_64 rng(5);
    const std::vector<std::uint8_t> kept = random_bytes(rng, 100000);
    {
        auto e = open_engine(o);
        const Attr a = make_file(*e, "kept");
        write_all(*e, a.ino, 0, kept, 50000);
        REQUIRE(e->fsync(a.ino, false).is_ok());

        fenv.fail_write_at(0, WriteFault::kNotPermitted, /*permanent=*/true);
        const Attr b = make_file(*e, "refused");
        const std::vector<std::uint8_t> d = random_bytes(rng, 300000);
        Status st;
        for (std::size_t off = 0; off < d.size() && st; off += 50000)
            st = e->write(b.ino, off, d.data() + off, std::min<std::size_t>(50000, d.size() - off));
        if (st) st = e->fsync(b.ino, false);
        INFO(st.to_string());
        CHECK(st.err() == EIO);
        CHECK(e->fsync(b.ino, false).err() == EIO);
        // Stopped: a change that writes no segment byte is refused too.
        Attr c;
        CHECK(e->create(kRootInode, "later", NewNode{S_IFREG | 0644}, &c).err() == EIO);
        const auto status = nlohmann::json::parse(e->status_json());
        REQUIRE(status.at("store_error").is_string());
        const std::string why = status.at("store_error").get<std::string>();
        CHECK(why.find("injected EPERM") != std::string::npos);  // the reason
        CHECK(why.find("segment") != std::string::npos);
        {
            std::lock_guard<std::mutex> g(log_mu);
            INFO("logged: " << testing_join(logged));
            CHECK(std::count_if(logged.begin(), logged.end(), [](const std::string& l) {
                      return l.find("the store stopped: ") != std::string::npos &&
                             l.find("injected EPERM") != std::string::npos;
                  }) == 1);
        }
        fenv.clear_faults();
        (void)e->close();
    }
    auto e = open_engine(o);
    Attr a;
    REQUIRE(e->lookup(kRootInode, "kept", &a).is_ok());
    CHECK(read_all(*e, a.ino) == kept);
    REQUIRE(e->close().is_ok());
    auto problems = check_invariants(dir.store());
    for (auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
}

TEST_CASE("an overwrite whose re-cut meets a damaged chunk changes nothing of the file",
          "[engine][fault]") {
    // The re-cut after an overwrite reads the old bytes that follow it; when
    // those do not read (a chunk that fails its checksum), the write fails
    // whole: no byte of it is stored, then or later, and the times stay.
    const ChunkingParams params = ChunkingParams::cdc(1024, 4096, 16384);
    TempDir dir;
    const EngineOptions o = options_for(dir.store(), params);
    std::mt19937_64 rng(31);
    std::vector<std::uint8_t> model = random_bytes(rng, 256 * 1024);
    InodeId ino = 0;
    {
        auto e = open_engine(o);
        ino = make_file(*e, "f").ino;
        write_all(*e, ino, 0, model);
        REQUIRE(e->close().is_ok());
    }
    // The chunk holding the middle of the file, and where it starts.
    MappedExtent damaged;
    ChunkRecord rec;
    {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        std::vector<MappedExtent> ex;
        REQUIRE(extents_overlapping(*t, ino, 128 * 1024, 128 * 1024 + 1, &ex).is_ok());
        REQUIRE(ex.size() == 1);
        damaged = ex.front();
        bool found = false;
        REQUIRE(get_chunk(*t, damaged.e.chunk, &rec, &found).is_ok());
        REQUIRE(found);
    }
    flip_chunk_byte(dir.store(), rec, 200);
    auto e = open_engine(o);
    const std::size_t before = static_cast<std::size_t>(damaged.start);
    int refused = 0;
    for (int k = 0; k < 8; ++k) {
        // New bytes right before the damaged chunk: unless they happen to
        // keep a cut at its start, the re-cut goes on into it.
        const std::size_t len = 100 + k * 50, at = before - len;
        std::vector<std::uint8_t> d = random_bytes(rng, len);
        Attr was;
        REQUIRE(e->getattr(ino, &was).is_ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a later write's times differ
        Status st = e->write(ino, at, d.data(), d.size());
        if (st.is_ok()) {
            std::copy(d.begin(), d.end(), model.begin() + static_cast<std::ptrdiff_t>(at));
        } else {
            ++refused;
            CHECK(st.err() == EIO);
            Attr now;
            REQUIRE(e->getattr(ino, &now).is_ok());
            CHECK(now.mtime.tv_sec == was.mtime.tv_sec);
            CHECK(now.mtime.tv_nsec == was.mtime.tv_nsec);
            CHECK(now.size == was.size);
        }
        INFO("write " << k << ": " << st.to_string());
        std::vector<std::uint8_t> got(before);
        std::size_t n = 0;
        REQUIRE(e->read(ino, 0, before, got.data(), &n).is_ok());
        REQUIRE(n == before);
        REQUIRE(std::equal(got.begin(), got.end(), model.begin()));
    }
    CHECK(refused > 0);
    // Nothing of a refused write is stored when the stream closes either.
    REQUIRE(e->fsync(ino, false).is_ok());
    std::vector<std::uint8_t> got(before);
    std::size_t n = 0;
    REQUIRE(e->read(ino, 0, before, got.data(), &n).is_ok());
    CHECK(std::equal(got.begin(), got.end(), model.begin()));
    REQUIRE(e->close().is_ok());
}

TEST_CASE("power loss drops unsynced writes; everything fsynced survives", "[engine][crash]") {
    std::uint64_t base_seed = std::random_device{}();
    std::cerr << "power-loss test seed " << base_seed << "\n";
    for (int round = 0; round < 30; ++round) {
        std::uint64_t seed = base_seed + static_cast<std::uint64_t>(round);
        INFO("seed " << seed);
        TempDir dir;
        FaultInjectionEnv fenv(Env::posix());
        fenv.set_forward_syncs(false);
        std::mt19937_64 rng(seed);
        auto params = round % 2 ? ChunkingParams::fixed(4096) : ChunkingParams::cdc(1024, 4096, 16384);
        std::map<std::string, Written> files;
        {
            auto e = open_engine(fault_options(dir.store(), &fenv, params));
            // Durable files, then unsynced activity: new files, overwrites of
            // durable ones after a copy of their durable content is kept
            // aside, then the crash at a random point.
            REQUIRE(workload(*e, rng, 3, &files).is_ok());
            int extra = static_cast<int>(rng() % 6);
            for (int i = 0; i < extra; ++i) {
                Attr a;
                std::string name = "u" + std::to_string(i);
                REQUIRE(e->create(kRootInode, name, NewNode{S_IFREG | 0644}, &a).is_ok());
                auto d = random_bytes(rng, 10000 + rng() % 100000);
                REQUIRE(e->write(a.ino, 0, d.data(), d.size()).is_ok());
                if (rng() % 2) REQUIRE(e->flush(a.ino).is_ok());
            }
            abandon_engine(*e);
        }
        REQUIRE(fenv.drop_unsynced(seed).is_ok());
        auto e = open_engine(fault_options(dir.store(), &fenv, params));
        check_durable(*e, files);
        // Files that were never synced are absent or readable, never corrupt.
        std::vector<DirEntry> entries;
        REQUIRE(e->readdir(kRootInode, &entries).is_ok());
        for (const auto& en : entries) {
            std::vector<std::uint8_t> buf;
            Attr a;
            REQUIRE(e->getattr(en.ino, &a).is_ok());
            buf.resize(a.size);
            std::size_t got = 0;
            Status st = e->read(en.ino, 0, buf.size(), buf.data(), &got);
            INFO(en.name << ": " << st.to_string());
            CHECK(st.is_ok());
        }
        REQUIRE(e->close().is_ok());
        auto problems = check_invariants(dir.store());
        for (auto& p : problems) UNSCOPED_INFO(p);
        CHECK(problems.empty());
    }
}
