// The engine over a SegmentTier: what it writes reaches the tier by the
// time it closes, a remount whose cache holds nothing reads it all back,
// FORMAT keeps the store from being opened read-write without its tier,
// and Engine::stop (the daemon's answer to a lost lock) refuses changes.

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../store/memory_tier.h"
#include "engine_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

EngineOptions tiered_options(const std::string& store, MemoryTier* tier, std::uint64_t cache_bytes) {
    EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
    o.segments.tier = tier;
    o.segments.cache_bytes = cache_bytes;
    return o;
}

std::string slurp_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST_CASE("engine with a tier: everything is in the tier at close, and reads back through an empty cache",
          "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    std::mt19937_64 rng(15);
    const std::vector<std::uint8_t> data = random_bytes(rng, 10 << 20);  // past two 4 MiB segments
    {
        auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
        const Attr f = make_file(*e, "f");
        write_all(*e, f.ino, 0, data);
        REQUIRE(e->fsync(f.ino, false).is_ok());
        REQUIRE(e->close().is_ok());
    }
    // Sealed at close, so the last segment is there too.
    REQUIRE(tier.objects.size() >= 3);
    std::uint64_t in_tier = 0;
    for (const auto& [id, bytes] : tier.objects) in_tier += bytes.size();
    REQUIRE(in_tier >= data.size());
    REQUIRE(slurp_text(dir.store() + "/FORMAT").find("tier memory tier\n") != std::string::npos);

    // A cache of one byte: every segment is fetched for the reads (all but
    // the one read last are evicted again). The copies the last run left are
    // evicted by the uploader thread after the open: wait for that, or a
    // loaded machine reads one of them first.
    auto e = open_engine(tiered_options(dir.store(), &tier, 1));
    for (int i = 0; i < 1000; ++i) {
        const auto cached = nlohmann::json::parse(e->status_json()).at("tier").at("cached_segments");
        if (cached.get<std::uint64_t>() == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(nlohmann::json::parse(e->status_json()).at("tier").at("cached_segments") == 0);
    InodeId ino = 0;
    {
        Attr a;
        REQUIRE(e->lookup(kRootInode, "f", &a).is_ok());
        ino = a.ino;
    }
    REQUIRE(read_all(*e, ino) == data);
    const nlohmann::json status = nlohmann::json::parse(e->status_json());
    INFO(status.dump());
    CHECK(status.at("backend") == "memory tier");
    CHECK(status.at("tier").at("cache_misses").get<std::uint64_t>() >= 3);
    CHECK(status.at("tier").at("fetched_bytes").get<std::uint64_t>() >= data.size());
    REQUIRE(e->close().is_ok());
}

TEST_CASE("engine with a tier: FORMAT refuses a read-write open without it, or with another",
          "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    {
        auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
        make_file(*e, "f");
        REQUIRE(e->close().is_ok());
    }
    std::unique_ptr<Engine> e;
    Status st = Engine::open(options_for(dir.store(), ChunkingParams::fixed(4096)), &e);
    REQUIRE(st.err() == EINVAL);
    CHECK(st.message().find("keeps its segments in memory tier: mount it as memory tier") != std::string::npos);

    class OtherTier : public MemoryTier {
    public:
        std::string describe() const override { return "another tier"; }
    } other;
    st = Engine::open(tiered_options(dir.store(), &other, 1ull << 30), &e);
    REQUIRE(st.err() == EINVAL);
    CHECK(st.message().find("not in another tier") != std::string::npos);

    // Read-only tools (hiodsfs-stat, counters) open it without the tier.
    EngineOptions ro = options_for(dir.store(), ChunkingParams::fixed(4096));
    ro.read_only = true;
    e = open_engine(ro);
    SpaceCounters c;
    REQUIRE(e->counters(&c).is_ok());
    const nlohmann::json status = nlohmann::json::parse(e->status_json());
    CHECK(status.at("backend") == "memory tier");
    CHECK_FALSE(status.contains("tier"));  // its figures only while a tier is there
}

TEST_CASE("engine: stop() refuses every later change and fsync with EIO", "[engine][tier]") {
    TempDir dir;
    MemoryTier tier;
    auto e = open_engine(tiered_options(dir.store(), &tier, 1ull << 30));
    const Attr f = make_file(*e, "f");
    std::mt19937_64 rng(16);
    write_all(*e, f.ino, 0, random_bytes(rng, 8192));
    REQUIRE(e->fsync(f.ino, false).is_ok());
    e->stop("the lock on the store was lost");
    NewNode n;
    n.mode = S_IFREG | 0644;
    Attr a;
    Status st = e->create(kRootInode, "g", n, &a);
    REQUIRE(st.err() == EIO);
    CHECK(st.message() == "the lock on the store was lost");
    REQUIRE(e->fsync(f.ino, false).err() == EIO);
    CHECK(nlohmann::json::parse(e->status_json()).at("store_error") == "the lock on the store was lost");
}

}  // namespace
}  // namespace hiodsfs
