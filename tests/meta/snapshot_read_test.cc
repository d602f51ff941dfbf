// Reads that do not wait for writers: begin_read() on a writable store
// reads the last committed state through an LMDB read transaction, with the
// operations the open group has folded in laid over it, while another
// thread holds the store for an operation or a group commit.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;
using Model = std::map<std::string, std::string>;

// A one-shot gate one thread waits at until another opens it.
class Gate {
public:
    void open() {
        std::lock_guard<std::mutex> l(mu_);
        open_ = true;
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return open_; });
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
};

// For threads other than the test's (Catch2 asserts on one thread only):
// "error" if the read failed.
std::optional<std::string> read_key_quietly(MetaStore& m, Db db, const std::string& key) {
    std::unique_ptr<Txn> t;
    std::string_view v;
    bool found = false;
    if (!m.begin_read(&t) || !t->get(db, key, &v, &found)) return std::string("error");
    return found ? std::optional<std::string>(std::string(v)) : std::nullopt;
}

Model walk_quietly(MetaStore& m, Db db) {
    Model out;
    std::unique_ptr<Txn> t;
    if (!m.begin_read(&t)) return Model{{"error", ""}};
    Cursor c = t->cursor(db);
    for (bool ok = c.first(); ok; ok = c.next()) out.emplace(std::string(c.key()), std::string(c.value()));
    if (!c.status()) return Model{{"error", ""}};
    return out;
}

std::optional<std::string> read_key(MetaStore& m, Db db, const std::string& key) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin_read(&t).is_ok());
    std::string_view v;
    bool found = false;
    REQUIRE(t->get(db, key, &v, &found).is_ok());
    return found ? std::optional<std::string>(std::string(v)) : std::nullopt;
}

// The whole database as a read operation's cursor walks it forwards.
Model walk_forward(Txn& t, Db db) {
    Model out;
    Cursor c = t.cursor(db);
    std::string last;
    for (bool ok = c.first(); ok; ok = c.next()) {
        REQUIRE((out.empty() || std::string(c.key()) > last));
        last = std::string(c.key());
        out.emplace(last, std::string(c.value()));
    }
    REQUIRE(c.status().is_ok());
    return out;
}

Model walk_backward(Txn& t, Db db) {
    Model out;
    Cursor c = t.cursor(db);
    std::string last;
    for (bool ok = c.last(); ok; ok = c.prev()) {
        REQUIRE((out.empty() || std::string(c.key()) < last));
        last = std::string(c.key());
        out.emplace(last, std::string(c.value()));
    }
    REQUIRE(c.status().is_ok());
    return out;
}

}  // namespace

TEST_CASE("a read does not wait for an operation in progress, and sees it once it is folded in", "[meta][snapshot]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kInodes, key_u64(1), "old").is_ok());
        REQUIRE(t->commit().is_ok());
    }
    std::unique_ptr<Txn> writer;
    REQUIRE(m->begin(&writer).is_ok());
    REQUIRE(writer->put(Db::kInodes, key_u64(1), "new").is_ok());
    REQUIRE(writer->put(Db::kInodes, key_u64(2), "added").is_ok());
    // The operation holds the store: a read from another thread does not
    // wait for it, and sees the state before it.
    auto reading = std::async(std::launch::async, [&] {
        return std::make_pair(read_key_quietly(*m, Db::kInodes, key_u64(1)),
                              read_key_quietly(*m, Db::kInodes, key_u64(2)));
    });
    const bool finished = reading.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    if (!finished) writer.reset();  // let the blocked read go before failing
    REQUIRE(finished);
    const auto [before1, before2] = reading.get();
    CHECK(before1 == std::optional<std::string>("old"));
    CHECK_FALSE(before2.has_value());
    REQUIRE(writer->commit().is_ok());
    writer.reset();
    CHECK(read_key(*m, Db::kInodes, key_u64(1)) == std::optional<std::string>("new"));
    CHECK(read_key(*m, Db::kInodes, key_u64(2)) == std::optional<std::string>("added"));
}

TEST_CASE("an operation that rolls back is never seen by a read", "[meta][snapshot]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kXattrs, "k", "kept").is_ok());
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kXattrs, "k", "undone").is_ok());
        REQUIRE(t->del(Db::kXattrs, "k").is_ok());
        REQUIRE(t->put(Db::kXattrs, "j", "undone").is_ok());
        // not committed: rolled back as it ends
    }
    CHECK(read_key(*m, Db::kXattrs, "k") == std::optional<std::string>("kept"));
    CHECK_FALSE(read_key(*m, Db::kXattrs, "j").has_value());
    REQUIRE(m->commit_group(nullptr).is_ok());
    CHECK(read_key(*m, Db::kXattrs, "k") == std::optional<std::string>("kept"));
}

TEST_CASE("a read runs while a group commits, and sees what the group holds", "[meta][snapshot]") {
    TempDir dir;
    Gate in_commit, let_commit;
    MetaStoreOptions o;
    std::atomic<bool> hold{false};
    o.commit_fault = [&] {
        if (hold.load()) {
            in_commit.open();
            let_commit.wait();
        }
        return 0;
    };
    // 1 GiB as in the other tests: ThreadSanitizer's layout often has no
    // room for the default map of 1 TiB (ENOMEM in about 1 run of 3).
    o.map_bytes = 1ull << 30;
    std::unique_ptr<MetaStore> m;
    const Status opened = MetaStore::open(dir.meta(), o, &m);
    INFO(opened.to_string());
    REQUIRE(opened.is_ok());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kDirents, "a", "committed").is_ok());
        REQUIRE(t->commit().is_ok());
    }
    REQUIRE(m->commit_group(nullptr).is_ok());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kDirents, "a", "in the group").is_ok());
        REQUIRE(t->put(Db::kDirents, "b", "in the group").is_ok());
        REQUIRE(t->commit().is_ok());
    }
    hold = true;
    auto committing = std::async(std::launch::async, [&] { return m->commit_group(nullptr); });
    in_commit.wait();  // the committer holds the store now
    auto reading = std::async(std::launch::async, [&] { return walk_quietly(*m, Db::kDirents); });
    const bool finished = reading.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    let_commit.open();
    REQUIRE(finished);
    CHECK(reading.get() == Model{{"a", "in the group"}, {"b", "in the group"}});
    REQUIRE(committing.get().is_ok());
    hold = false;
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    CHECK(walk_forward(*t, Db::kDirents) == Model{{"a", "in the group"}, {"b", "in the group"}});
}

TEST_CASE("a read's gets and cursors show the committed state with the open group's operations over it",
          "[meta][snapshot]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::mt19937_64 rng(GENERATE(1u, 2u, 3u, 4u));
    // An ordered overlay (extents) and a hashed one (chunk records), whose
    // cursors walk a sorted copy.
    const Db db = GENERATE(Db::kExtents, Db::kChunks);
    Model model;
    auto key_of = [](std::uint64_t i) { return key_u64(i * 3); };  // gaps, so seeks fall between keys
    constexpr std::uint64_t kKeys = 300;
    for (int round = 0; round < 40; ++round) {
        // An operation of random puts and deletes, committed or rolled back.
        {
            Model next = model;
            std::unique_ptr<Txn> t;
            REQUIRE(m->begin(&t).is_ok());
            const int changes = 1 + static_cast<int>(rng() % 40);
            for (int i = 0; i < changes; ++i) {
                const std::string k = key_of(rng() % kKeys);
                if (rng() % 3 == 0) {
                    REQUIRE(t->del(db, k).is_ok());
                    next.erase(k);
                } else {
                    const std::string v = "v" + std::to_string(rng() % 1000) + std::string(rng() % 300, 'x');
                    REQUIRE(t->put(db, k, v).is_ok());
                    next[k] = v;
                }
            }
            if (rng() % 5 != 0) {
                REQUIRE(t->commit().is_ok());
                model = std::move(next);
            }
        }
        if (rng() % 6 == 0) REQUIRE(m->commit_group(nullptr).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin_read(&t).is_ok());
        CHECK(walk_forward(*t, db) == model);
        CHECK(walk_backward(*t, db) == model);
        // Gets, and seeks with a step either way from where they land.
        for (int probe = 0; probe < 30; ++probe) {
            const std::uint64_t at = rng() % (kKeys * 3 + 6);
            const std::string k = key_u64(at);
            std::string_view v;
            bool found = false;
            REQUIRE(t->get(db, k, &v, &found).is_ok());
            auto it = model.find(k);
            CHECK(found == (it != model.end()));
            if (found && it != model.end()) CHECK(v == it->second);
            Cursor c = t->cursor(db);
            auto lb = model.lower_bound(k);
            const bool sought = c.seek(k);
            REQUIRE(sought == (lb != model.end()));
            if (!sought) continue;
            CHECK(c.key() == lb->first);
            CHECK(c.value() == lb->second);
            if (rng() % 2 == 0) {
                auto nx = std::next(lb);
                CHECK(c.next() == (nx != model.end()));
                if (nx != model.end()) CHECK(c.key() == nx->first);
            } else {
                const bool has_prev = lb != model.begin();
                CHECK(c.prev() == has_prev);
                if (has_prev) {
                    CHECK(c.key() == std::prev(lb)->first);
                    CHECK(c.value() == std::prev(lb)->second);
                    // And back again: the cursor turns where it stands.
                    CHECK(c.next());
                    CHECK(c.key() == lb->first);
                }
            }
        }
    }
}

TEST_CASE("readers see whole operations while writers and group commits run beside them", "[meta][snapshot]") {
    // Each operation moves an amount between two of kAccounts keys, so every
    // state an operation leaves sums to the same total; a read that saw half
    // an operation, or a snapshot without the group laid over it, would not.
    TempDir dir;
    auto m = open_meta(dir.meta());
    constexpr int kAccounts = 64;
    constexpr std::int64_t kStart = 1000;
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        for (int i = 0; i < kAccounts; ++i) REQUIRE(t->put(Db::kInodes, key_u64(i), std::to_string(kStart)).is_ok());
        REQUIRE(t->commit().is_ok());
    }
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::atomic<std::uint64_t> reads{0}, moves{0};
    auto writer = [&](unsigned seed) {
        std::mt19937 rng(seed);
        while (!stop.load()) {
            std::unique_ptr<Txn> t;
            if (!m->begin(&t)) {
                ++bad;
                return;
            }
            const int from = static_cast<int>(rng() % kAccounts), to = static_cast<int>(rng() % kAccounts);
            std::string_view v;
            bool found = false;
            if (!t->get(Db::kInodes, key_u64(from), &v, &found) || !found) {
                ++bad;
                return;
            }
            const std::int64_t a = std::stoll(std::string(v));
            const std::int64_t amount = static_cast<std::int64_t>(rng() % 50);
            if (!t->put(Db::kInodes, key_u64(from), std::to_string(a - amount))) {
                ++bad;
                return;
            }
            if (!t->get(Db::kInodes, key_u64(to), &v, &found) || !found) {
                ++bad;
                return;
            }
            const std::int64_t b = std::stoll(std::string(v));
            if (!t->put(Db::kInodes, key_u64(to), std::to_string(b + amount))) {
                ++bad;
                return;
            }
            // A rolled-back move (one in eight) must never show.
            if (rng() % 8 != 0 && t->commit()) ++moves;
        }
    };
    auto reader = [&](bool by_cursor) {
        while (!stop.load()) {
            std::unique_ptr<Txn> t;
            if (!m->begin_read(&t)) {
                ++bad;
                return;
            }
            std::int64_t sum = 0;
            int n = 0;
            if (by_cursor) {
                Cursor c = t->cursor(Db::kInodes);
                for (bool ok = c.first(); ok; ok = c.next(), ++n) sum += std::stoll(std::string(c.value()));
            } else {
                for (int i = 0; i < kAccounts; ++i) {
                    std::string_view v;
                    bool found = false;
                    if (!t->get(Db::kInodes, key_u64(i), &v, &found) || !found) break;
                    sum += std::stoll(std::string(v));
                    ++n;
                }
            }
            if (n != kAccounts || sum != kAccounts * kStart) ++bad;
            ++reads;
        }
    };
    std::vector<std::thread> threads;
    threads.emplace_back(writer, 1u);
    threads.emplace_back(writer, 2u);
    threads.emplace_back(reader, true);
    threads.emplace_back(reader, false);
    threads.emplace_back([&] {
        while (!stop.load()) {
            if (!m->commit_group(nullptr)) ++bad;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    stop = true;
    for (auto& th : threads) th.join();
    CHECK(bad.load() == 0);
    CHECK(moves.load() > 0);
    CHECK(reads.load() > 0);
    INFO("moves " << moves.load() << ", reads " << reads.load());
    // And the committed state after a reopen is the same total.
    REQUIRE(m->commit_group(nullptr).is_ok());
    m.reset();
    m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    std::int64_t sum = 0;
    for (const auto& [k, v] : walk_forward(*t, Db::kInodes)) sum += std::stoll(v);
    CHECK(sum == kAccounts * kStart);
}

TEST_CASE("a read that does not wait refuses the fingerprint index, which has no overlay", "[meta][snapshot]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        REQUIRE(t->put(Db::kFingerprints, key_u64(1), "bucket").is_ok());
        REQUIRE(t->commit().is_ok());
    }
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin_read(&t).is_ok());
    std::string_view v;
    bool found = false;
    CHECK(t->get(Db::kFingerprints, key_u64(1), &v, &found).err() == EINVAL);
    {
        Cursor c = t->cursor(Db::kFingerprints);
        CHECK_FALSE(c.first());
        CHECK(c.status().err() == EINVAL);
    }
    t.reset();
    // Read as operations read, it is there.
    REQUIRE(m->begin_read(&t, MetaStore::ReadFrom::kGroup).is_ok());
    REQUIRE(t->get(Db::kFingerprints, key_u64(1), &v, &found).is_ok());
    CHECK((found && v == "bucket"));
}
