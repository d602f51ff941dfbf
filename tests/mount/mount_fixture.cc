#include "mount_fixture.h"

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#ifndef HIODSFS_DEFAULT_BIN
#define HIODSFS_DEFAULT_BIN "src/fuse/hiodsfs"
#endif

extern char** environ;

namespace hiodsfs::mt {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string daemon_binary() {
    const char* e = std::getenv("HIODSFS_BIN");
    if (e != nullptr && *e != '\0') return e;
    return HIODSFS_DEFAULT_BIN;
}

long env_long(const char* name, long def) {
    const char* e = std::getenv(name);
    if (e == nullptr || *e == '\0') return def;
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    return (end != nullptr && *end == '\0') ? v : def;
}

bool is_root() { return geteuid() == 0; }

std::string which(const std::string& program) {
    if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
    const char* p = std::getenv("PATH");
    std::string path = p != nullptr ? p : "/usr/local/bin:/usr/bin:/bin";
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':')) {
        if (d.empty()) d = ".";
        std::string full = d + "/" + program;
        if (access(full.c_str(), X_OK) == 0) return full;
    }
    return "";
}

std::string CmdResult::describe() const {
    std::string s = timed_out ? "timed out" : ("exit " + std::to_string(status));
    if (!out.empty()) s += "\n--- stdout ---\n" + out.substr(0, 8000);
    if (!err.empty()) s += "\n--- stderr ---\n" + err.substr(0, 8000);
    return s;
}

namespace {

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Waits for pid with a deadline; returns true and the raw status if it ended.
bool wait_until(pid_t pid, Clock::time_point deadline, int* wstatus) {
    for (;;) {
        pid_t r = waitpid(pid, wstatus, WNOHANG);
        if (r == pid) return true;
        if (r < 0 && errno != EINTR) {
            *wstatus = 0;
            return true;  // not our child any more
        }
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
}

struct MountLine {
    std::string dev, mountpoint, fstype;
};

// The mounts of /proc/self/mountinfo: "id parent major:minor root mountpoint ... - fstype ...".
std::vector<MountLine> mount_lines() {
    std::vector<MountLine> out;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string id, parent;
        MountLine m;
        std::string root;
        ls >> id >> parent >> m.dev >> root >> m.mountpoint;
        const auto dash = line.find(" - ");
        if (dash != std::string::npos) std::istringstream(line.substr(dash + 3)) >> m.fstype;
        out.push_back(std::move(m));
    }
    return out;
}

int decode_status(int wstatus) {
    if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
    return -1;
}

}  // namespace

CmdResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              std::chrono::seconds timeout) {
    CmdResult res;
    if (argv.empty()) return res;
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return res;
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        return res;
    }
    // Build everything the child needs before fork (no allocation after it).
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    for (const auto& kv : env) {
        auto key = kv.substr(0, kv.find('=') + 1);
        std::erase_if(env_strings, [&](const std::string& s) { return s.starts_with(key); });
        env_strings.push_back(kv);
    }
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string prog = which(argv[0]);
    if (prog.empty()) prog = argv[0];

    pid_t pid = fork();
    if (pid < 0) {
        for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
        return res;
    }
    if (pid == 0) {
        setpgid(0, 0);
        int devnull = ::open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        execve(prog.c_str(), args.data(), envp.data());
        const char msg[] = "exec failed\n";
        (void)!::write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    int fds[2] = {out_pipe[0], err_pipe[0]};
    std::string* sinks[2] = {&res.out, &res.err};
    auto deadline = Clock::now() + timeout;
    char buf[65536];
    while (fds[0] >= 0 || fds[1] >= 0) {
        pollfd p[2];
        int n = 0;
        int idx[2];
        for (int i = 0; i < 2; ++i) {
            if (fds[i] >= 0) {
                p[n] = {fds[i], POLLIN, 0};
                idx[n++] = i;
            }
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            res.timed_out = true;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            break;
        }
        int r = poll(p, static_cast<nfds_t>(n), static_cast<int>(std::min<long>(left.count(), 1000)));
        if (r < 0 && errno != EINTR) break;
        for (int k = 0; k < n && r > 0; ++k) {
            if (p[k].revents == 0) continue;
            ssize_t got = ::read(fds[idx[k]], buf, sizeof buf);
            if (got > 0) {
                sinks[idx[k]]->append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                close_fd(fds[idx[k]]);
            }
        }
    }
    close_fd(fds[0]);
    close_fd(fds[1]);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    res.status = decode_status(wstatus);
    return res;
}

CmdResult sh(const std::string& script, std::chrono::seconds timeout) {
    return run({"/bin/sh", "-c", script}, {}, timeout);
}

std::string shq(std::string_view s) {
    std::string r = "'";
    for (char c : s) {
        if (c == '\'')
            r += "'\\''";
        else
            r += c;
    }
    return r + "'";
}

TempDir::TempDir(const std::string& prefix) {
    const char* t = std::getenv("HIODSFS_TEST_TMPDIR");
    if (t == nullptr || *t == '\0') t = std::getenv("TMPDIR");
    std::string base = (t != nullptr && *t != '\0') ? t : "/tmp";
    std::string templ = base + "/" + prefix + "XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
        throw std::runtime_error("mkdtemp " + templ + ": " + std::strerror(errno));
    }
    path_ = buf.data();
    // Other users (the permission tests) must be able to reach the mount.
    ::chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() { remove_tree(path_); }

void remove_tree(const std::string& path) noexcept {
    if (path.empty()) return;
    // Make every directory writable first (tests leave 0555 dirs behind).
    nftw(
        path.c_str(),
        [](const char* p, const struct stat* st, int flag, FTW*) {
            if (flag == FTW_D && (st->st_mode & 0700) != 0700) ::chmod(p, 0700);
            return 0;
        },
        64, FTW_PHYS | FTW_MOUNT);
    nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int flag, FTW*) {
            if (flag == FTW_DP)
                ::rmdir(p);
            else
                ::unlink(p);
            return 0;
        },
        64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

MountFixture::MountFixture(std::vector<std::string> options, bool mount_now)
    : dir_(tmp_.path()),
      store_(dir_ + "/store"),
      mnt_(dir_ + "/mnt"),
      options_(std::move(options)) {
    REQUIRE(::mkdir(store_.c_str(), 0755) == 0);
    REQUIRE(::mkdir(mnt_.c_str(), 0755) == 0);
    if (mount_now) {
        try {
            mount();
        } catch (...) {
            force_cleanup();  // the destructor does not run for a throwing constructor
            throw;
        }
    }
}

MountFixture::~MountFixture() { force_cleanup(); }

std::string MountFixture::path(std::string_view rel) const {
    return rel.empty() ? mnt_ : mnt_ + "/" + std::string(rel);
}

std::string MountFixture::scratch(std::string_view rel) const {
    return rel.empty() ? dir_ : dir_ + "/" + std::string(rel);
}

std::string MountFixture::daemon_log() const {
    if (log_path_.empty()) return "";
    std::ifstream in(log_path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool MountFixture::in_mountinfo() const {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // Fields: id parent major:minor root mountpoint ...
        std::istringstream ls(line);
        std::string f[5];
        for (auto& x : f) ls >> x;
        if (f[4] == mnt_) return true;
    }
    return false;
}

void MountFixture::mount() {
    REQUIRE_FALSE(mounted());
    const std::string bin = daemon_binary();
    if (access(bin.c_str(), X_OK) != 0) {
        FAIL("the daemon binary " << bin
                                  << " is not there (set HIODSFS_BIN, or build the hiodsfs target)");
    }
    ++mount_count_;
    log_path_ = dir_ + "/daemon." + std::to_string(mount_count_) + ".log";
    std::vector<std::string> argv = {bin, source_.empty() ? store_ : source_, mnt_, "-f"};
    std::string opts;
    for (const auto& o : with_test_defaults(options_)) opts += (opts.empty() ? "" : ",") + o;
    if (const std::string more = run_daemon_options(); !more.empty()) opts += (opts.empty() ? "" : ",") + more;
    if (!opts.empty()) {
        argv.push_back("-o");
        argv.push_back(opts);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);

    int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(log_fd >= 0);
    const char* input = stdin_path_.empty() ? "/dev/null" : stdin_path_.c_str();
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int devnull = ::open(input, O_RDONLY);
        dup2(devnull, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execv(args[0], args.data());
        const char msg[] = "exec of the daemon failed\n";
        (void)!::write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    ::close(log_fd);
    pid_ = pid;

    std::string cmdline;
    for (const auto& a : argv) cmdline += (cmdline.empty() ? "" : " ") + a;
    const auto timeout = std::chrono::seconds(env_long("HIODSFS_MOUNT_TIMEOUT", 30));
    const auto deadline = Clock::now() + timeout;
    struct stat parent{};
    REQUIRE(::stat(dir_.c_str(), &parent) == 0);
    for (;;) {
        int wstatus = 0;
        pid_t r = waitpid(pid_, &wstatus, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            if (in_mountinfo()) run({"fusermount3", "-uz", mnt_});
            FAIL("the daemon exited (status " << decode_status(wstatus)
                                              << ") before the mount was live.\ncommand: " << cmdline
                                              << "\ndaemon output:\n"
                                              << daemon_log());
        }
        // mountinfo first: a stat of a mount whose daemon does not answer would hang.
        if (in_mountinfo()) {
            struct stat st{};
            if (::stat(mnt_.c_str(), &st) == 0 && st.st_dev != parent.st_dev) return;
        }
        if (Clock::now() >= deadline) {
            force_cleanup();
            FAIL("the mount did not become live within " << timeout.count() << " s.\ncommand: "
                                                         << cmdline << "\ndaemon output:\n"
                                                         << daemon_log());
        }
        std::this_thread::sleep_for(10ms);
    }
}

void MountFixture::unmount() {
    const int status = unmount_status();
    INFO("daemon output:\n" << daemon_log());
    REQUIRE(status == 0);
}

int MountFixture::unmount_status() {
    REQUIRE(mounted());
    CmdResult r;
    for (int attempt = 0; attempt < 50; ++attempt) {
        r = run({"fusermount3", "-u", mnt_});
        if (r.ok()) break;
        std::this_thread::sleep_for(100ms);
    }
    if (!r.ok()) FAIL("fusermount3 -u " << mnt_ << " failed: " << r.describe());
    const auto timeout = std::chrono::seconds(env_long("HIODSFS_UNMOUNT_TIMEOUT", 120));
    int wstatus = 0;
    if (!wait_until(pid_, Clock::now() + timeout, &wstatus)) {
        FAIL("the daemon (pid " << pid_ << ") did not exit within " << timeout.count()
                                << " s of the unmount.\ndaemon output:\n"
                                << daemon_log());
    }
    pid_ = -1;
    return decode_status(wstatus);
}

void MountFixture::crash(const std::function<void()>& while_dead) {
    REQUIRE(mounted());
    REQUIRE(::kill(pid_, SIGKILL) == 0);
    int wstatus = 0;
    ::waitpid(pid_, &wstatus, 0);
    pid_ = -1;
    if (while_dead) while_dead();
    // The connection is dead ("transport endpoint is not connected"); a
    // plain unmount detaches it, a lazy one if something still holds it.
    for (int attempt = 0; attempt < 20 && in_mountinfo(); ++attempt) {
        if (run({"fusermount3", "-u", mnt_}).ok()) break;
        std::this_thread::sleep_for(100ms);
    }
    if (in_mountinfo()) run({"fusermount3", "-uz", mnt_});
    REQUIRE_FALSE(in_mountinfo());
}

void MountFixture::remount() {
    unmount();
    mount();
}

SpaceCounters MountFixture::counters() {
    REQUIRE_FALSE(mounted());
    SpaceCounters c;
    Status st = read_counters(store_, &c);
    INFO("opening the store " << store_ << " with the engine library");
    REQUIRE(st.to_string() == "ok");
    return c;
}

SpaceCounters MountFixture::counters_between_mounts() {
    unmount();
    SpaceCounters c = counters();
    mount();
    return c;
}

void MountFixture::force_cleanup() noexcept {
    try {
        if (pid_ > 0 || in_mountinfo()) {
            for (int attempt = 0; attempt < 5 && in_mountinfo(); ++attempt) {
                if (run({"fusermount3", "-u", mnt_}).ok()) break;
                std::this_thread::sleep_for(200ms);
            }
            if (in_mountinfo()) run({"fusermount3", "-uz", mnt_});
            if (pid_ > 0) {
                int wstatus = 0;
                if (!wait_until(pid_, Clock::now() + 20s, &wstatus)) {
                    kill(pid_, SIGTERM);
                    if (!wait_until(pid_, Clock::now() + 5s, &wstatus)) {
                        kill(pid_, SIGKILL);
                        waitpid(pid_, &wstatus, 0);
                    }
                }
                pid_ = -1;
            }
            if (in_mountinfo()) run({"fusermount3", "-uz", mnt_});
        }
    } catch (...) {
    }
}

Status read_counters(const std::string& store, SpaceCounters* out, std::chrono::seconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        EngineOptions o;
        o.store_dir = store;
        o.create_if_missing = false;
        o.read_only = true;
        o.background_commit = false;
        std::unique_ptr<Engine> engine;
        Status st = Engine::open(o, &engine);
        if (st.is_ok()) {
            st = engine->counters(out);
            Status cl = engine->close();
            if (st.is_ok()) st = cl;
            return st;
        }
        // Another process (a daemon still shutting down) may hold the store.
        bool busy = st.err() == EBUSY || st.err() == EWOULDBLOCK || st.err() == EAGAIN;
        if (!busy || Clock::now() >= deadline) return st;
        std::this_thread::sleep_for(50ms);
    }
}

long long status_field(const std::string& store, const std::string& field) {
    std::ifstream in(store + "/status.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const auto at = text.find("\"" + field + "\":");
    if (at == std::string::npos) return -1;
    return std::atoll(text.c_str() + at + field.size() + 3);
}

bool wait_drained(const std::string& store, std::chrono::seconds timeout) {
    struct timespec began{};
    ::clock_gettime(CLOCK_REALTIME, &began);
    auto after_began = [&](const struct stat& st) {
        return st.st_mtim.tv_sec > began.tv_sec ||
               (st.st_mtim.tv_sec == began.tv_sec && st.st_mtim.tv_nsec > began.tv_nsec);
    };
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        struct stat st{};
        if (::stat((store + "/status.json").c_str(), &st) == 0 && after_began(st) &&
            status_field(store, "backlog_records") == 0 && status_field(store, "raw_bytes") == 0)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

std::string describe(const SpaceCounters& c) {
    std::ostringstream s;
    s << "logical_bytes=" << c.logical_bytes << " stored_bytes=" << c.stored_bytes
      << " chunk_count=" << c.chunk_count << " dead_bytes=" << c.dead_bytes
      << " inode_count=" << c.inode_count << " dedup_hits=" << c.dedup_hits
      << " cloned_bytes=" << c.cloned_bytes << " disk_bytes=" << c.disk_bytes;
    return s.str();
}

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fill_random(void* buf, std::size_t n, std::uint64_t seed) {
    std::uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
    auto* p = static_cast<unsigned char*>(buf);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t v = splitmix64(s);
        std::memcpy(p + i, &v, 8);
    }
    if (i < n) {
        std::uint64_t v = splitmix64(s);
        std::memcpy(p + i, &v, n - i);
    }
}

std::string random_bytes(std::size_t n, std::uint64_t seed) {
    std::string s(n, '\0');
    fill_random(s.data(), n, seed);
    return s;
}

void write_file(const std::string& path, std::string_view data, mode_t mode) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    INFO("writing " << path << ": " << std::strerror(errno));
    REQUIRE(fd >= 0);
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t w = ::write(fd, data.data() + done, std::min<std::size_t>(data.size() - done, 1 << 20));
        if (w < 0 && errno == EINTR) continue;
        INFO("write: " << std::strerror(errno));
        REQUIRE(w > 0);
        done += static_cast<std::size_t>(w);
    }
    int c = ::close(fd);
    INFO("close: " << std::strerror(errno));
    REQUIRE(c == 0);
}

std::string read_file_or_empty(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string read_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    INFO("reading " << path << ": " << std::strerror(errno));
    REQUIRE(fd >= 0);
    std::string out;
    char buf[1 << 16];
    for (;;) {
        ssize_t r = ::read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            ::close(fd);
            FAIL("read " << path << ": " << std::strerror(e));
        }
        if (r == 0) break;
        out.append(buf, static_cast<std::size_t>(r));
    }
    ::close(fd);
    return out;
}

std::multiset<std::string> thread_names(pid_t pid) {
    std::multiset<std::string> names;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        std::string name = read_file(t.path().string() + "/comm");
        if (!name.empty() && name.back() == '\n') name.pop_back();
        names.insert(std::move(name));
    }
    return names;
}

void make_dir(const std::string& path, mode_t mode) {
    int r = ::mkdir(path.c_str(), mode);
    INFO("mkdir " << path << ": " << std::strerror(errno));
    REQUIRE(r == 0);
}

struct stat stat_of(const std::string& path) {
    struct stat st{};
    int r = ::lstat(path.c_str(), &st);
    INFO("lstat " << path << ": " << std::strerror(errno));
    REQUIRE(r == 0);
    return st;
}

bool exists(const std::string& path) {
    struct stat st{};
    return ::lstat(path.c_str(), &st) == 0;
}

std::string compare_files(const std::string& a, const std::string& b) {
    int fa = ::open(a.c_str(), O_RDONLY | O_CLOEXEC);
    if (fa < 0) return "cannot open " + a + ": " + std::strerror(errno);
    int fb = ::open(b.c_str(), O_RDONLY | O_CLOEXEC);
    if (fb < 0) {
        ::close(fa);
        return "cannot open " + b + ": " + std::strerror(errno);
    }
    std::string result;
    std::vector<char> ba(1 << 20), bb(1 << 20);
    std::uint64_t off = 0;
    for (;;) {
        ssize_t ra = ::pread(fa, ba.data(), ba.size(), static_cast<off_t>(off));
        ssize_t rb = ::pread(fb, bb.data(), bb.size(), static_cast<off_t>(off));
        if (ra < 0 || rb < 0) {
            result = "read error at offset " + std::to_string(off) + ": " + std::strerror(errno);
            break;
        }
        std::size_t n = static_cast<std::size_t>(std::min(ra, rb));
        if (std::memcmp(ba.data(), bb.data(), n) != 0) {
            std::size_t i = 0;
            while (ba[i] == bb[i]) ++i;
            result = "contents differ at byte " + std::to_string(off + i);
            break;
        }
        if (ra != rb) {
            result = "lengths differ: one ends at " + std::to_string(off + n);
            break;
        }
        if (ra == 0) break;
        off += n;
    }
    ::close(fa);
    ::close(fb);
    return result;
}

int run_as(uid_t uid, gid_t gid, const std::function<int()>& fn) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(250);
        umask(022);
        int r = fn();
        _exit(r & 0xff);
    }
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    if (!WIFEXITED(wstatus)) return -1;
    return WEXITSTATUS(wstatus);
}

std::vector<Root> ext4_and_mount(const MountFixture& fx, const std::string& name) {
    std::vector<Root> roots = {{fx.scratch("ref-" + name), false, "on the backing file system (reference)"},
                               {fx.path(name), true, "in the hiodsfs mount"}};
    for (const auto& r : roots) {
        INFO(r.where);
        make_dir(r.dir);
    }
    return roots;
}

void tick() { std::this_thread::sleep_for(20ms); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
thread_local std::set<std::pair<dev_t, ino_t>>* g_du_seen = nullptr;
thread_local std::uint64_t g_du_total = 0;
}  // namespace

std::uint64_t du_bytes(const std::string& path) {
    // Not du(1): it exits 1 when a file goes between its listing and its
    // stat, as the daemon's status.json.tmp does every control interval.
    // A file that went counts as not there (FTW_NS); a hard link once.
    std::set<std::pair<dev_t, ino_t>> seen;
    g_du_seen = &seen;
    g_du_total = 0;
    const int r = nftw(
        path.c_str(),
        [](const char*, const struct stat* st, int flag, FTW*) {
            if (flag != FTW_NS && g_du_seen->emplace(st->st_dev, st->st_ino).second)
                g_du_total += static_cast<std::uint64_t>(st->st_blocks) * 512;
            return 0;
        },
        32, FTW_PHYS | FTW_MOUNT);
    g_du_seen = nullptr;
    INFO("du of " << path << ": " << std::strerror(errno));
    REQUIRE(r == 0);
    return g_du_total;
}

bool mounted_at(const std::string& mnt, std::string* fstype) {
    bool found = false;
    for (const MountLine& m : mount_lines())
        if (m.mountpoint == mnt) {
            found = true;
            if (fstype != nullptr) *fstype = m.fstype;
        }
    return found;
}

std::size_t line_count(const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += c == '\n';
    if (!s.empty() && s.back() != '\n') ++n;
    return n;
}

AbortGuard::~AbortGuard() {
    for (int round = 0; round < 10; ++round) {
        bool any = false;
        for (const MountLine& m : mount_lines()) {
            if (m.mountpoint != mnt) continue;
            any = true;
            if (m.fstype.rfind("fuse", 0) == 0) {
                // The connection number is the mount's minor device number.
                const std::string conn =
                    "/sys/fs/fuse/connections/" + m.dev.substr(m.dev.find(':') + 1);
                if (::access(conn.c_str(), F_OK) != 0)
                    (void)run({"mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"}, {},
                              20s);
                const int fd = ::open((conn + "/abort").c_str(), O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                    (void)!::write(fd, "1", 1);
                    ::close(fd);
                }
            }
        }
        if (!any) return;
        ::umount2(mnt.c_str(), MNT_DETACH);
    }
}

void flip_byte(const std::string& path, std::uint64_t offset, std::uint8_t mask) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    INFO("flipping a byte of " << path);
    REQUIRE(f.good());
    f.seekg(static_cast<std::streamoff>(offset));
    char ch = 0;
    f.read(&ch, 1);
    ch = static_cast<char>(ch ^ static_cast<char>(mask));
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&ch, 1);
    REQUIRE(f.good());
}

}  // namespace hiodsfs::mt
