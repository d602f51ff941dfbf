// StreamTable (engine/stream_table.h) alone: a stream made once per file,
// forgotten only when nobody holds, pins or locks it and it holds no
// unchunked bytes, and how flush and fsync take its lock beside a sweep.
#include "engine/stream_table.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>

using namespace hiodsfs;

namespace {

// A table whose pinned files the test sets.
struct Table {
    std::set<InodeId> pins;
    StreamTable streams{[this](InodeId ino) { return pins.count(ino) != 0; }};
};

}  // namespace

TEST_CASE("stream table: get makes a file's stream once, find makes none", "[stream-table]") {
    Table t;
    CHECK(t.streams.find(7) == nullptr);
    auto s = t.streams.get(7);
    REQUIRE(s != nullptr);
    CHECK(t.streams.get(7) == s);
    CHECK(t.streams.find(7) == s);
    CHECK(t.streams.get(8) != s);
    CHECK(t.streams.find(9) == nullptr);
    CHECK(t.streams.all().size() == 2);
}

TEST_CASE("stream table: all lists every stream, clear forgets them", "[stream-table]") {
    Table t;
    auto a = t.streams.get(1), b = t.streams.get(2), c = t.streams.get(3);
    auto all = t.streams.all();
    REQUIRE(all.size() == 3);
    for (auto& [ino, s] : all) CHECK(s == t.streams.find(ino));
    all.clear();
    t.streams.clear();
    CHECK(t.streams.all().empty());
    CHECK(t.streams.find(1) == nullptr);
    // A stream still held is not found again: get makes a new one.
    CHECK(t.streams.get(1) != a);
}

TEST_CASE("stream table: drop forgets a stream nobody holds", "[stream-table]") {
    Table t;
    (void)t.streams.get(5);
    t.streams.drop(5);
    CHECK(t.streams.find(5) == nullptr);
    t.streams.drop(6);  // none: nothing to do
    CHECK(t.streams.find(6) == nullptr);
}

TEST_CASE("stream table: drop keeps a stream someone holds", "[stream-table]") {
    Table t;
    auto s = t.streams.get(5);
    t.streams.drop(5);
    t.streams.drop(5, true);
    CHECK(t.streams.find(5) == s);
    s.reset();
    t.streams.drop(5);
    CHECK(t.streams.find(5) == nullptr);
}

TEST_CASE("stream table: drop keeps the stream of a pinned file", "[stream-table]") {
    Table t;
    Stream* s = t.streams.get(5).get();
    t.pins.insert(5);
    t.streams.drop(5, true);
    CHECK(t.streams.find(5).get() == s);
    t.pins.erase(5);
    t.streams.drop(5);
    CHECK(t.streams.find(5) == nullptr);
}

TEST_CASE("stream table: drop keeps a locked stream", "[stream-table]") {
    Table t;
    Stream* s = t.streams.get(5).get();
    {
        std::lock_guard<std::mutex> l(s->mu);
        t.streams.drop(5, true);
    }
    CHECK(t.streams.find(5).get() == s);
    t.streams.drop(5, true);
    CHECK(t.streams.find(5) == nullptr);
}

TEST_CASE("stream table: an active stream stays unless its file is gone", "[stream-table]") {
    Table t;
    Stream* s = t.streams.get(5).get();
    s->active = true;
    t.streams.drop(5);
    CHECK(t.streams.find(5).get() == s);
    t.streams.drop(5, true);
    CHECK(t.streams.find(5) == nullptr);
}

TEST_CASE("stream table: lock_for_sync of a file without a stream", "[stream-table]") {
    Table t;
    std::shared_ptr<Stream> s;
    std::unique_lock<std::mutex> l;
    CHECK(t.streams.lock_for_sync(5, &s, &l) == StreamTable::SyncLock::kNoStream);
    CHECK(s == nullptr);
    CHECK_FALSE(l.owns_lock());
    CHECK(t.streams.find(5) == nullptr);  // none made
}

TEST_CASE("stream table: lock_for_sync locks a free stream", "[stream-table]") {
    Table t;
    auto made = t.streams.get(5);
    std::shared_ptr<Stream> s;
    std::unique_lock<std::mutex> l;
    CHECK(t.streams.lock_for_sync(5, &s, &l) == StreamTable::SyncLock::kLocked);
    CHECK(s == made);
    CHECK(l.owns_lock());
    CHECK(l.mutex() == &made->mu);
}

TEST_CASE("stream table: lock_for_sync does not wait for a sweep", "[stream-table]") {
    Table t;
    auto made = t.streams.get(5);
    // The pass holds the lock and its sweep runs (sweep_seq odd).
    std::unique_lock<std::mutex> pass(made->mu);
    made->pass_at_lock = true;
    made->sweep_seq = 1;
    auto flush = std::async(std::launch::async, [&] {
        std::shared_ptr<Stream> s;
        std::unique_lock<std::mutex> l;
        auto how = t.streams.lock_for_sync(5, &s, &l);
        return std::make_pair(how, l.owns_lock());
    });
    // A flush that queued for the lock instead would wait until the pass
    // lets go: the deadline only ends such a wait.
    const bool answered = flush.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    pass.unlock();
    CHECK(answered);
    auto [how, locked] = flush.get();
    CHECK(how == StreamTable::SyncLock::kBesideSweep);
    CHECK_FALSE(locked);
}

TEST_CASE("stream table: lock_for_sync queues behind a writer", "[stream-table]") {
    Table t;
    auto made = t.streams.get(5);
    std::unique_lock<std::mutex> writer(made->mu);  // no sweep: a writer holds it
    auto flush = std::async(std::launch::async, [&] {
        std::shared_ptr<Stream> s;
        std::unique_lock<std::mutex> l;
        auto how = t.streams.lock_for_sync(5, &s, &l);
        const bool locked = l.owns_lock() && l.mutex() == &made->mu;
        return std::make_pair(how, locked);
    });
    writer.unlock();
    auto [how, locked] = flush.get();
    CHECK(how == StreamTable::SyncLock::kLocked);
    CHECK(locked);
}
