// RadosTier's own threads against a cluster in memory (memory_rados.h),
// which ThreadSanitizer sees into (it cannot see into Debian's librados,
// so tests/rados/ never runs under it): the lease renewer beside writes,
// reads, commits' pushes and the segment store's uploader; a lease that
// lapses, one taken back on a new connection, and one that another holder
// had meanwhile; another holder that breaks the lock and fences this one;
// the release at close. The rules are those tests/rados/rados_fence_test.cc
// checks on a real cluster. Assertions are on what happened, never on how
// long it took: the leases are short (4 s, the shortest rados_lease the
// daemon takes, and 6 s) only to keep the cases short.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../skip.h"
#include "hiodsfs/segment_store.h"
#include "store_test_util.h"

#ifdef HIODSFS_HAVE_RADOS
#include "memory_rados.h"
#include "store/rados_holder.h"
#include "store/rados_tier.h"

namespace hiodsfs::rados_memory_test {
namespace {

using test::MemoryRados;
using test::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kStore = "st";
constexpr const char* kLockName = "hiodsfs";

// Polls until `done` holds or a generous deadline passes; whether it held.
bool eventually(const std::function<bool()>& done, std::chrono::seconds within = 60s) {
    const auto until = Clock::now() + within;
    while (!done()) {
        if (Clock::now() > until) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

std::unique_ptr<RadosTier> open_tier(const MemoryRados& cluster, std::chrono::seconds timeout) {
    std::unique_ptr<RadosTier> tier;
    REQUIRE_OK(RadosTier::open(cluster.options(timeout), kStore, &tier));
    return tier;
}

// The store's holder record as the cluster has it.
HolderRecord record_in(const MemoryRados& cluster, const RadosTier& tier) {
    std::string text;
    REQUIRE(cluster.object(tier.lock_object(), &text));
    HolderRecord r;
    REQUIRE(decode_holder(text, &r));
    return r;
}

// Breaks every hold of the store's lock (ENOENT: already gone).
void break_locks(RadosTier& tier) {
    std::vector<RadosLocker> holders;
    REQUIRE_OK(tier.lockers(&holders));
    for (const RadosLocker& h : holders) {
        const Status broke = tier.break_lock(h);
        if (!broke) REQUIRE(broke.err() == ENOENT);
    }
}

// Counts the calls of a callback, and keeps the last message given.
struct Calls {
    std::atomic<int> count{0};
    std::atomic<bool> called{false};  // set after count, once it is 1
    std::mutex mu;
    std::string last;
    std::function<void(const std::string&)> callback() {
        return [this](const std::string& why) {
            {
                std::lock_guard guard(mu);
                last = why;
            }
            ++count;
            called = true;
        };
    }
    std::string message() {
        std::lock_guard guard(mu);
        return last;
    }
};

// A tier of the cluster's store holding its lock as `cookie` for `lease`
// (operations time out after 1 s), which tells `lost` when it loses it.
std::unique_ptr<RadosTier> locked_tier(const MemoryRados& cluster, const std::string& cookie,
                                       std::chrono::seconds lease, Calls& lost) {
    auto tier = open_tier(cluster, 1s);
    REQUIRE_OK(tier->lock(cookie, lease, lost.callback()));
    return tier;
}

// One try of a writer: its number, whether it began after the test's mark
// was set, and what it returned.
struct Attempt {
    int n = 0;
    bool after_mark = false;
    Status result;
};

// A thread that tries `attempt` again and again until stopped, and keeps
// every try. The mark is a moment the test names (a lease lost, a store
// taken over); tries that began after it are told apart.
class Repeater {
public:
    Repeater(const std::atomic<bool>& mark, std::function<Status(int)> attempt)
        : mark_(mark), attempt_(std::move(attempt)), thread_([this] { run(); }) {}
    ~Repeater() { stop(); }
    void stop() {
        stopping_ = true;
        if (thread_.joinable()) thread_.join();
    }
    // Tries ended that began after the mark; those that worked.
    int after_mark() const { return after_mark_.load(); }
    int worked() const { return worked_.load(); }
    int worked_after_mark() const { return worked_after_mark_.load(); }
    // The first try that failed ("" while none did).
    std::string first_failure() const {
        std::lock_guard guard(mu_);
        return first_failure_;
    }
    // Every try, once stopped.
    const std::vector<Attempt>& attempts() const { return attempts_; }

private:
    void run() {
        for (int n = 1; !stopping_; ++n) {
            Attempt a{n, mark_.load(), Status::ok()};
            a.result = attempt_(n);
            if (a.result) ++worked_;
            if (a.after_mark) {
                ++after_mark_;
                if (a.result) ++worked_after_mark_;
            }
            if (!a.result) {
                std::lock_guard guard(mu_);
                if (first_failure_.empty())
                    first_failure_ = "try " + std::to_string(n) + ": " + a.result.to_string();
            }
            attempts_.push_back(std::move(a));
            std::this_thread::sleep_for(1ms);  // pacing, not a wait for anything
        }
    }

    const std::atomic<bool>& mark_;
    std::function<Status(int)> attempt_;
    std::atomic<bool> stopping_{false};
    std::atomic<int> after_mark_{0}, worked_{0}, worked_after_mark_{0};
    mutable std::mutex mu_;
    std::string first_failure_;      // under mu_
    std::vector<Attempt> attempts_;  // the thread's until it is joined
    std::thread thread_;             // last: starts once the rest is made
};

std::string tag_of(int writer, int n) {
    return "w" + std::to_string(writer) + "." + std::to_string(n);
}

// What writer k's try n writes: its tag as segment k+1's whole content,
// and appended to the journal object.
Status write_tagged(RadosTier& tier, int writer, int n) {
    const std::string tag = tag_of(writer, n);
    HIODSFS_TRY(tier.put(static_cast<SegmentId>(writer + 1), tag.data(), tag.size()));
    const std::string record = tag + ";";
    return tier.append_object("journal.a", record.data(), record.size());
}

// The tags of the journal object's records.
std::set<std::string> journal_tags(const MemoryRados& cluster) {
    std::string text;
    std::set<std::string> tags;
    if (!cluster.object(std::string(kStore) + ".journal.a", &text)) return tags;
    std::size_t from = 0;
    for (std::size_t semi; (semi = text.find(';', from)) != std::string::npos; from = semi + 1)
        tags.insert(text.substr(from, semi - from));
    return tags;
}

// ---- a segment store in front of the tier

constexpr std::uint64_t kSegmentBytes = 32 << 10;
constexpr std::uint32_t kRecordBytes = 4 << 10;  // eight to a segment, less headers: seven

SegmentStoreOptions over(RadosTier* tier) {
    SegmentStoreOptions o;
    o.max_segment_bytes = kSegmentBytes;
    o.write_buffer_bytes = 8 << 10;
    o.tier = tier;
    o.cache_bytes = 2 * kSegmentBytes;  // most segments are evicted and fetched back
    o.fetch_piece_bytes = 4096;
    o.upload_piece_bytes = 16 << 10;  // uploads by range, in two pieces
    return o;
}

// A chunk's bytes, made again from its id to check a read.
std::vector<char> chunk_bytes(ChunkId id) {
    std::mt19937_64 rng(id);
    return test::random_bytes(rng, kRecordBytes);
}

// Chunks appended so far, where they are: shared by writers and readers.
struct Appended {
    std::mutex mu;
    std::vector<std::pair<ChunkId, ChunkLocation>> chunks;
    std::atomic<ChunkId> next_id{1};

    Status append(SegmentStore& s) {
        const ChunkId id = next_id++;
        const std::vector<char> data = chunk_bytes(id);
        ChunkLocation loc;
        HIODSFS_TRY(s.append(id, data.data(), kRecordBytes, &loc));
        std::lock_guard guard(mu);
        chunks.emplace_back(id, loc);
        return Status::ok();
    }
    // Reads the n-th chunk appended (modulo how many there are) and checks it.
    Status read_back(SegmentStore& s, std::size_t n) {
        std::pair<ChunkId, ChunkLocation> c;
        {
            std::lock_guard guard(mu);
            if (chunks.empty()) return Status::ok();
            c = chunks[n % chunks.size()];
        }
        std::vector<char> got(c.second.length);
        HIODSFS_TRY(s.read(c.second, c.first, got.data()));
        if (got != chunk_bytes(c.first))
            return Status::error(EIO,
                                 "chunk " + std::to_string(c.first) + " read back other bytes");
        return Status::ok();
    }
    std::size_t size() {
        std::lock_guard guard(mu);
        return chunks.size();
    }
};

SegmentTierStats tier_stats(SegmentStore& s) {
    SegmentTierStats st;
    REQUIRE(s.tier_stats(&st));
    return st;
}

// The first failed try of the repeaters ("" if none failed).
std::string first_failure(const std::vector<const Repeater*>& repeaters) {
    for (const Repeater* r : repeaters)
        if (std::string f = r->first_failure(); !f.empty()) return f;
    return "";
}

}  // namespace

TEST_CASE(
    "rados tier in memory: the lease is renewed while segments are written, pushed, uploaded, "
    "evicted and read back",
    "[rados-memory]") {
    MemoryRados cluster;
    TempDir dir;
    Calls lost, retaken_log;
    std::atomic<int> retaken{0};
    // Renewed every second (a quarter lease, in whole seconds); writes may
    // start until 5 s after a renewal was sent.
    auto tier = locked_tier(cluster, "holder a", 6s, lost);
    tier->set_lapse_handling(
        [&] {
            ++retaken;
            return Status::ok();
        },
        retaken_log.callback());
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), over(tier.get()), &s));

    const std::atomic<bool> no_mark{false};
    Appended appended;
    // Two writers, a committer pushing synced bytes to the tier before its
    // (pretend) journal record, a reader of random chunks (most of them
    // evicted, so fetched), and a metadata writer beside the renewer and
    // the uploader.
    Repeater writer1(no_mark, [&](int) { return appended.append(*s); });
    Repeater writer2(no_mark, [&](int) { return appended.append(*s); });
    Repeater committer(no_mark, [&](int n) {
        SegmentPosition synced;
        HIODSFS_TRY(s->sync(&synced));
        HIODSFS_TRY(s->push_to_tier(synced));
        const std::string record = "commit " + std::to_string(n) + ";";
        return tier->append_object("journal.1", record.data(), record.size());
    });
    Repeater reader(
        no_mark, [&](int n) { return appended.read_back(*s, static_cast<std::size_t>(n) * 7919); });
    Repeater meta(no_mark, [&](int n) {
        const std::string snapshot = "snapshot " + std::to_string(n);
        HIODSFS_TRY(tier->put_object("snapshot.1", snapshot.data(), snapshot.size()));
        std::vector<char> back;
        HIODSFS_TRY(tier->get_object("snapshot.1", &back));
        std::vector<std::string> names;
        return tier->list_objects("journal.", &names);
    });
    const std::vector<const Repeater*> all{&writer1, &writer2, &committer, &reader, &meta};

    // Until the lease was renewed twice with all of it going on, and the
    // uploader, the cache and the fetches have had work.
    const bool busy = eventually([&] {
        const SegmentTierStats st = tier_stats(*s);
        return (cluster.renewals() >= 2 && st.uploads >= 8 && st.evictions >= 4 &&
                st.cache_misses >= 4 && reader.worked() >= 50) ||
               !first_failure(all).empty();
    });
    for (Repeater* r : {&writer1, &writer2, &committer, &reader, &meta}) r->stop();
    INFO(first_failure(all));
    REQUIRE(first_failure(all).empty());
    REQUIRE(busy);
    CHECK(lost.count == 0);

    // Every chunk reads back; every sealed segment reaches the pool whole.
    REQUIRE_OK(s->sync());
    const std::size_t chunks = appended.size();
    for (std::size_t i = 0; i < chunks; ++i) REQUIRE_OK(appended.read_back(*s, i));
    REQUIRE(eventually([&] { return tier_stats(*s).pending_uploads == 0; }));
    std::vector<std::pair<SegmentId, std::uint64_t>> segments;
    REQUIRE_OK(s->list_segments(&segments));
    const SegmentId active = s->active_segment();
    for (const auto& [id, size] : segments) {
        if (id == active) continue;
        std::string object;
        INFO("segment " << id);
        REQUIRE(cluster.object(tier->object_name(id), &object));
        CHECK(object.size() == size);
    }
    CHECK(record_in(cluster, *tier).reserved >= active);  // reserved beside the renewals
    s.reset();
    REQUIRE_OK(tier->unlock());
    CHECK(record_in(cluster, *tier).released);
    CHECK(cluster.lockers(tier->lock_object(), kLockName).empty());
    CHECK(cluster.blocklist().empty());
    CHECK(lost.count == 0);
    CHECK(retaken.load() == 0);
}

TEST_CASE(
    "rados tier in memory: a lease that cannot be renewed is lost once, and then no write starts",
    "[rados-memory]") {
    MemoryRados cluster;
    Calls lost;
    // Renewed every second; writes may start until 3 s after a renewal.
    auto tier = locked_tier(cluster, "holder a", 4s, lost);
    auto writes = [&](int writer) {
        return [&, writer](int n) { return write_tagged(*tier, writer, n); };
    };
    Repeater w0(lost.called, writes(0)), w1(lost.called, writes(1));
    // Reads go on after the loss.
    Repeater reads(lost.called, [&](int) {
        std::vector<char> journal;
        return tier->get_object("journal.a", &journal);
    });
    REQUIRE(eventually([&] { return w0.worked() >= 5 && w1.worked() >= 5; }));

    cluster.fail_locks(ETIMEDOUT);  // the cluster answers no renewal any more
    REQUIRE(eventually([&] { return lost.count.load() == 1; }));
    CHECK(tier->fenced());
    CHECK(lost.message().find("could not be renewed") != std::string::npos);
    REQUIRE(eventually([&] {
        return w0.after_mark() >= 3 && w1.after_mark() >= 3 && reads.worked_after_mark() >= 3;
    }));
    w0.stop();
    w1.stop();
    reads.stop();
    const std::string segment_names[] = {tier->object_name(1), tier->object_name(2)};
    tier.reset();  // the renewer is joined: no call of on_lost can come later
    CHECK(lost.count.load() == 1);

    // Each write that began after the loss was refused by the tier (the
    // cluster took writes all along), and none of them is in the pool.
    const std::set<std::string> journal = journal_tags(cluster);
    for (const Repeater* w : {&w0, &w1}) {
        const int writer = w == &w0 ? 0 : 1;
        std::string segment;
        REQUIRE(cluster.object(segment_names[writer], &segment));
        for (const Attempt& a : w->attempts()) {
            if (!a.after_mark) continue;
            INFO("writer " << writer << " try " << a.n << ": " << a.result.to_string());
            CHECK(a.result.err() == EIO);
            CHECK(a.result.message().find("refusing to write segment") != std::string::npos);
            CHECK(segment != tag_of(writer, a.n));
            CHECK(journal.count(tag_of(writer, a.n)) == 0);
        }
    }
}

TEST_CASE(
    "rados tier in memory: a lapse while the cluster cannot be reached is taken back on a new "
    "connection, and writes resume",
    "[rados-memory]") {
    MemoryRados cluster;
    Calls lost, said;
    std::atomic<int> retaken{0};
    std::atomic<bool> is_retaken{false};
    auto tier = locked_tier(cluster, "holder a", 4s, lost);
    const HolderRecord first = record_in(cluster, *tier);
    tier->set_lapse_handling(
        [&] {
            ++retaken;
            is_retaken = true;
            return Status::ok();
        },
        said.callback());
    auto writes = [&](int writer) {
        return [&, writer](int n) { return write_tagged(*tier, writer, n); };
    };
    Repeater w0(is_retaken, writes(0)), w1(is_retaken, writes(1));
    REQUIRE(eventually([&] { return w0.worked() >= 5 && w1.worked() >= 5; }));

    // The connection cannot reach the cluster any more (as after a restart
    // of the whole cluster): the lease lapses, and a new connection takes
    // the lock back while the writers go on trying.
    cluster.cut_off_clients();
    REQUIRE(eventually([&] { return is_retaken.load(); }));
    REQUIRE(eventually([&] { return w0.worked_after_mark() >= 3 && w1.worked_after_mark() >= 3; }));
    w0.stop();
    w1.stop();
    CHECK(lost.count.load() == 0);
    CHECK(retaken.load() == 1);
    CHECK_FALSE(tier->fenced());
    // Said after writes resume, on the renewer's thread.
    CHECK(eventually(
        [&] { return said.message().find("is taken again; writes resume") != std::string::npos; }));

    // The same holder (epoch), now from the new connection's address; the
    // old connection fenced, in case its operations still arrive.
    const HolderRecord now = record_in(cluster, *tier);
    CHECK(now.epoch == first.epoch);
    CHECK(now.cookie == first.cookie);
    CHECK(now.address != first.address);
    CHECK(cluster.blocklist() == std::vector<std::string>{first.address});
    const std::vector<RadosLocker> holders = cluster.lockers(tier->lock_object(), kLockName);
    REQUIRE(holders.size() == 1);
    CHECK(holders.front().address == now.address);
    // What the writers wrote after it from the new connection is there.
    const std::set<std::string> journal = journal_tags(cluster);
    for (const Repeater* w : {&w0, &w1})
        for (const Attempt& a : w->attempts())
            if (a.after_mark && a.result) CHECK(journal.count(tag_of(w == &w0 ? 0 : 1, a.n)) == 1);
    REQUIRE_OK(tier->unlock());
    CHECK(record_in(cluster, *tier).released);
}

TEST_CASE("rados tier in memory: a lapse is a loss when another holder had the store meanwhile",
          "[rados-memory]") {
    MemoryRados cluster;
    Calls a_lost;
    auto a = locked_tier(cluster, "holder a", 4s, a_lost);
    a->set_lapse_handling([] { return Status::ok(); }, [](const std::string&) {});
    std::atomic<bool> b_came{false};
    Repeater writes(b_came, [&](int n) { return write_tagged(*a, 0, n); });
    REQUIRE(eventually([&] { return writes.worked() >= 5; }));

    // a's connection cannot reach the cluster any more; meanwhile b breaks
    // the lock a cannot renew, takes the store (fencing a), writes and lets
    // it go, all before a's lease has lapsed on a's side.
    cluster.cut_off_clients();
    b_came = true;
    auto b = open_tier(cluster, 1s);
    break_locks(*b);
    REQUIRE_OK(b->lock("holder b", 60s, nullptr));
    REQUIRE_OK(b->reserve_segment(b->first_new_segment()));
    REQUIRE_OK(b->put(b->first_new_segment(), "b's", 3));
    REQUIRE_OK(b->unlock());
    const HolderRecord b_record = record_in(cluster, *b);
    REQUIRE(b_record.released);

    // a's renewer takes the lock back on a new connection (or finds it
    // taken): either way the store is not as a left it, and a's lease is
    // lost, said once; a writes nothing over b's.
    REQUIRE(eventually([&] { return a_lost.count.load() == 1 && writes.after_mark() >= 3; }));
    writes.stop();
    CHECK(a->fenced());
    CHECK(a_lost.message().find("another client") != std::string::npos);
    CHECK(a_lost.message().find("no more writes until it is mounted again") != std::string::npos);
    a.reset();
    CHECK(a_lost.count.load() == 1);
    const HolderRecord now = record_in(cluster, *b);
    CHECK(now.epoch == b_record.epoch);
    CHECK(now.cookie == b_record.cookie);
    CHECK(now.released);
    CHECK(cluster.lockers(b->lock_object(), kLockName).empty());
    const std::set<std::string> journal = journal_tags(cluster);
    for (const Attempt& t : writes.attempts()) {
        if (!t.after_mark) continue;
        INFO("try " << t.n << ": " << t.result.to_string());
        CHECK_FALSE(t.result.is_ok());
        CHECK(journal.count(tag_of(0, t.n)) == 0);
    }
}

TEST_CASE(
    "rados tier in memory: another holder that breaks the lock fences this one: its writes and "
    "uploads fail and none of them lands",
    "[rados-memory]") {
    MemoryRados cluster;
    TempDir dir;
    Calls a_lost;
    auto a = locked_tier(cluster, "holder a", 4s, a_lost);
    // As the daemon: a lapse is taken back if no one else came meanwhile.
    a->set_lapse_handling([] { return Status::ok(); }, [](const std::string&) {});
    const HolderRecord a_record = record_in(cluster, *a);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), over(a.get()), &s));
    std::atomic<bool> taken_over{false};
    Appended appended;
    Repeater appends(taken_over, [&](int) { return appended.append(*s); });
    Repeater writes(taken_over, [&](int n) { return write_tagged(*a, 0, n); });
    REQUIRE(eventually([&] { return tier_stats(*s).uploads >= 2 && writes.worked() >= 5; }));

    // b breaks a's lock (as of a holder it believes dead) and takes the
    // store, fencing a first. (If a's renewer took its lock back in
    // between, which it may, b breaks it again.)
    const HolderRecord a_last = record_in(cluster, *a);  // with the ids a reserved
    auto b = open_tier(cluster, 1s);
    std::vector<std::string> said;
    Status taken = Status::error(EBUSY, "not tried");
    for (int i = 0; i < 10 && taken.err() == EBUSY; ++i) {
        break_locks(*b);
        taken = b->lock("holder b", 60s, nullptr, {},
                        [&](const std::string& line) { said.push_back(line); });
    }
    REQUIRE_OK(taken);
    taken_over = true;
    const std::uint64_t a_writes = cluster.writes_from(a_record.address);
    const std::uint64_t upload_failures = tier_stats(*s).upload_failures;
    std::map<std::string, std::string> a_objects;
    for (const std::string& name : cluster.objects(std::string(kStore) + ".")) {
        if (name == b->lock_object()) continue;
        REQUIRE(cluster.object(name, &a_objects[name]));
    }
    REQUIRE(said.size() == 1);
    CHECK(said.front().find("blocklisted " + a_record.address) != std::string::npos);
    CHECK(cluster.blocklist() == std::vector<std::string>{a_record.address});
    const HolderRecord b_record = record_in(cluster, *b);
    CHECK(b_record.epoch == a_record.epoch + 1);
    CHECK(b_record.first_segment == a_last.reserved + 1);

    // a's renewer hears of it once; a's writes and appends go on failing
    // (enough appends to seal a segment: its upload fails too), and
    // nothing of them lands.
    REQUIRE(eventually([&] {
        return a_lost.count.load() == 1 && writes.after_mark() >= 5 && appends.after_mark() >= 10;
    }));
    CHECK(cluster.writes_from(a_record.address) == a_writes);
    CHECK(a->fenced());
    REQUIRE(eventually([&] { return tier_stats(*s).upload_failures > upload_failures; }));
    appends.stop();
    writes.stop();
    CHECK(tier_stats(*s).pending_uploads > 0);
    for (const Attempt& t : writes.attempts()) {
        if (!t.after_mark) continue;
        INFO("try " << t.n << ": " << t.result.to_string());
        CHECK((t.result.err() == ESHUTDOWN || t.result.err() == EIO));
    }
    s.reset();
    a.reset();  // lets go of nothing: the store is b's
    CHECK(cluster.writes_from(a_record.address) == a_writes);
    for (const auto& [name, bytes] : a_objects) {
        std::string now;
        INFO(name);
        REQUIRE(cluster.object(name, &now));
        CHECK(now == bytes);
    }
    CHECK(record_in(cluster, *b).epoch == b_record.epoch);

    // b writes and reads what a wrote before.
    REQUIRE_OK(b->reserve_segment(b->first_new_segment()));
    REQUIRE_OK(b->put(b->first_new_segment(), "b's", 3));
    std::vector<char> back;
    REQUIRE_OK(b->get(1, &back));
    REQUIRE_OK(b->unlock());
    CHECK(record_in(cluster, *b).released);
}

TEST_CASE(
    "rados tier in memory: a store closed lets its lock go, and the next holder fences no one",
    "[rados-memory]") {
    MemoryRados cluster;
    TempDir dir;
    Calls a_lost;
    auto a = locked_tier(cluster, "holder a", 6s, a_lost);
    const HolderRecord a_record = record_in(cluster, *a);
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), dir.path(), over(a.get()), &s));
    Appended appended;
    for (int i = 0; i < 30; ++i) REQUIRE_OK(appended.append(*s));
    REQUIRE_OK(s->seal());
    REQUIRE_OK(s->sync());
    REQUIRE_OK(s->finish_uploads());  // as the engine's close
    const SegmentPosition committed = s->append_position();
    s.reset();
    const HolderRecord before = record_in(cluster, *a);
    REQUIRE_OK(a->unlock());
    // Let go, it writes nothing more: its record says released, so the
    // next holder fences no one, and a write of it could land over theirs.
    const std::string late = "late";
    CHECK(a->put_object("after-unlock", late.data(), late.size()).err() == EIO);
    std::string text;
    CHECK_FALSE(cluster.object(std::string(kStore) + ".after-unlock", &text));
    a.reset();  // closed

    const HolderRecord released = [&] {
        std::string text;
        REQUIRE(cluster.object(std::string(kStore) + ".lock", &text));
        HolderRecord r;
        REQUIRE(decode_holder(text, &r));
        return r;
    }();
    CHECK(released.released);
    CHECK(released.epoch == a_record.epoch);
    CHECK(released.reserved == before.reserved);
    CHECK(cluster.lockers(std::string(kStore) + ".lock", kLockName).empty());
    CHECK(a_lost.count.load() == 0);

    auto b = open_tier(cluster, 1s);
    std::vector<std::string> said;
    REQUIRE_OK(b->lock("holder b", 6s, nullptr, {},
                       [&](const std::string& line) { said.push_back(line); }));
    CHECK(said.empty());
    CHECK(cluster.blocklist().empty());
    CHECK(b->epoch() == a_record.epoch + 1);
    CHECK(b->first_new_segment() == released.reserved + 1);
    // Every segment a uploaded is b's to read.
    TempDir b_dir;
    SegmentStoreOptions from_pool = over(b.get());
    from_pool.committed = committed;  // as the metadata b recovered would say
    REQUIRE_OK(SegmentStore::open(Env::posix(), b_dir.path(), from_pool, &s));
    for (std::size_t i = 0; i < appended.size(); ++i) REQUIRE_OK(appended.read_back(*s, i));
    s.reset();
    REQUIRE_OK(b->unlock());
}

}  // namespace hiodsfs::rados_memory_test

#else

TEST_CASE("rados tier in memory", "[rados-memory]") {
    SKIP_TEST("built without librados's header (librados-dev; scripts/install-deps installs it)");
}

#endif  // HIODSFS_HAVE_RADOS
