// The store's lock as a fence the cluster enforces (issue 43), against the
// real single-node cluster of tests/rados/ceph_cluster.h: a write that
// asserts the lock lands only while its client holds it (the encoding of
// cls_lock's assert_locked checked by the OSD itself); a blocklisted
// client's operations are refused by the OSD, also one it had sent before;
// a takeover fences the last holder that did not let the store go, writes
// its own record with the next epoch and segment ids past the last
// holder's; a holder stops writing before its lease could end. And, without
// a cluster: the holder record, the lock cookie and the lease's arithmetic.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "../store/store_test_util.h"
#include "ceph_cluster.h"
#include "rados_test_util.h"

#ifdef HIODSFS_HAVE_RADOS
#include "store/rados_holder.h"
#include "store/rados_lease.h"
#include "store/rados_pool.h"
#include "store/rados_tier.h"

namespace {

using hiodsfs::HolderRecord;
using hiodsfs::RadosLease;
using hiodsfs::RadosLock;
using hiodsfs::RadosLocker;
using hiodsfs::RadosOptions;
using hiodsfs::RadosPool;
using hiodsfs::RadosTier;
using hiodsfs::Status;
using hiodsfs::test::CephCluster;
using hiodsfs::test::connect;
using hiodsfs::test::options_of;
using hiodsfs::test::unique_name;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string read_text(RadosPool& pool, const std::string& object) {
    std::vector<std::uint8_t> bytes;
    REQUIRE_OK(pool.read(object, &bytes));
    return std::string(bytes.begin(), bytes.end());
}

// The ceph CLI against the cluster; its exit status.
int ceph(const CephCluster& c, const std::string& args) {
    const std::string command = "timeout 60 ceph -c '" + c.conf + "' " + args + " >/dev/null 2>&1";
    return std::system(command.c_str());
}

// While it lives, the cluster holds every client's operations back (the
// map's pause flags), as an overloaded or partitioned cluster would.
struct PausedCluster {
    const CephCluster& c;
    explicit PausedCluster(const CephCluster& cluster) : c(cluster) {
        REQUIRE(ceph(c, "osd pause") == 0);
    }
    ~PausedCluster() {
        if (ceph(c, "osd unpause") != 0) std::fprintf(stderr, "ceph osd unpause failed\n");
    }
};

// This client's address as the OSD lists it among the lock's holders.
std::string address_of(RadosPool& pool, const RadosLock& lock) {
    std::vector<RadosLocker> holders;
    REQUIRE_OK(pool.lockers(lock.object, lock.name, &holders));
    for (const RadosLocker& h : holders)
        if (h.cookie == lock.cookie) return h.address;
    FAIL("the lock does not list " << lock.cookie);
    return "";
}

void guarded_writes(const CephCluster& c) {
    auto first = connect(c);
    auto second = connect(c);
    const std::string object = unique_name("guarded");
    const RadosLock mine{object, "hiodsfs", "holder one", "test"};
    REQUIRE_OK(first->lock_exclusive(mine, 60s));
    REQUIRE_OK(first->write_full(object, "one", 3, &mine));
    CHECK(read_text(*second, object) == "one");
    // Another client, even with the holder's cookie, or another cookie of
    // the holder's client: refused by the OSD, and nothing written.
    Status st = second->write_full(object, "two", 3, &mine);
    INFO(st.message());
    CHECK(st.err() == EBUSY);
    const RadosLock other_cookie{object, "hiodsfs", "holder two", "test"};
    CHECK(first->write_full(object, "two", 3, &other_cookie).err() == EBUSY);
    CHECK(read_text(*second, object) == "one");
    // Once the lock is let go, the old holder's guarded write is refused too.
    REQUIRE_OK(first->unlock(mine));
    CHECK(first->write_full(object, "two", 3, &mine).err() == EBUSY);
    CHECK(read_text(*second, object) == "one");
    // And a lapsed lease is no lock.
    REQUIRE_OK(first->lock_exclusive(mine, 2s));
    REQUIRE_OK(first->write_full(object, "three", 5, &mine));
    std::this_thread::sleep_for(2500ms);  // past the lease (the OSD's clock decides)
    CHECK(first->write_full(object, "four", 4, &mine).err() == EBUSY);
    CHECK(read_text(*second, object) == "three");
    REQUIRE_OK(second->remove(object));
}

void blocklisted_client(const CephCluster& c) {
    auto fenced = connect(c, 60s);  // long enough to wait out the pause below
    auto other = connect(c);
    const std::string object = unique_name("fenced");
    const RadosLock lock{object + ".lock", "hiodsfs", "fenced one", "test"};
    REQUIRE_OK(fenced->lock_exclusive(lock, 60s));
    const std::string address = address_of(*fenced, lock);
    REQUIRE_OK(fenced->write_full(object, "before", 6));

    // An operation the client sent while the cluster held writes back: the
    // other client blocklists it meanwhile; once the cluster goes on, the
    // operation lands nowhere.
    std::future<Status> held;
    {
        PausedCluster paused(c);
        REQUIRE_OK(fenced->wait_for_latest_map());  // it knows of the pause
        held = std::async(std::launch::async,
                          [&] { return fenced->write_full(object, "held back", 9); });
        CHECK(held.wait_for(1s) == std::future_status::timeout);  // the cluster holds it
        REQUIRE_OK(other->blocklist(address));
        REQUIRE_OK(other->wait_for_latest_map());
    }
    const Status late = held.get();
    INFO(late.message());
    CHECK(late.err() == ESHUTDOWN);
    CHECK(read_text(*other, object) == "before");

    // Everything it sends later is refused by the OSD: writes of any kind,
    // guarded or not, and its lock's renewal.
    CHECK(fenced->write_full(object, "after", 5).err() == ESHUTDOWN);
    CHECK(fenced->write(object, 0, "x", 1).err() == ESHUTDOWN);
    CHECK(fenced->append(object, "x", 1).err() == ESHUTDOWN);
    CHECK(fenced->remove(object).err() == ESHUTDOWN);
    CHECK(fenced->write_full(lock.object, "x", 1, &lock).err() == ESHUTDOWN);
    CHECK(fenced->renew_lock(lock, 60s).err() == ESHUTDOWN);
    CHECK(read_text(*other, object) == "before");
    // Another client is not hurt by it.
    REQUIRE_OK(other->write_full(object, "other", 5));
    CHECK(read_text(*other, object) == "other");
    REQUIRE_OK(other->remove(object));
    (void)other->remove(lock.object);
}

std::unique_ptr<RadosTier> open_tier(const CephCluster& c, const std::string& store,
                                     std::chrono::seconds timeout = 10s) {
    std::unique_ptr<RadosTier> tier;
    REQUIRE_OK(RadosTier::open(options_of(c, timeout), store, &tier));
    return tier;
}

HolderRecord holder_of(RadosTier& tier) {
    HolderRecord r;
    bool found = false;
    REQUIRE_OK(tier.read_holder(&r, &found));
    REQUIRE(found);
    return r;
}

void takeover(const CephCluster& c) {
    const std::string store = unique_name("takeover");
    auto a = open_tier(c, store);
    std::atomic<int> a_lost{0};
    REQUIRE_OK(a->lock("holder a", 60s, [&](const std::string&) { ++a_lost; }));
    const HolderRecord first = holder_of(*a);
    CHECK(first.epoch == 1);
    CHECK(a->epoch() == 1);
    CHECK(first.cookie == "holder a");
    CHECK_FALSE(first.address.empty());
    CHECK_FALSE(first.released);
    CHECK(a->first_new_segment() == 1);
    REQUIRE_OK(a->reserve_segment(1));
    REQUIRE_OK(a->reserve_segment(2));
    CHECK(holder_of(*a).reserved == RadosTier::kReservedSegments);
    REQUIRE_OK(a->put(1, "a's", 3));

    // Another client takes the store from a (here by breaking a's lock, as
    // a lease running out does): it blocklists a before anything else.
    auto b = open_tier(c, store);
    CHECK(b->lock("holder b", 60s, nullptr).err() == EBUSY);
    std::vector<RadosLocker> holders;
    REQUIRE_OK(b->lockers(&holders));
    REQUIRE(holders.size() == 1);
    REQUIRE_OK(b->break_lock(holders.front()));
    std::vector<std::string> said;
    REQUIRE_OK(b->lock("holder b", 60s, nullptr, {},
                       [&](const std::string& line) { said.push_back(line); }));
    REQUIRE(said.size() == 1);
    CHECK(said.front().find("fenced the last holder of " + b->describe() +
                            " (epoch 1, 'holder a')") != std::string::npos);
    CHECK(said.front().find("blocklisted " + first.address) != std::string::npos);
    const HolderRecord second = holder_of(*b);
    CHECK(second.epoch == 2);
    CHECK(b->epoch() == 2);
    CHECK(second.first_segment == RadosTier::kReservedSegments + 1);
    CHECK(b->first_new_segment() == RadosTier::kReservedSegments + 1);
    CHECK(b->reserve_segment(2).err() == EINVAL);  // a's ids are not b's

    // a still thinks it holds the store: the OSD refuses what it sends.
    Status st = a->put(1, "late", 4);
    INFO(st.message());
    CHECK(st.err() == ESHUTDOWN);
    CHECK(a->reserve_segment(RadosTier::kReservedSegments + 1).err() != 0);
    std::vector<char> back;
    REQUIRE_OK(b->get(1, &back));
    CHECK(std::string(back.begin(), back.end()) == "a's");
    // Its renewer learns it too, and says so once (refused at its next
    // renewal; on a cluster too busy to answer, when its lease runs out).
    const auto until = Clock::now() + 120s;
    while (a_lost.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(100ms);
    CHECK(a_lost.load() == 1);
    CHECK(a->fenced());

    // A holder that let go is not fenced by the next one.
    REQUIRE_OK(b->unlock());
    INFO(hiodsfs::encode_holder(holder_of(*b)));
    CHECK(holder_of(*b).released);
    auto c3 = open_tier(c, store);
    said.clear();
    REQUIRE_OK(c3->lock("holder c", 60s, nullptr, {},
                        [&](const std::string& line) { said.push_back(line); }));
    CHECK(said.empty());
    CHECK(c3->epoch() == 3);
    CHECK(c3->first_new_segment() == RadosTier::kReservedSegments + 1);  // b reserved none
    REQUIRE_OK(c3->put(1, "c's", 3));
    REQUIRE_OK(c3->remove(1));
    REQUIRE_OK(c3->unlock());
    // Let go, it writes nothing more.
    CHECK(c3->put(2, "late", 4).err() == EIO);
    (void)c3->pool().remove(c3->lock_object());
}

void fence_refused(const CephCluster& c) {
    const std::string store = unique_name("nofence");
    // A client that may read and write the pool but not blocklist.
    const std::string id = "nofence-" + std::to_string(::getpid());
    hiodsfs::test::TempDir dir;
    const std::string keyring = dir.path() + "/keyring";
    REQUIRE(ceph(c, "auth get-or-create client." + id + " mon 'allow r' osd 'allow rwx' -o '" +
                        keyring + "'") == 0);
    auto a = open_tier(c, store);
    REQUIRE_OK(a->lock("holder a", 60s, nullptr));
    std::vector<RadosLocker> holders;
    REQUIRE_OK(a->lockers(&holders));
    REQUIRE(holders.size() == 1);
    REQUIRE_OK(a->break_lock(holders.front()));  // a is gone, without letting go

    RadosOptions o = options_of(c);
    o.client_id = id;
    o.keyring = keyring;
    std::unique_ptr<RadosTier> limited;
    REQUIRE_OK(RadosTier::open(o, store, &limited));
    Status st = limited->lock("holder b", 60s, nullptr);
    INFO(st.message());
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("cannot fence the last holder of " + limited->describe()) !=
          std::string::npos);
    CHECK(st.message().find("'osd blocklist'") != std::string::npos);
    // It let the lock go: never held unfenced, and free for a client that can.
    REQUIRE_OK(limited->lockers(&holders));
    CHECK(holders.empty());
    CHECK(holder_of(*limited).epoch == 1);  // no record of its own
    auto admin = open_tier(c, store);
    REQUIRE_OK(admin->lock("holder c", 60s, nullptr));
    CHECK(admin->epoch() == 2);
    REQUIRE_OK(admin->unlock());
    (void)admin->pool().remove(admin->lock_object());
    (void)ceph(c, "auth rm client." + id);
}

void lease_deadline(const CephCluster& c) {
    const std::string store = unique_name("deadline");
    // Renewed each second; a write may start until 1 s before the lease ends.
    auto tier = open_tier(c, store, 1s);
    std::atomic<int> lost{0};
    REQUIRE_OK(tier->lock("holder", 4s, [&](const std::string&) { ++lost; }));
    std::atomic<int> retaken{0};
    std::vector<std::string> said;
    std::mutex said_mu;
    tier->set_lapse_handling(
        [&] {
            ++retaken;
            return Status::ok();
        },
        [&](const std::string& line) {
            std::lock_guard g(said_mu);
            said.push_back(line);
        });
    REQUIRE_OK(tier->put(1, "x", 1));
    {
        // The cluster holds the renewals back: the holder stops writing on
        // its own, without waiting for a write's timeout.
        PausedCluster paused(c);
        const auto until = Clock::now() + 30s;
        while (!tier->fenced() && Clock::now() < until) std::this_thread::sleep_for(50ms);
        REQUIRE(tier->fenced());
        // Refused here, by the holder, not after a timeout at the OSD (that
        // would be ETIMEDOUT, and the cluster is still paused).
        Status st = tier->put(1, "y", 1);
        INFO(st.message());
        CHECK(st.err() == EIO);
        CHECK(st.message().find("refusing to write segment 1") != std::string::npos);
        // Stopping writes comes a second before the lease ends; a renewal
        // let through before then would land in time, and nothing would need
        // taking again. Held until the holder has given the lease up.
        const auto lapse_by = Clock::now() + 30s;
        auto lapse_said = [&] {
            std::lock_guard g(said_mu);
            return !said.empty();
        };
        while (!lapse_said() && Clock::now() < lapse_by) std::this_thread::sleep_for(50ms);
        REQUIRE(lapse_said());
        std::lock_guard g(said_mu);
        CHECK(said.front().find("writes to the pool wait until it is taken again") != std::string::npos);
    }
    // The cluster goes on: the lock is taken again, the record still this
    // holder's, and writes resume.
    const auto until = Clock::now() + 60s;
    while (tier->fenced() && Clock::now() < until) std::this_thread::sleep_for(100ms);
    INFO("lost " << lost.load());
    REQUIRE_FALSE(tier->fenced());
    CHECK(retaken.load() >= 1);
    CHECK(tier->epoch() == 1);
    REQUIRE_OK(tier->put(1, "z", 1));
    REQUIRE_OK(tier->remove(1));
    REQUIRE_OK(tier->unlock());
    (void)tier->pool().remove(tier->lock_object());
}

}  // namespace

#define RADOS_CASE(fn)             \
    REQUIRE_CEPH_CLUSTER(cluster); \
    fn(cluster)
#else
#define RADOS_CASE(fn) \
    SKIP_TEST("built without librados (librados-dev; scripts/install-deps installs it)")
#endif

TEST_CASE("rados fence: a write that asserts the lock lands only while its client holds it",
          "[rados][fence]") {
    RADOS_CASE(guarded_writes);
}
TEST_CASE(
    "rados fence: the OSD refuses a blocklisted client's operations, also one it sent "
    "before",
    "[rados][fence]") {
    RADOS_CASE(blocklisted_client);
}
TEST_CASE(
    "rados fence: a takeover fences the last holder, with the next epoch and segment ids "
    "past its own",
    "[rados][fence]") {
    RADOS_CASE(takeover);
}
TEST_CASE("rados fence: a client that may not blocklist takes no store another did not let go",
          "[rados][fence]") {
    RADOS_CASE(fence_refused);
}
TEST_CASE(
    "rados fence: a holder whose renewals are held back stops writing before its lease "
    "could end",
    "[rados][fence]") {
    RADOS_CASE(lease_deadline);
}

#ifdef HIODSFS_HAVE_RADOS
TEST_CASE("rados fence: cls_lock's assert_locked input in Ceph's encoding", "[rados][fence]") {
    const std::string in = hiodsfs::cls_lock_assert_input(RadosLock{"obj", "hiodsfs", "ck", "d"});
    // v1, compat 1, 22 bytes: "hiodsfs" (4 + 7), type 1, "ck" (4 + 2), "" (4).
    const std::string want = std::string("\x01\x01\x16\x00\x00\x00", 6) +
                             std::string("\x07\x00\x00\x00", 4) + "hiodsfs" + "\x01" +
                             std::string("\x02\x00\x00\x00", 4) + "ck" +
                             std::string("\x00\x00\x00\x00", 4);
    CHECK(in == want);
}

TEST_CASE("rados fence: the holder record round trips; anything else is no record",
          "[rados][fence]") {
    HolderRecord r;
    r.epoch = 7;
    r.cookie = "host a pid 12 boot b-1 pidns 4026531836";
    r.address = "v1:127.0.0.1:0/3506744153";
    r.first_segment = 129;
    r.reserved = 192;
    r.released = true;
    HolderRecord back;
    REQUIRE(hiodsfs::decode_holder(hiodsfs::encode_holder(r), &back));
    CHECK(back.epoch == 7);
    CHECK(back.cookie == r.cookie);
    CHECK(back.address == r.address);
    CHECK(back.first_segment == 129);
    CHECK(back.reserved == 192);
    CHECK(back.released);
    CHECK_FALSE(hiodsfs::decode_holder("", &back));  // an older hiodsfs's empty lock object
    CHECK_FALSE(hiodsfs::decode_holder("hiodsfs store holder\nepoch x\n", &back));
    std::string cut = hiodsfs::encode_holder(r);
    cut.resize(cut.find("released"));
    CHECK_FALSE(hiodsfs::decode_holder(cut, &back));
}

TEST_CASE(
    "rados fence: a lock cookie names its process by boot and pid namespace, not by host "
    "name",
    "[rados][fence]") {
    const std::string mine = hiodsfs::this_process_cookie();
    hiodsfs::CookieOwner owner;
    REQUIRE(hiodsfs::parse_cookie(mine, &owner));
    CHECK(owner.pid == ::getpid());
    CHECK_FALSE(owner.boot_id.empty());
    CHECK_FALSE(owner.pid_ns.empty());
    CHECK(hiodsfs::pid_of_this_machine(mine) == ::getpid());
    // The same host and pid in another pid namespace, or another boot: a
    // stranger, whose pid says nothing here.
    const std::string host_pid = owner.host + " pid " + std::to_string(::getpid());
    CHECK(hiodsfs::pid_of_this_machine(host_pid + " boot " + owner.boot_id + " pidns 1") == 0);
    CHECK(hiodsfs::pid_of_this_machine(host_pid + " boot another-boot pidns " + owner.pid_ns) == 0);
    // An older hiodsfs's cookie says nothing of either.
    CHECK(hiodsfs::pid_of_this_machine(host_pid) == 0);
    CHECK_FALSE(hiodsfs::parse_cookie(host_pid, &owner));
}

TEST_CASE("rados fence: no write starts once it could end after the lease; retries stop there",
          "[rados][fence]") {
    // A lease of 60 s, operations of up to 10 s.
    RadosLease lease(60s, 10s);
    const Clock::time_point t0 = Clock::now();
    lease.renewed(t0);
    CHECK(lease.held_until() == t0 + 60s);
    CHECK(lease.may_start(t0 + 49s));
    CHECK_FALSE(lease.may_start(t0 + 50s));  // could end at 60 s
    // Renewed every quarter lease.
    CHECK(lease.next_renewal(t0 + 1s, false) == t0 + 15s);
    // A renewal that failed (after its 10 s) is tried again a second later...
    CHECK(lease.next_renewal(t0 + 25s, true) == t0 + 26s);
    // ...but never past the last start: at 50 s the holder gives up, not at
    // the next quarter (where the lease would already be over).
    CHECK(lease.next_renewal(t0 + 49500ms, true) == t0 + 50s);
    CHECK_FALSE(lease.may_start(lease.next_renewal(t0 + 49500ms, true)));
    lease.renewed(t0 + 30s);
    CHECK(lease.may_start(t0 + 79s));
    CHECK(lease.next_renewal(t0 + 31s, false) == t0 + 45s);
}
#endif
