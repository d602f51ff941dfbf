// FaultInjectionEnv: injected write and sync failures, and the power-loss
// model of drop_unsynced().

#include "store/fault_env.h"

#include <set>
#include <thread>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::TempDir;

std::string as_string(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }

std::string read_all(const std::string& path) { return as_string(test::slurp(path)); }

Status write_str(File* f, const std::string& s, std::uint64_t offset) {
    return f->pwrite(s.data(), s.size(), offset);
}

TEST_CASE("fault env: passes I/O through and counts calls", "[fault_env]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    std::unique_ptr<File> f;
    REQUIRE_OK(env.open(tmp / "a", OpenMode::kReadWrite, &f));
    REQUIRE_OK(write_str(f.get(), "hello", 0));
    REQUIRE_OK(write_str(f.get(), " world", 5));
    REQUIRE_OK(f->sync());
    REQUIRE_OK(env.sync_dir(tmp.path()));
    REQUIRE(env.write_count() == 2);
    REQUIRE(env.sync_count() == 2);
    REQUIRE(env.injected_faults() == 0);
    REQUIRE(read_all(tmp / "a") == "hello world");
    char buf[16];
    std::size_t got = 0;
    REQUIRE_OK(f->pread(buf, sizeof buf, 0, &got));
    REQUIRE(std::string(buf, got) == "hello world");
}

TEST_CASE("fault env: write faults fire at the chosen write", "[fault_env]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    std::unique_ptr<File> f;
    REQUIRE_OK(env.open(tmp / "a", OpenMode::kReadWrite, &f));
    REQUIRE_OK(write_str(f.get(), "0123", 0));

    SECTION("ENOSPC at the third write from now, once") {
        env.fail_write_at(2, WriteFault::kNoSpace);
        REQUIRE_OK(write_str(f.get(), "aaaa", 4));
        REQUIRE_OK(write_str(f.get(), "bbbb", 8));
        Status st = write_str(f.get(), "cccc", 12);
        REQUIRE(st.err() == ENOSPC);
        REQUIRE(env.last_injected_fault() == st.message());
        REQUIRE(st.message().find(tmp / "a") != std::string::npos);
        REQUIRE(read_all(tmp / "a") == "0123aaaabbbb");  // nothing written
        REQUIRE_OK(write_str(f.get(), "dddd", 12));      // one-shot: next one works
        REQUIRE(env.injected_faults() == 1);
    }
    SECTION("EIO, permanent until cleared") {
        env.fail_write_at(0, WriteFault::kIoError, true);
        for (int i = 0; i < 3; ++i) REQUIRE(write_str(f.get(), "xxxx", 4).err() == EIO);
        REQUIRE(read_all(tmp / "a") == "0123");
        REQUIRE(env.injected_faults() == 3);
        env.clear_faults();
        REQUIRE_OK(write_str(f.get(), "xxxx", 4));
        REQUIRE(read_all(tmp / "a") == "0123xxxx");
    }
    SECTION("short write: half the bytes land, then EIO") {
        env.fail_write_at(0, WriteFault::kShortWrite);
        Status st = write_str(f.get(), "abcdefgh", 4);
        REQUIRE(st.err() == EIO);
        REQUIRE(read_all(tmp / "a") == "0123abcd");
    }
    SECTION("sync faults, and which call got the last one") {
        REQUIRE(env.last_injected_fault().empty());
        env.fail_sync_at(1, ENOSPC);
        REQUIRE_OK(f->sync());
        REQUIRE(f->sync().err() == ENOSPC);
        REQUIRE(env.last_injected_fault() == "fdatasync " + (tmp / "a") + ": injected fault");
        REQUIRE_OK(env.sync_dir(tmp.path()));
        env.fail_sync_at(0, EIO, true);
        REQUIRE(env.sync_dir(tmp.path()).err() == EIO);
        REQUIRE(env.last_injected_fault().rfind("fsync directory ", 0) == 0);
        REQUIRE(f->sync().err() == EIO);
        REQUIRE(env.last_injected_fault().rfind("fdatasync ", 0) == 0);
        env.clear_faults();
        REQUIRE_OK(f->sync());
    }
}

TEST_CASE("fault env: drop_all_unsynced keeps exactly what was synced", "[fault_env]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    std::unique_ptr<File> f;

    SECTION("a new file needs sync_dir to survive, even with its data synced") {
        REQUIRE_OK(env.open(tmp / "new", OpenMode::kCreateNew, &f));
        REQUIRE_OK(write_str(f.get(), "data", 0));
        REQUIRE_OK(f->sync());
        f.reset();
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(!env.exists(tmp / "new"));
        REQUIRE(!std::filesystem::exists(tmp / "new"));
    }
    SECTION("synced bytes stay, later appends go") {
        REQUIRE_OK(env.open(tmp / "f", OpenMode::kCreateNew, &f));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE_OK(write_str(f.get(), "durable", 0));
        REQUIRE_OK(f->sync());
        REQUIRE_OK(write_str(f.get(), "-lost", 7));
        REQUIRE(env.unsynced_bytes() == 5);
        f.reset();
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(read_all(tmp / "f") == "durable");
        REQUIRE(env.unsynced_bytes() == 0);
    }
    SECTION("overwrites and truncates of synced bytes are undone") {
        REQUIRE_OK(env.open(tmp / "f", OpenMode::kCreateNew, &f));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE_OK(write_str(f.get(), "AAAAAAAA", 0));
        REQUIRE_OK(f->sync());
        REQUIRE_OK(write_str(f.get(), "BBBBBB", 4));  // overwrites 4, extends by 2
        REQUIRE_OK(f->truncate(2));
        REQUIRE_OK(write_str(f.get(), "CC", 6));
        REQUIRE(read_all(tmp / "f") == std::string("AA\0\0\0\0CC", 8));
        f.reset();
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(read_all(tmp / "f") == "AAAAAAAA");
    }
    SECTION("a handle from before the crash is dead") {
        REQUIRE_OK(env.open(tmp / "f", OpenMode::kReadWrite, &f));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(write_str(f.get(), "x", 0).err() == EIO);
        REQUIRE(f->sync().err() == EIO);
        char c;
        std::size_t got;
        REQUIRE(f->pread(&c, 1, 0, &got).err() == EIO);
        std::unique_ptr<File> g;
        REQUIRE_OK(env.open(tmp / "f", OpenMode::kReadWrite, &g));
        REQUIRE_OK(write_str(g.get(), "x", 0));  // the Env itself works again
    }
    SECTION("faults are cleared by a crash") {
        env.fail_write_at(0, WriteFault::kIoError, true);
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE_OK(env.open(tmp / "f", OpenMode::kReadWrite, &f));
        REQUIRE_OK(write_str(f.get(), "x", 0));
    }
}

TEST_CASE("fault env: directory entries need sync_dir", "[fault_env]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    std::unique_ptr<File> f;
    REQUIRE_OK(env.open(tmp / "a", OpenMode::kCreateNew, &f));
    REQUIRE_OK(write_str(f.get(), "AAA", 0));
    REQUIRE_OK(f->sync());
    REQUIRE_OK(env.open(tmp / "b", OpenMode::kCreateNew, &f));
    REQUIRE_OK(write_str(f.get(), "BBB", 0));
    REQUIRE_OK(f->sync());
    REQUIRE_OK(env.sync_dir(tmp.path()));
    f.reset();

    SECTION("rename over an existing file is undone, and the old target returns") {
        REQUIRE_OK(env.rename(tmp / "a", tmp / "b"));
        REQUIRE(!env.exists(tmp / "a"));
        REQUIRE(read_all(tmp / "b") == "AAA");
        std::vector<std::string> names;
        REQUIRE_OK(env.list_dir(tmp.path(), &names));
        REQUIRE(names == std::vector<std::string>{"b"});  // the kept copy is hidden
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(read_all(tmp / "a") == "AAA");
        REQUIRE(read_all(tmp / "b") == "BBB");
        REQUIRE(std::distance(std::filesystem::directory_iterator(tmp.path()),
                              std::filesystem::directory_iterator()) == 2);
    }
    SECTION("a synced rename stays, and the replaced file is gone for good") {
        REQUIRE_OK(env.rename(tmp / "a", tmp / "b"));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE(std::distance(std::filesystem::directory_iterator(tmp.path()),
                              std::filesystem::directory_iterator()) == 1);
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(!env.exists(tmp / "a"));
        REQUIRE(read_all(tmp / "b") == "AAA");
    }
    SECTION("an unlink is undone, a synced unlink is not") {
        REQUIRE_OK(env.unlink(tmp / "a"));
        REQUIRE(!env.exists(tmp / "a"));
        REQUIRE(env.unlink(tmp / "a").err() == ENOENT);
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(read_all(tmp / "a") == "AAA");

        REQUIRE_OK(env.unlink(tmp / "a"));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(!std::filesystem::exists(tmp / "a"));
    }
    SECTION("only the synced directory's entries become durable") {
        REQUIRE_OK(env.mkdir(tmp / "sub"));
        REQUIRE_OK(env.open(tmp / "sub/x", OpenMode::kCreateNew, &f));
        REQUIRE_OK(env.open(tmp / "c", OpenMode::kCreateNew, &f));
        f.reset();
        REQUIRE_OK(env.sync_dir(tmp / "sub/"));  // spelling does not matter
        REQUIRE_OK(env.drop_all_unsynced());
        REQUIRE(env.exists(tmp / "sub/x"));
        REQUIRE(!env.exists(tmp / "c"));
    }
}

TEST_CASE("fault env: drop_unsynced keeps a random prefix of unsynced writes", "[fault_env]") {
    TempDir tmp;
    std::mt19937_64 rng(7);
    const auto synced = test::random_bytes(rng, 1000);
    std::set<std::size_t> lengths;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        FaultInjectionEnv env(Env::posix());
        env.set_forward_syncs(false);
        const std::string path = tmp / ("f" + std::to_string(seed));
        std::unique_ptr<File> f;
        REQUIRE_OK(env.open(path, OpenMode::kCreateNew, &f));
        REQUIRE_OK(env.sync_dir(tmp.path()));
        REQUIRE_OK(f->pwrite(synced.data(), synced.size(), 0));
        REQUIRE_OK(f->sync());
        // Unsynced: a few appends and an overwrite of synced bytes.
        std::vector<char> expect = synced;
        for (int i = 0; i < 4; ++i) {
            auto more = test::random_bytes(rng, 300);
            REQUIRE_OK(f->pwrite(more.data(), more.size(), expect.size()));
            expect.insert(expect.end(), more.begin(), more.end());
        }
        REQUIRE_OK(f->pwrite("ZZZZ", 4, 10));
        f.reset();
        REQUIRE_OK(env.drop_unsynced(seed));

        const auto got = test::slurp(path);
        INFO("seed " << seed << ", length " << got.size());
        REQUIRE(got.size() >= synced.size());
        REQUIRE(got.size() <= expect.size());
        // Bytes 10..13 hold either the synced bytes or a prefix of "ZZZZ"
        // (the overwrite may be torn too); everything else matches what was
        // written, so the appended bytes that survived are a prefix.
        REQUIRE(std::equal(got.begin(), got.begin() + 10, synced.begin()));
        bool pattern = false;
        for (int z = 0; z <= 4 && !pattern; ++z) {
            pattern = true;
            for (int j = 0; j < 4; ++j) {
                const char want = j < z ? 'Z' : synced[static_cast<std::size_t>(10 + j)];
                pattern = pattern && got[static_cast<std::size_t>(10 + j)] == want;
            }
        }
        REQUIRE(pattern);
        if (!std::equal(got.begin() + 10, got.begin() + 14, synced.begin() + 10)) {
            REQUIRE(got.size() == expect.size());  // in order: it was the last write
        }
        REQUIRE(std::equal(got.begin() + 14, got.end(), expect.begin() + 14));
        lengths.insert(got.size());
    }
    // Both extremes and torn lengths in between happen across seeds.
    REQUIRE(lengths.count(2200) == 1);
    REQUIRE(lengths.size() > 20);
}

TEST_CASE("fault env: concurrent writers on separate files", "[fault_env]") {
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    env.set_forward_syncs(false);
    constexpr int kThreads = 4;
    constexpr int kWrites = 200;
    std::vector<std::thread> threads;
    std::vector<Status> results(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::unique_ptr<File> f;
            Status st = env.open(tmp / ("t" + std::to_string(t)), OpenMode::kCreateNew, &f);
            for (int i = 0; st && i < kWrites; ++i) {
                const char c = static_cast<char>('a' + t);
                st = f->pwrite(&c, 1, static_cast<std::uint64_t>(i));
                if (st && i % 50 == 49) st = f->sync();
            }
            results[static_cast<std::size_t>(t)] = st;
        });
    }
    for (auto& th : threads) th.join();
    for (const Status& st : results) REQUIRE_OK(st);
    REQUIRE(env.write_count() == kThreads * kWrites);
    REQUIRE(env.sync_count() == kThreads * (kWrites / 50));
    REQUIRE_OK(env.sync_dir(tmp.path()));
    REQUIRE(env.unsynced_bytes() == 0);
    REQUIRE_OK(env.drop_all_unsynced());
    for (int t = 0; t < kThreads; ++t) {
        REQUIRE(read_all(tmp / ("t" + std::to_string(t))) ==
                std::string(kWrites, static_cast<char>('a' + t)));
    }
}

}  // namespace
}  // namespace hiodsfs
