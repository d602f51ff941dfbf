// The reader gate (request_poll=) over a socket pair that stands in for
// /dev/fuse: worker threads read "requests" as libfuse's do, through the
// gate, and answer them; the test is the kernel that sends them.
#include "fuse/reader_gate.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace hiodsfs::fuse;
using namespace std::chrono_literals;

namespace {

// Workers that read through a gate until the test end of the pair closes.
class Server {
public:
    using Handler = std::function<void(const std::string&)>;

    Server(std::chrono::microseconds watch, Handler handle)
        : gate_(0us, watch), handle_(std::move(handle)) {
        REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds_) == 0);
    }
    ~Server() {
        ::close(fds_[1]);  // every worker reads the end
        for (auto& t : workers_) t.join();
        ::close(fds_[0]);
    }
    void start(int threads) {
        for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { serve(); });
    }
    // The kernel's side: sends a request, reads a reply.
    void send(const std::string& m) { REQUIRE(::send(fds_[1], m.data(), m.size(), 0) == static_cast<ssize_t>(m.size())); }
    std::string reply() {
        char buf[256];
        const ssize_t n = ::recv(fds_[1], buf, sizeof buf, 0);
        REQUIRE(n > 0);
        return std::string(buf, static_cast<std::size_t>(n));
    }
    // The most requests one thread read, and all.
    std::pair<int, int> reads() {
        std::lock_guard<std::mutex> g(mu_);
        int most = 0, all = 0;
        for (const auto& [id, n] : reads_) {
            most = std::max(most, n);
            all += n;
        }
        return {most, all};
    }
    ReaderGate& gate() { return gate_; }

private:
    void serve() {
        for (;;) {
            const int fd = fds_[0];
            gate_.enter(fd);
            char buf[256];
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            gate_.leave(n > 0 && ReaderGate::ready(fd));
            if (n <= 0) {
                gate_.open();
                return;
            }
            const std::string m(buf, static_cast<std::size_t>(n));
            {
                std::lock_guard<std::mutex> g(mu_);
                ++reads_[std::this_thread::get_id()];
            }
            handle_(m);
            const std::string r = "done " + m;
            ::send(fd, r.data(), r.size(), 0);
        }
    }

    ReaderGate gate_;
    Handler handle_;
    int fds_[2] = {-1, -1};
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::map<std::thread::id, int> reads_;
};

// Waits up to 30 s for pred (a deadlock check, not a timing one).
bool wait_until(std::mutex& mu, std::condition_variable& cv, const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 30s, pred);
}

// Polls for a state another thread reaches, up to 30 s.
bool wait_for_state(const std::function<bool()>& pred) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

}  // namespace

TEST_CASE("one request at a time is read by the thread that answered the one before", "[fuse][reader-gate]") {
    // Without the gate the kernel wakes the threads asleep in read in turn.
    Server s(std::chrono::hours(1), [](const std::string&) {});
    s.start(4);
    // Started: one reads, three wait (a thread starting late would take
    // the role while the reader answers).
    REQUIRE(wait_for_state([&] { return s.gate().waiting() == 3; }));
    for (int i = 0; i < 200; ++i) {
        s.send("r" + std::to_string(i));
        CHECK(s.reply() == "done r" + std::to_string(i));
    }
    const auto [most, all] = s.reads();
    CHECK(all == 200);
    CHECK(most >= 190);  // a spurious wake-up may hand over the odd one
}

TEST_CASE("requests waiting together wake a thread each", "[fuse][reader-gate]") {
    // Each of three requests is answered only once all three are in hand:
    // with one reader and no look from a deputy (an hour) only the wake-up
    // of a reader that finds more requests after its own gets there.
    std::mutex mu;
    std::condition_variable cv;
    int in_hand = 0;
    bool all_met = true;
    Server s(std::chrono::hours(1), [&](const std::string&) {
        std::unique_lock<std::mutex> l(mu);
        ++in_hand;
        cv.notify_all();
        if (!cv.wait_for(l, 30s, [&] { return in_hand >= 3; })) all_met = false;
    });
    for (int i = 0; i < 3; ++i) s.send("burst" + std::to_string(i));
    s.start(4);
    for (int i = 0; i < 3; ++i) CHECK(s.reply().rfind("done burst", 0) == 0);
    std::lock_guard<std::mutex> g(mu);
    CHECK(all_met);
}

TEST_CASE("a request that waits for the next one is not stuck behind it", "[fuse][reader-gate]") {
    // "a" is answered only after "b", which comes once "a" is in hand: the
    // reader is busy with "a", so a waiting thread must read "b" in its place
    // (a kernel call back into the file system from a handler is such a case).
    std::mutex mu;
    std::condition_variable cv;
    bool a_started = false, b_done = false, a_released_by_b = false;
    Server s(5ms, [&](const std::string& m) {
        std::unique_lock<std::mutex> l(mu);
        if (m == "a") {
            a_started = true;
            cv.notify_all();
            a_released_by_b = cv.wait_for(l, 30s, [&] { return b_done; });
        } else {
            b_done = true;
            cv.notify_all();
        }
    });
    s.start(3);
    // The other two wait at the gate before "a" comes.
    REQUIRE(wait_for_state([&] { return s.gate().waiting() == 2; }));
    s.send("a");
    REQUIRE(wait_until(mu, cv, [&] { return a_started; }));
    s.send("b");
    std::vector<std::string> replies{s.reply(), s.reply()};
    std::sort(replies.begin(), replies.end());
    CHECK(replies == std::vector<std::string>{"done a", "done b"});
    std::lock_guard<std::mutex> g(mu);
    CHECK(a_released_by_b);
    CHECK(s.gate().takeovers() >= 1);
}

TEST_CASE("a thread cancelled while it waits at the gate leaves it usable", "[fuse][reader-gate]") {
    // libfuse ends its workers with pthread_cancel, wherever they wait.
    ReaderGate gate(0us, std::chrono::hours(1));
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) == 0);
    gate.enter(fds[0]);  // this thread is the reader
    std::mutex mu;
    std::condition_variable cv;
    bool entering = false;
    std::thread waiter([&] {
        {
            std::lock_guard<std::mutex> g(mu);
            entering = true;
        }
        cv.notify_all();
        gate.enter(fds[0]);  // waits: cancelled here
        gate.leave(false);
    });
    REQUIRE(wait_until(mu, cv, [&] { return entering; }));
    REQUIRE(pthread_cancel(waiter.native_handle()) == 0);
    waiter.join();
    // The gate's lock is free: the reader leaves and another enters.
    gate.leave(false);
    gate.enter(fds[0]);
    gate.leave(false);
    ::close(fds[0]);
    ::close(fds[1]);
}

TEST_CASE("an idle gate's deputy looks less and less often, and a request wakes it", "[fuse][reader-gate]") {
    // A mounted file system nobody uses must not wake a thread 500 times a
    // second: the deputy doubles its wait while the reader reads nothing.
    Server s(1ms, [](const std::string&) {});
    s.start(3);
    REQUIRE(wait_for_state([&] { return s.gate().waiting() == 2; }));
    REQUIRE(wait_for_state([&] { return s.gate().looks() >= 3; }));
    const std::uint64_t before = s.gate().looks();
    std::this_thread::sleep_for(200ms);
    // Every millisecond would be 200 looks; doubling from 1 ms, 8 or so.
    CHECK(s.gate().looks() - before < 40);
    // Requests are still read, one at a time and in parallel.
    for (int i = 0; i < 20; ++i) {
        s.send("r" + std::to_string(i));
        CHECK(s.reply() == "done r" + std::to_string(i));
    }
}
