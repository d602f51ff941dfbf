// The store taken over by another holder (issue 43), over the memory tier,
// which fences a holder the store was taken from as the OSDs' blocklist
// does: such a holder's writes are refused whatever it believes, and the
// new holder's data stays intact; a stale cache_dir mounted again after
// another host went on with the store catches up without shadowing that
// host's segments (the tier's copy of each segment at or past its own
// frontier wins, and a local segment no record refers to is dropped, never
// uploaded); and hiodsfs-fsck finds the store clean after each.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "../store/memory_tier.h"
#include "engine/meta_tier.h"
#include "engine_test_util.h"
#include "fsck/fsck.h"

namespace hiodsfs {
namespace {

using namespace test;

EngineOptions held_by(const std::string& store, SegmentTier* tier) {
    EngineOptions o = options_for(store, ChunkingParams::fixed(4096));
    o.segments.tier = tier;
    o.background_threads = 0;
    // Nothing is committed but what a test fsyncs.
    o.commit_interval_ms = 3600 * 1000;
    o.commit_writes = 0;
    return o;
}

// hiodsfs-fsck's problems and notes of a store, checked as the next holder
// of the tier (as the tool does, holding the store's lock).
std::vector<std::string> tier_fsck(const std::string& store, MemoryTier& tier) {
    std::unique_ptr<MemoryTier> holder = tier.take_over();
    FsckOptions o;
    o.store = store;
    o.tier = holder.get();
    FsckReport r;
    Status st = run_fsck(o, &r);
    std::vector<std::string> out;
    if (!st) out.push_back("fsck: " + st.to_string());
    for (const auto& p : r.problems) out.push_back("fsck: " + p.what);
    for (const auto& n : r.notes)
        if (n.find("holds no chunk") != std::string::npos ||
            n.find("dead chunk bytes") != std::string::npos)
            out.push_back("fsck note: " + n);
    return out;
}

std::set<SegmentId> local_segments(const std::string& store) {
    std::set<SegmentId> out;
    for (const auto& e : std::filesystem::directory_iterator(store + "/segments")) {
        unsigned id = 0;
        if (e.path().extension() == ".seg" &&
            std::sscanf(e.path().filename().c_str(), "%08x", &id) == 1)
            out.insert(static_cast<SegmentId>(id));
    }
    return out;
}

TEST_CASE(
    "takeover: a holder the store was taken from is refused by the tier; the new holder's "
    "data is intact",
    "[engine][tier][takeover]") {
    TempDir a_dir, b_dir, c_dir;
    MemoryTier tier;
    std::mt19937_64 rng(43);
    const std::vector<std::uint8_t> a = random_bytes(rng, 300000), b = random_bytes(rng, 200000),
                                    late = random_bytes(rng, 100000);
    auto old_holder = open_engine(held_by(a_dir.store(), &tier));
    write_synced(*old_holder, "a", a);

    // Another host takes the store over (the first one's lease ran out
    // while it was paused) and goes on with it.
    std::unique_ptr<MemoryTier> second = tier.take_over();
    {
        auto e = open_engine(held_by(b_dir.store(), second.get()));
        CHECK(read_named(*e, "a") == a);
        write_synced(*e, "b", b);
        REQUIRE(e->close().is_ok());
    }
    // The first holder wakes up and writes on: nothing of it lands.
    const Attr f = make_file(*old_holder, "late");
    write_all(*old_holder, f.ino, 0, late);
    Status st = old_holder->fsync(f.ino, false);
    INFO(st.to_string());
    CHECK(st.err() == EIO);
    CHECK(st.message().find("fenced") != std::string::npos);
    abandon_engine(*old_holder);

    std::unique_ptr<MemoryTier> third = tier.take_over();
    {
        auto e = open_engine(held_by(c_dir.store(), third.get()));
        CHECK(read_named(*e, "a") == a);
        CHECK(read_named(*e, "b") == b);
        Attr none;
        CHECK(e->lookup(kRootInode, "late", &none).err() == ENOENT);
        REQUIRE(e->close().is_ok());
    }
    CHECK(tier_fsck(c_dir.store(), tier) == std::vector<std::string>{});
}

TEST_CASE(
    "takeover: a stale cache_dir mounted again catches up without shadowing the other "
    "host's segments",
    "[engine][tier][takeover]") {
    TempDir a_dir, b_dir;
    MemoryTier tier;
    std::mt19937_64 rng(44);
    const std::vector<std::uint8_t> a = random_bytes(rng, 100000),
                                    unsynced = random_bytes(rng, 6 << 20),
                                    b = random_bytes(rng, 1 << 20),
                                    after = random_bytes(rng, 50000);
    // Host A: "a" fsynced; then 6 MiB never fsynced, past a 4 MiB segment:
    // A's newest segment holds bytes no commit refers to, in A's directory
    // only. A is killed.
    {
        auto e = open_engine(held_by(a_dir.store(), &tier));
        write_synced(*e, "a", a);
        const Attr u = make_file(*e, "unsynced");
        write_all(*e, u.ino, 0, unsynced);
        abandon_engine(*e);
    }
    const std::set<SegmentId> a_local = local_segments(a_dir.store());
    REQUIRE(a_local.size() >= 2);
    const SegmentId a_newest = *a_local.rbegin();
    REQUIRE_FALSE(tier.holds(a_newest));

    // Host B takes the store over with an empty cache_dir, fsyncs "b" and is
    // killed before any snapshot.
    std::unique_ptr<MemoryTier> b_holder = tier.take_over();
    {
        auto e = open_engine(held_by(b_dir.store(), b_holder.get()));
        CHECK(read_named(*e, "a") == a);
        write_synced(*e, "b", b);
        abandon_engine(*e);
    }

    // A mounts its old cache_dir again.
    std::unique_ptr<MemoryTier> a_again = tier.take_over();
    std::vector<std::string> log;
    EngineOptions o = held_by(a_dir.store(), a_again.get());
    o.log = [&log](const std::string& line) { log.push_back(line); };
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "a") == a);
        CHECK(read_named(*e, "b") == b);
        Attr none;
        CHECK(e->lookup(kRootInode, "unsynced", &none).err() == ENOENT);
        write_synced(*e, "after", after);
        REQUIRE(e->close().is_ok());
    }
    std::string said;
    for (const auto& l : log) said += l + "\n";
    INFO(said);
    // A's segment that no record refers to is gone from its directory and
    // was never uploaded.
    CHECK(local_segments(a_dir.store()).count(a_newest) == 0);
    {
        std::lock_guard lock(tier.mu);
        auto it = tier.objects.find(a_newest);
        const bool a_bytes_there =
            it != tier.objects.end() &&
            std::search(it->second.begin(), it->second.end(), unsynced.end() - 4096,
                        unsynced.end()) != it->second.end();
        CHECK_FALSE(a_bytes_there);
    }
    CHECK(tier_fsck(a_dir.store(), tier) == std::vector<std::string>{});
    // And from the pool alone, everything.
    TempDir fresh;
    std::unique_ptr<MemoryTier> last = tier.take_over();
    auto e = open_engine(held_by(fresh.store(), last.get()));
    CHECK(read_named(*e, "a") == a);
    CHECK(read_named(*e, "b") == b);
    CHECK(read_named(*e, "after") == after);
    REQUIRE(e->close().is_ok());
}

TEST_CASE(
    "takeover: a tier written before holder epochs is read as it is; a snapshot "
    "supersedes its objects",
    "[engine][tier][takeover]") {
    TempDir a_dir, b_dir, c_dir;
    MemoryTier tier;
    std::mt19937_64 rng(45);
    const std::vector<std::uint8_t> a = random_bytes(rng, 200000), b = random_bytes(rng, 100000),
                                    c = random_bytes(rng, 50000);
    {
        auto e = open_engine(held_by(a_dir.store(), &tier));
        write_synced(*e, "a", a);
        REQUIRE(e->close().is_ok());  // a snapshot
    }
    {
        auto e = open_engine(held_by(a_dir.store(), &tier));
        write_synced(*e, "b", b);
        abandon_engine(*e);  // b in the journal only
    }
    // The names an older hiodsfs gave the objects: no epoch, manifest "meta".
    std::size_t renamed = 0;
    {
        std::lock_guard lock(tier.mu);
        std::map<std::string, std::vector<char>> older;
        for (auto& [name, bytes] : tier.named) {
            std::string to = name;
            if (name.rfind("journal.", 0) == 0 && name.size() == 8 + 16 + 9) {
                to = name.substr(0, 8 + 16);
            } else if (name.rfind("meta.", 0) == 0 && name.size() == 5 + 16 + 9 + 5) {
                to = name.substr(0, 5 + 16) + name.substr(5 + 16 + 9);
            } else if (name.rfind("manifest.", 0) == 0) {
                to = "meta";
            }
            renamed += to != name ? 1 : 0;
            older[to] = std::move(bytes);
        }
        tier.named = std::move(older);
    }
    REQUIRE(renamed >= 3);
    // Another host recovers the store from them, and goes on.
    std::unique_ptr<MemoryTier> second = tier.take_over();
    std::vector<std::string> log;
    EngineOptions o = held_by(b_dir.store(), second.get());
    o.log = [&log](const std::string& line) { log.push_back(line); };
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "a") == a);
        CHECK(read_named(*e, "b") == b);
        write_synced(*e, "c", c);
        abandon_engine(*e);
    }
    REQUIRE_FALSE(log.empty());
    CHECK(log.front().find(", 1 journal records replayed") != std::string::npos);
    // And another, from the old names and the new together; its snapshot
    // at close supersedes every old one.
    std::unique_ptr<MemoryTier> third = tier.take_over();
    {
        auto e = open_engine(held_by(c_dir.store(), third.get()));
        CHECK(read_named(*e, "a") == a);
        CHECK(read_named(*e, "b") == b);
        CHECK(read_named(*e, "c") == c);
        REQUIRE(e->close().is_ok());
    }
    {
        std::lock_guard lock(tier.mu);
        for (const auto& [name, bytes] : tier.named) {
            INFO(name);
            CHECK(name != "meta");
            if (name.rfind("meta.", 0) == 0) CHECK(name.size() == 5 + 16 + 9 + 5);
            CHECK(name.rfind("journal.", 0) != 0);  // all in the snapshot
        }
    }
    CHECK(tier_fsck(c_dir.store(), tier) == std::vector<std::string>{});
}

}  // namespace
}  // namespace hiodsfs
