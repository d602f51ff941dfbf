// KernelChannel: libfuse's session over a socket pair in place of
// /dev/fuse, driven with raw FUSE requests as the kernel writes them. The
// channel must add FUSE_HANDLE_KILLPRIV_V2 to the INIT reply when (and only
// when) the kernel offers it, hand the "kill suid/sgid" flags of WRITE,
// SETATTR and OPEN to the handler, add FOPEN_PARALLEL_DIRECT_WRITES to the
// OPEN or CREATE reply of a handler that asks, and count requests by opcode.
#include "fuse/kernel_channel.h"

#include <linux/fuse.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuse/fuse_ops.h"

using hiodsfs::fuse::FuseState;
using hiodsfs::fuse::KernelChannel;

namespace {

// What the handlers saw of the request they ran for (current_request()).
struct Seen {
    std::uint64_t unique = 0;
    bool kill_suidgid = false;
    pid_t thread = 0;
};

// The session's userdata: the daemon's state (the channel reads its
// `channel`) and what the test's handlers record.
struct TestState : FuseState {
    fuse_session* session = nullptr;
    std::atomic<bool> ask_parallel{false};  // OPEN and CREATE ask for parallel direct writes
    std::mutex mu;
    Seen seen;
};

TestState& state_of(fuse_req_t req) {
    return *static_cast<TestState*>(static_cast<FuseState*>(fuse_req_userdata(req)));
}

void record(fuse_req_t req) {
    TestState& s = state_of(req);
    const auto& flags = hiodsfs::fuse::current_request();
    std::lock_guard<std::mutex> lock(s.mu);
    s.seen = Seen{flags.unique, flags.kill_suidgid, ::gettid()};
}

fuse_lowlevel_ops test_operations() {
    fuse_lowlevel_ops ops{};
    ops.open = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
        record(req);
        fi->direct_io = 1;
        if (state_of(req).ask_parallel) hiodsfs::fuse::allow_parallel_direct_writes();
        fuse_reply_open(req, fi);
    };
    ops.create = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info* fi) {
        record(req);
        fi->direct_io = 1;
        if (state_of(req).ask_parallel) hiodsfs::fuse::allow_parallel_direct_writes();
        fuse_entry_param e{};
        e.ino = 42;
        e.attr.st_ino = 42;
        e.attr.st_mode = S_IFREG | 0644;
        fuse_reply_create(req, &e, fi);
    };
    ops.write = [](fuse_req_t req, fuse_ino_t, const char*, size_t size, off_t, fuse_file_info*) {
        record(req);
        fuse_reply_write(req, size);
    };
    ops.setattr = [](fuse_req_t req, fuse_ino_t ino, struct stat*, int, fuse_file_info*) {
        record(req);
        struct stat st {};
        st.st_ino = ino;
        st.st_mode = S_IFREG | 0644;
        fuse_reply_attr(req, &st, 1.0);
    };
    // The test's way to end the session loop, on the loop's own thread.
    ops.statfs = [](fuse_req_t req, fuse_ino_t) {
        fuse_session_exit(state_of(req).session);
        fuse_reply_err(req, ENOSYS);
    };
    return ops;
}

// A reply as the kernel would read it: the header and the argument.
struct Reply {
    fuse_out_header header{};
    std::string arg;
};

// A libfuse session whose /dev/fuse is one end of a socket pair (a
// SOCK_SEQPACKET one keeps each request and reply a message of its own, as
// the device does), with the channel installed and libfuse's loop on a
// thread; the test writes requests into the other end.
class Session {
public:
    Session() {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0);
        kernel_.fd = fds[0];
        Fd device{fds[1]};
        state_.channel = &channel_;
        const char* argv[] = {"kernel_channel_test"};
        fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
        const fuse_lowlevel_ops ops = test_operations();
        se_.reset(fuse_session_new(&args, &ops, sizeof ops, static_cast<FuseState*>(&state_)));
        fuse_opt_free_args(&args);
        REQUIRE(se_ != nullptr);
        state_.session = se_.get();
        // "/dev/fd/N": libfuse takes N as its /dev/fuse (and closes it with the session).
        REQUIRE(fuse_session_mount(se_.get(), ("/dev/fd/" + std::to_string(device.fd)).c_str()) ==
                0);
        device.fd = -1;
        REQUIRE(channel_.install(se_.get()));
        loop_ = std::thread([this] { fuse_session_loop(se_.get()); });
    }

    // The loop ends on the STATFS the handler above answers (libfuse
    // answers every request but INIT itself until INIT has come), or else
    // on the end of its connection.
    ~Session() {
        if (!loop_.joinable()) return;
        Reply r;
        if (!inited_) exchange(FUSE_INIT, 0, init_request(0), &r);
        if (!exchange(FUSE_STATFS, 1, "", &r)) ::shutdown(kernel_.fd, SHUT_RDWR);
        loop_.join();
    }

    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Sends a request and returns its reply (FAILs after a minute without one).
    Reply send(std::uint32_t opcode, std::uint64_t nodeid, const std::string& arg) {
        Reply r;
        REQUIRE(exchange(opcode, nodeid, arg, &r));
        CHECK(r.header.unique == last_unique_);
        CHECK(r.header.len == sizeof r.header + r.arg.size());
        return r;
    }

    // INIT as a kernel of protocol 7.38 sends it, offering `flags`.
    Reply init(std::uint32_t flags) {
        inited_ = true;
        return send(FUSE_INIT, 0, init_request(flags));
    }

    template <typename T>
    static std::string as_bytes(const T& v) {
        return std::string(reinterpret_cast<const char*>(&v), sizeof v);
    }

    Seen seen() {
        std::lock_guard<std::mutex> lock(state_.mu);
        return state_.seen;
    }
    void ask_parallel(bool on) { state_.ask_parallel = on; }
    std::uint64_t last_unique() const { return last_unique_; }
    KernelChannel& channel() { return channel_; }

private:
    static std::string init_request(std::uint32_t flags) {
        fuse_init_in in{};
        in.major = 7;
        in.minor = 38;
        in.max_readahead = 128 * 1024;
        in.flags = flags;
        return as_bytes(in);
    }

    // One request written, its reply read (false if either fails, or after
    // a minute without a reply); no assertions, for the destructor too.
    bool exchange(std::uint32_t opcode, std::uint64_t nodeid, const std::string& arg, Reply* out) {
        fuse_in_header h{};
        h.len = static_cast<std::uint32_t>(sizeof h + arg.size());
        h.opcode = opcode;
        h.unique = next_unique_;
        next_unique_ += 2;
        h.nodeid = nodeid;
        h.pid = static_cast<std::uint32_t>(::getpid());
        last_unique_ = h.unique;
        const std::string msg = as_bytes(h) + arg;
        if (::write(kernel_.fd, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size()))
            return false;
        pollfd p{kernel_.fd, POLLIN, 0};
        if (::poll(&p, 1, 60'000) != 1) return false;
        std::string buf(1 << 16, '\0');
        const ssize_t n = ::read(kernel_.fd, buf.data(), buf.size());
        if (n < static_cast<ssize_t>(sizeof(fuse_out_header))) return false;
        std::memcpy(&out->header, buf.data(), sizeof out->header);
        out->arg = buf.substr(sizeof out->header, static_cast<std::size_t>(n) - sizeof out->header);
        return true;
    }

    struct Fd {
        int fd = -1;
        ~Fd() {
            if (fd >= 0) ::close(fd);
        }
    };
    struct SessionDestroy {
        void operator()(fuse_session* se) const { fuse_session_destroy(se); }
    };

    Fd kernel_;  // the kernel's end
    KernelChannel channel_;
    TestState state_;
    std::unique_ptr<fuse_session, SessionDestroy> se_;
    std::thread loop_;
    bool inited_ = false;
    std::uint64_t next_unique_ = 2;
    std::uint64_t last_unique_ = 0;
};

template <typename T>
T arg_as(const Reply& r, std::size_t at = 0) {
    T v{};
    REQUIRE(r.arg.size() >= at + sizeof v);
    std::memcpy(&v, r.arg.data() + at, sizeof v);
    return v;
}

std::string write_request(std::uint32_t write_flags) {
    fuse_write_in in{};
    in.fh = 1;
    in.size = 4;
    in.write_flags = write_flags;
    return Session::as_bytes(in) + "data";
}

std::string open_request(std::uint32_t open_flags) {
    fuse_open_in in{};
    in.flags = O_RDWR;
    in.open_flags = open_flags;
    return Session::as_bytes(in);
}

std::string create_request() {
    fuse_create_in in{};
    in.flags = O_RDWR | O_CREAT;
    in.mode = S_IFREG | 0644;
    return Session::as_bytes(in) + std::string("f\0", 2);
}

}  // namespace

TEST_CASE("kernel channel: INIT's reply says FUSE_HANDLE_KILLPRIV_V2 when the kernel offers it",
          "[fuse][kernel-channel]") {
    Session s;
    const Reply r = s.init(FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV_V2);
    REQUIRE(r.header.error == 0);
    const auto out = arg_as<fuse_init_out>(r);
    CHECK(out.major == 7);
    CHECK((out.flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
    // Set once the reply is written, which the test can read a moment before.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!s.channel().killpriv_v2() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(s.channel().killpriv_v2());
}

TEST_CASE("kernel channel: INIT's reply is libfuse's own when the kernel does not offer it",
          "[fuse][kernel-channel]") {
    Session s;
    const Reply r = s.init(FUSE_ASYNC_READ);
    REQUIRE(r.header.error == 0);
    CHECK((arg_as<fuse_init_out>(r).flags & FUSE_HANDLE_KILLPRIV_V2) == 0);
    CHECK_FALSE(s.channel().killpriv_v2());
}

TEST_CASE("kernel channel: the kill-suid/sgid flag of WRITE, SETATTR and OPEN reaches the handler",
          "[fuse][kernel-channel]") {
    Session s;
    REQUIRE(s.init(FUSE_HANDLE_KILLPRIV_V2).header.error == 0);

    CHECK(s.send(FUSE_WRITE, 5, write_request(FUSE_WRITE_KILL_SUIDGID)).header.error == 0);
    Seen seen = s.seen();
    CHECK(seen.kill_suidgid);
    CHECK(seen.unique == s.last_unique());
    // Each request starts afresh: the flag of the one before does not stay.
    CHECK(s.send(FUSE_WRITE, 5, write_request(0)).header.error == 0);
    seen = s.seen();
    CHECK_FALSE(seen.kill_suidgid);
    CHECK(seen.unique == s.last_unique());

    fuse_setattr_in attr{};
    attr.valid = FATTR_MODE | FATTR_KILL_SUIDGID;
    attr.mode = S_IFREG | 06755;
    CHECK(s.send(FUSE_SETATTR, 5, Session::as_bytes(attr)).header.error == 0);
    CHECK(s.seen().kill_suidgid);
    attr.valid = FATTR_MODE;
    CHECK(s.send(FUSE_SETATTR, 5, Session::as_bytes(attr)).header.error == 0);
    CHECK_FALSE(s.seen().kill_suidgid);

    CHECK(s.send(FUSE_OPEN, 5, open_request(FUSE_OPEN_KILL_SUIDGID)).header.error == 0);
    CHECK(s.seen().kill_suidgid);
    CHECK(s.send(FUSE_OPEN, 5, open_request(0)).header.error == 0);
    CHECK_FALSE(s.seen().kill_suidgid);
}

TEST_CASE(
    "kernel channel: OPEN and CREATE replies say FOPEN_PARALLEL_DIRECT_WRITES when the handler "
    "asks",
    "[fuse][kernel-channel]") {
    Session s;
    REQUIRE(s.init(0).header.error == 0);

    Reply r = s.send(FUSE_OPEN, 5, open_request(0));
    REQUIRE(r.header.error == 0);
    auto open = arg_as<fuse_open_out>(r);
    CHECK((open.open_flags & FOPEN_DIRECT_IO) != 0);
    CHECK((open.open_flags & FOPEN_PARALLEL_DIRECT_WRITES) == 0);

    s.ask_parallel(true);
    r = s.send(FUSE_OPEN, 5, open_request(0));
    REQUIRE(r.header.error == 0);
    REQUIRE(r.arg.size() == sizeof(fuse_open_out));
    open = arg_as<fuse_open_out>(r);
    CHECK((open.open_flags & FOPEN_DIRECT_IO) != 0);
    CHECK((open.open_flags & FOPEN_PARALLEL_DIRECT_WRITES) != 0);

    // CREATE's reply is the entry and then the open: the flag goes in the latter.
    r = s.send(FUSE_CREATE, 1, create_request());
    REQUIRE(r.header.error == 0);
    REQUIRE(r.arg.size() == sizeof(fuse_entry_out) + sizeof(fuse_open_out));
    CHECK(arg_as<fuse_entry_out>(r).nodeid == 42);
    open = arg_as<fuse_open_out>(r, sizeof(fuse_entry_out));
    CHECK((open.open_flags & FOPEN_DIRECT_IO) != 0);
    CHECK((open.open_flags & FOPEN_PARALLEL_DIRECT_WRITES) != 0);

    // A request that does not ask gets no flag, though the one before did.
    s.ask_parallel(false);
    r = s.send(FUSE_CREATE, 1, create_request());
    REQUIRE(r.header.error == 0);
    open = arg_as<fuse_open_out>(r, sizeof(fuse_entry_out));
    CHECK((open.open_flags & FOPEN_PARALLEL_DIRECT_WRITES) == 0);
}

TEST_CASE("kernel channel: requests are counted by opcode, on threads named fuse-req",
          "[fuse][kernel-channel]") {
    Session s;
    CHECK(s.channel().counts().empty());
    REQUIRE(s.init(0).header.error == 0);
    for (int i = 0; i < 3; ++i) CHECK(s.send(FUSE_WRITE, 5, write_request(0)).header.error == 0);
    CHECK(s.send(FUSE_OPEN, 5, open_request(0)).header.error == 0);
    // Opcode 7 has no name (the old GETDIR): counted by number, answered ENOSYS.
    CHECK(s.send(7, 5, "").header.error == -ENOSYS);
    using Counts = std::vector<std::pair<std::string, std::uint64_t>>;
    CHECK(s.channel().counts() == Counts{{"op7", 1}, {"open", 1}, {"write", 3}, {"init", 1}});

    std::ifstream comm("/proc/self/task/" + std::to_string(s.seen().thread) + "/comm");
    std::string name;
    std::getline(comm, name);
    CHECK(name == "fuse-req");
}
