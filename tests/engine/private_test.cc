// Store files are private to the store's owner: segments hold file contents,
// so whatever the store directory's mode and the umask, files are 0600 and
// subdirectories 0700, and a read-write open tightens a store made looser.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

// Restores the umask when the test ends, however it ends.
struct Umask {
    mode_t old;
    explicit Umask(mode_t m) : old(::umask(m)) {}
    ~Umask() { ::umask(old); }
};

// Every file and directory of the store that is more open than 0600/0700,
// as "path mode" lines (empty when all are private).
std::vector<std::string> loose_entries(const std::string& store) {
    std::vector<std::string> loose;
    for (const auto& e : std::filesystem::recursive_directory_iterator(store)) {
        const std::string p = e.path().string();
        const mode_t m = mode_of(p);
        char octal[16];
        std::snprintf(octal, sizeof octal, " %04o", static_cast<unsigned>(m));
        if (m & 077) loose.push_back(p + octal);
    }
    return loose;
}

// Writes a file through an engine with status publishing on and waits for
// the first status.json, so that every kind of store file exists.
void use_store(const std::string& store) {
    EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
    o.background_commit = true;
    o.publish_status = true;
    o.control.interval_ms = 10;
    auto e = open_engine(o);
    Attr a = make_file(*e, "f");
    std::mt19937_64 rng(1);
    write_all(*e, a.ino, 0, random_bytes(rng, 64 * 1024));
    REQUIRE(e->sync_all().is_ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(store + "/status.json") && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(std::filesystem::exists(store + "/status.json"));
    REQUIRE(e->close().is_ok());
}

}  // namespace

TEST_CASE("store files are 0600 and directories 0700 whatever the umask and the store's mode",
          "[engine][private]") {
    Umask um(0);
    TempDir t;
    SECTION("in a store directory that already existed as 0755") {
        REQUIRE(::mkdir(t.store().c_str(), 0755) == 0);
        REQUIRE(mode_of(t.store()) == 0755);
        use_store(t.store());
        CHECK(mode_of(t.store()) == 0755);  // the user's own directory keeps its mode
    }
    SECTION("in a store directory the engine creates") {
        use_store(t.store());
        CHECK(mode_of(t.store()) == 0700);
    }
    for (const char* f : {"/FORMAT", "/lock", "/status.json", "/meta/data.mdb", "/segments/00000001.seg"})
        CHECK(mode_of(t.store() + f) == 0600);
    CHECK(mode_of(t.store() + "/meta") == 0700);
    CHECK(mode_of(t.store() + "/segments") == 0700);
    CHECK(loose_entries(t.store()) == std::vector<std::string>{});
}

TEST_CASE("a read-write open makes a loose store's files private; a read-only one changes nothing",
          "[engine][private]") {
    Umask um(0);
    TempDir t;
    REQUIRE(::mkdir(t.store().c_str(), 0755) == 0);
    use_store(t.store());
    // As an older hiodsfs, or a careless cp, left it.
    for (const auto& e : std::filesystem::recursive_directory_iterator(t.store()))
        REQUIRE(::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644) == 0);
    REQUIRE(!loose_entries(t.store()).empty());

    EngineOptions ro = options_for(t.store(), ChunkingParams::fixed(4096));
    ro.read_only = true;
    ro.background_commit = false;
    REQUIRE(open_engine(ro)->close().is_ok());
    CHECK(mode_of(t.store() + "/segments/00000001.seg") == 0644);
    CHECK(mode_of(t.store() + "/meta") == 0755);

    EngineOptions rw = options_for(t.store(), ChunkingParams::fixed(4096));
    REQUIRE(open_engine(rw)->close().is_ok());
    CHECK(loose_entries(t.store()) == std::vector<std::string>{});
    CHECK(mode_of(t.store() + "/segments/00000001.seg") == 0600);
    CHECK(mode_of(t.store() + "/meta") == 0700);
    CHECK(mode_of(t.store() + "/FORMAT") == 0600);
    CHECK(mode_of(t.store()) == 0755);
}
