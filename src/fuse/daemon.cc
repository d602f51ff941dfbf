#include "fuse/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/options.h"
#include "cli/passphrase.h"
#include "common/mountinfo.h"
#include "common/name_escape.h"
#include "common/thread_name.h"
#include "fuse/fuse_ops.h"
#include "fuse/kernel_channel.h"
#include "fuse/leased_engine.h"
#include "store/key_file.h"
#include "store/store_dir.h"
#ifdef HIODSFS_HAVE_RADOS
#include "store/rados_tier.h"
#endif

extern char** environ;

namespace hiodsfs::fuse {

using cli::DaemonOptions;

namespace {

std::atomic<bool> g_use_syslog{false};

// Every line the daemon logs may quote a path or a name some user chose
// (a mount point, a store, a mount's source): escaped (common/name_escape.h),
// so none can end the line and forge another, or drive a terminal.
void log_to_terminal_or_syslog(enum fuse_log_level level, const char* fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, again);
    va_end(again);
    if (n < 0) return;
    std::string text(static_cast<std::size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), fmt, ap);
    text.resize(static_cast<std::size_t>(n));
    // libfuse writes some lines in several calls: only a newline that ends
    // a call ends a line.
    const bool ends_line = !text.empty() && text.back() == '\n';
    if (ends_line) text.pop_back();
    const std::string line = escape_line(text);
    if (g_use_syslog) {
        syslog(static_cast<int>(level), "%s", line.c_str());
    } else {
        std::fprintf(stderr, "%s%s", line.c_str(), ends_line ? "\n" : "");
    }
}

void print_error(const std::string& message) {
    std::fprintf(stderr, "hiodsfs: %s\n", escape_line(message).c_str());
}

// "/dev/fd/N": mount.fuse3's drop_privileges hands over an already open
// /dev/fuse descriptor instead of a directory.
bool is_fd_mountpoint(const std::string& path) {
    const std::string prefix = "/dev/fd/";
    return path.rfind(prefix, 0) == 0 && path.size() > prefix.size() &&
           path.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
}

// "FSTYPE SOURCE" of the topmost mount at path (a resolved path), from
// /proc/self/mountinfo; "" when nothing is mounted there.
std::string mounted_at(const std::string& path) {
    std::string found;
    for (const MountInfo& m : read_mountinfo())
        if (m.mountpoint == path) found = m.fstype + " " + m.source;
    return found;
}

bool resolve_paths(DaemonOptions* opt, std::string* error) {
    std::error_code ec;
    std::filesystem::path store = std::filesystem::absolute(opt->store, ec);
    if (ec) {
        *error = "store " + opt->store + ": " + ec.message();
        return false;
    }
    std::string s = store.lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    opt->store = s;
    // Read after the daemon has chdir'ed to /.
    if (!opt->key_file.empty()) opt->key_file = std::filesystem::absolute(opt->key_file, ec).lexically_normal().string();

    if (is_fd_mountpoint(opt->mountpoint)) return true;
    struct stat st {};
    if (::stat(opt->mountpoint.c_str(), &st) != 0) {
        int err = errno;
        *error = "mount point " + opt->mountpoint + ": " + std::strerror(err);
        if (err == ENOTCONN) *error += " (a dead mount: fusermount3 -u " + opt->mountpoint + ")";
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        *error = "mount point " + opt->mountpoint + " is not a directory";
        return false;
    }
    // Mounting over a mount hides it, usually by mistake (a second mount
    // of the same line); an automount point (autofs) is how systemd hands
    // a mount over, so that one is expected.
    if (!opt->nonempty) {
        char* real = ::realpath(opt->mountpoint.c_str(), nullptr);
        const std::string there = real ? mounted_at(real) : "";
        std::free(real);
        if (!there.empty() && there.rfind("autofs ", 0) != 0) {
            *error = "mount point " + opt->mountpoint + " is already a mount point (" + there +
                     " is mounted there); unmount it first, or -o nonempty mounts over it";
            return false;
        }
    }
    // Like mount(8) users expect from most file systems: files under the
    // mount point would vanish from view, usually a mistaken path.
    if (!opt->nonempty) {
        std::filesystem::directory_iterator it(opt->mountpoint, ec);
        if (!ec && it != std::filesystem::directory_iterator()) {
            *error = "mount point " + opt->mountpoint +
                     " is not empty (-o nonempty mounts over its contents)";
            return false;
        }
    }
    // The shutdown path unmounts by name after the daemon has chdir'ed to /.
    char* real = ::realpath(opt->mountpoint.c_str(), nullptr);
    if (real) {
        opt->mountpoint = real;
        std::free(real);
    }
    // Before anything is made or mounted: a store inside its own mount
    // would have the daemon wait on itself.
    Status outside =
        check_outside_mount(opt->store, opt->rados ? "cache_dir" : "store", opt->mountpoint);
    if (!outside) {
        *error = outside.message();
        return false;
    }
    return true;
}

// The write end of a pipe the background parent waits on: the child sends
// the exit code once the mount is up or start-up failed.
class StartupReport {
public:
    StartupReport() = default;
    StartupReport(const StartupReport&) = delete;
    StartupReport& operator=(const StartupReport&) = delete;
    ~StartupReport() {
        if (fd_ >= 0) ::close(fd_);
    }

    // Forks. Returns in the child (true) or, in the parent, never: it exits
    // with the child's report. False if the fork failed.
    bool fork_into_background() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) return false;
        pid_t pid = ::fork();
        if (pid < 0) {
            ::close(fds[0]);
            ::close(fds[1]);
            return false;
        }
        if (pid > 0) {
            ::close(fds[1]);
            unsigned char code = 1;
            ssize_t n;
            do {
                n = ::read(fds[0], &code, 1);
            } while (n < 0 && errno == EINTR);
            if (n != 1) {
                print_error("the daemon exited during start-up");
                code = 1;
            }
            std::fflush(stderr);
            ::_exit(code);
        }
        ::close(fds[0]);
        fd_ = fds[1];
        ::setsid();  // leave the terminal's session and its signals
        return true;
    }

    void report(int code) {
        if (fd_ < 0) return;
        unsigned char c = static_cast<unsigned char>(code);
        ssize_t n;
        do {
            n = ::write(fd_, &c, 1);
        } while (n < 0 && errno == EINTR);
        ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

// How long a new daemon waits for one of this host that was just
// unmounted and still writes everything out (umount does not wait for it).
constexpr auto kReleaseWait = std::chrono::seconds(30);

// Opens the engine. A daemon that was just unmounted still holds the
// store's lock while it writes everything out, so a quick remount waits
// for it; a store that is mounted fails at once: a RADOS store's `source`
// by its name, a directory by its device and inode, however it is spelled.
Status open_store(EngineOpener open_engine, const EngineOptions& eo, const std::string& source,
                  std::unique_ptr<Engine>* engine) {
    auto deadline = std::chrono::steady_clock::now() + kReleaseWait;
    for (;;) {
        Status st = open_engine(eo, engine);
        if (st.err() != EBUSY || fuse_source_mounted(source) ||
            hiodsfs_store_mounted(eo.store_dir) || std::chrono::steady_clock::now() > deadline)
            return st;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

void detach_stdio() {
    int null = ::open("/dev/null", O_RDWR);
    if (null < 0) return;
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) ::close(null);
}

// Signals and the orderly end of a mount. SIGTERM/SIGINT/SIGHUP detach
// the mount while requests are still served, so the kernel writes back its
// dirty pages before the connection ends and the loop returns by itself.
// If that does not happen in time (files still open), or a second signal
// comes, the loop is stopped directly.
class ShutdownWatcher {
public:
    static constexpr auto kGrace = std::chrono::seconds(10);

    ShutdownWatcher(fuse_session* se, std::string mountpoint)
        : se_(se), mountpoint_(std::move(mountpoint)) {}
    ShutdownWatcher(const ShutdownWatcher&) = delete;
    ShutdownWatcher& operator=(const ShutdownWatcher&) = delete;
    ~ShutdownWatcher() { stop(); }

    bool install() {
        if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return false;
        write_fd_ = pipe_[1];
        struct sigaction sa {};
        sa.sa_handler = &ShutdownWatcher::on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
        // SIGUSR1 only interrupts the loop's blocking wait (no SA_RESTART).
        struct sigaction wake {};
        wake.sa_handler = [](int) {};
        sigemptyset(&wake.sa_mask);
        ::sigaction(SIGUSR1, &wake, nullptr);
        struct sigaction ign {};
        ign.sa_handler = SIG_IGN;
        ::sigaction(SIGPIPE, &ign, nullptr);
        return true;
    }

    void start(pthread_t loop_thread) {
        loop_thread_ = loop_thread;
        thread_ = std::thread([this] {
            name_this_thread("signals");
            run();
        });
    }

    // After the loop returned.
    void stop() {
        if (thread_.joinable()) {
            char q = 'q';
            (void)!::write(pipe_[1], &q, 1);
            thread_.join();
        }
        // systemd sends SIGTERM to a stopped mount's daemon right after
        // umount; it must not cut short the engine's close that follows.
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_IGN);
        write_fd_ = -1;
        for (int& fd : pipe_) {
            if (fd >= 0) ::close(fd);
            fd = -1;
        }
    }

    // The mount was detached here; unmounting again by name could hit
    // whatever is mounted there next.
    bool detached() const { return detached_; }

private:
    static void on_signal(int) {
        int saved = errno;
        char s = 's';
        if (write_fd_ >= 0) (void)!::write(write_fd_, &s, 1);
        errno = saved;
    }

    void run() {
        using Clock = std::chrono::steady_clock;
        bool asked = false, forced = false;
        Clock::time_point deadline{};
        for (;;) {
            int timeout = -1;
            if (forced) {
                timeout = 500;
            } else if (asked) {
                auto left =
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
                timeout = static_cast<int>(std::max<long long>(0, left.count()));
            }
            pollfd p{pipe_[0], POLLIN, 0};
            int r = ::poll(&p, 1, timeout);
            if (r < 0 && errno == EINTR) continue;
            char c = 0;
            bool got = r > 0 && ::read(pipe_[0], &c, 1) == 1;
            if (got && c == 'q') return;
            if (got && !asked) {
                asked = true;
                deadline = Clock::now() + kGrace;
                fuse_log(FUSE_LOG_NOTICE, "hiodsfs: signal received, unmounting %s\n",
                         mountpoint_.c_str());
                if (detach()) continue;
            }
            // A second signal, the grace time is over, or detaching failed;
            // while forced, keep waking the loop until it has returned.
            if (!forced) fuse_log(FUSE_LOG_NOTICE, "hiodsfs: stopping the request loop\n");
            forced = true;
            fuse_session_exit(se_);
            ::pthread_kill(loop_thread_, SIGUSR1);
        }
    }

    bool detach() {
        if (is_fd_mountpoint(mountpoint_)) return false;
        if (::geteuid() == 0) {
            if (::umount2(mountpoint_.c_str(), MNT_DETACH) != 0) return false;
            detached_ = true;
            return true;
        }
        const char* argv[] = {"fusermount3", "-u", "-z", "--", mountpoint_.c_str(), nullptr};
        pid_t pid = 0;
        if (::posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char**>(argv),
                           environ) != 0)
            return false;
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        detached_ = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        return detached_;
    }

    static inline volatile sig_atomic_t write_fd_ = -1;
    fuse_session* se_;
    std::string mountpoint_;
    int pipe_[2] = {-1, -1};
    pthread_t loop_thread_{};
    std::thread thread_;
    std::atomic<bool> detached_{false};
};

struct SessionDeleter {
    void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};
struct LoopConfigDeleter {
    void operator()(fuse_loop_config* c) const { fuse_loop_cfg_destroy(c); }
};

// fuse_args over strings this object owns; fuse_session_new may replace
// argv with its own allocation, which fuse_opt_free_args releases.
class FuseArgs {
public:
    explicit FuseArgs(std::vector<std::string> args) : strings_(std::move(args)) {
        for (std::string& s : strings_) ptrs_.push_back(s.data());
        ptrs_.push_back(nullptr);
        args_.argc = static_cast<int>(strings_.size());
        args_.argv = ptrs_.data();
        args_.allocated = 0;
    }
    FuseArgs(const FuseArgs&) = delete;
    FuseArgs& operator=(const FuseArgs&) = delete;
    ~FuseArgs() { fuse_opt_free_args(&args_); }
    fuse_args* get() { return &args_; }

private:
    std::vector<std::string> strings_;
    std::vector<char*> ptrs_;
    fuse_args args_{};
};

int serve(fuse_session* se, const DaemonOptions& opt) {
    if (opt.single_thread) return fuse_session_loop(se);
    std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
    if (!config) return -ENOMEM;
    fuse_loop_cfg_set_max_threads(config.get(), opt.threads);
    fuse_loop_cfg_set_clone_fd(config.get(), 0);
    return fuse_session_loop_mt(se, config.get());
}

}  // namespace

int run_daemon(int argc, char** argv, EngineOpener open_engine) {
    fuse_set_log_func(&log_to_terminal_or_syslog);
    DaemonOptions opt;
    std::string error;
    if (!cli::parse_command_line(argc, argv, &opt, &error)) {
        print_error(error);
        return 1;
    }
    if (opt.show_help) {
        std::fputs(cli::usage_text().c_str(), stdout);
        return 0;
    }
    if (opt.show_version) {
        std::printf("hiodsfs %s (libfuse %s)\n", HIODSFS_VERSION, fuse_pkgversion());
        return 0;
    }
    if (!resolve_paths(&opt, &error)) {
        print_error(error);
        return 1;
    }
    for (const std::string& w : opt.warnings) print_error(w);

    FuseState state;
    state.settings.entry_timeout = opt.entry_timeout;
    state.settings.attr_timeout = opt.attr_timeout;
    state.settings.writeback_cache = opt.writeback_cache;
    state.settings.max_write = opt.max_write;

    // libfuse checks its options here, before the store is touched; an
    // unknown one gives its one-line "fuse: unknown option(s)" message.
    std::vector<std::string> fargs = {"hiodsfs", "-o", cli::fuse_option_string(opt)};
    if (opt.debug) fargs.push_back("-d");
    FuseArgs args(std::move(fargs));
    std::unique_ptr<fuse_session, SessionDeleter> se(
        fuse_session_new(args.get(), &fuse_operations(), sizeof(fuse_lowlevel_ops), &state));
    if (!se) return 1;

    // Asked before the fork, which leaves the terminal; a new store's
    // passphrase is asked twice on a terminal. So is a RADOS store's whose
    // cache_dir is new: whether the pool holds it is known only once the
    // daemon connects, and a store must never be made under a mistyped one.
    std::shared_ptr<const Passphrase> passphrase;
    if (opt.key_ask) {
        struct stat format {};
        const bool made = ::fstatat(AT_FDCWD, (opt.store + "/FORMAT").c_str(), &format, AT_SYMLINK_NOFOLLOW) == 0;
        Passphrase p;
        Status asked = cli::ask_passphrase("Passphrase for store " + (opt.rados ? opt.rados_source : opt.store),
                                           !made, &p);
        if (!asked) {
            print_error(asked.message());
            return 1;
        }
        passphrase = std::make_shared<const Passphrase>(std::move(p));
    }

    // Fork now: the engine starts threads, and fork keeps only one.
    StartupReport startup;
    if (!opt.foreground && !startup.fork_into_background()) {
        print_error(std::string("cannot fork into the background: ") + std::strerror(errno));
        return 1;
    }
    auto fail = [&](const std::string& message) {
        if (!message.empty()) print_error(message);
        startup.report(1);
        return 1;
    };

    // Before the engine, which reads its counts until it is closed.
    KernelChannel channel;
    state.channel = &channel;
    if (opt.request_poll_us > 0) channel.poll_for_requests(std::chrono::microseconds(opt.request_poll_us));

    EngineOptions eo;
    eo.log = [](const std::string& message) { fuse_log(FUSE_LOG_ERR, "%s\n", message.c_str()); };
    // The engine the lease watcher stops; set once the engine is open,
    // cleared before it is closed.
    LeasedEngine leased_engine;
#ifdef HIODSFS_HAVE_RADOS
    // Declared before the engine, which uses it until it is closed.
    std::unique_ptr<RadosTier> tier;
    if (opt.rados) {
        auto on_lost = [&leased_engine](const std::string& why) {
            fuse_log(FUSE_LOG_ERR, "hiodsfs: %s\n", why.c_str());
            leased_engine.stop(why);
        };
        RadosOptions ro;
        ro.conf_path = opt.ceph_conf;
        ro.client_id = opt.ceph_id;
        ro.pool = opt.rados_pool;
        ro.timeout = std::chrono::seconds(opt.rados_timeout);
        Status opened = open_locked_tier(ro, opt.rados_store, std::chrono::seconds(opt.rados_lease), kReleaseWait,
                                         on_lost, print_error, &tier);
        if (!opened) return fail(opened.message());
        eo.segments.tier = tier.get();
        eo.segments.cache_bytes = opt.cache_size;
        eo.segments.log = eo.log;
    }
#else
    if (opt.rados)
        return fail(opt.rados_source + ": this hiodsfs was built without librados, so it has no RADOS stores");
#endif
    eo.store_dir = opt.store;
    eo.chunking = opt.chunking;
    eo.chunking_given = opt.chunking_given;
    eo.create_if_missing = true;
    eo.read_only = opt.read_only;
    eo.any_store_owner = opt.unsafe_store_dir;
    eo.commit_interval_ms = opt.commit_interval_ms;
    eo.commit_writes = opt.commit_writes;
    eo.meta_resident_bytes = opt.meta_resident_bytes;
    eo.meta_dirty_bytes = opt.meta_dirty_bytes;
    eo.meta_compact_max_bytes = opt.meta_compact_max_bytes;
    eo.lmdb_map_bytes = opt.meta_map_bytes;
    eo.mode = opt.mode;
    eo.control = opt.control;
    eo.policy = opt.policy;
    eo.compression = opt.compression;
    eo.compression_background = opt.compression_background;
    eo.dictionary_min_bytes = opt.dictionary_min_bytes;
    if (!opt.key_file.empty()) {
        auto key = std::make_shared<StoreKey>();
        Status read = read_key_file(opt.key_file, key.get());
        if (!read) return fail(read.message());
        eo.key = std::move(key);
    }
    eo.passphrase = passphrase;
    eo.background_threads = opt.background_threads;
    eo.background_nice = opt.background_nice;
    eo.compact_threshold = opt.compact_threshold / 100.0;
    eo.backlog_max_bytes = opt.backlog_max_bytes;
    eo.backlog_max_percent = opt.backlog_max_percent;
    // hiodsfs-stat reads STORE/status.json instead of opening a mounted store.
    eo.publish_status = !opt.read_only;
    eo.request_counts = [&channel] { return channel.counts(); };
    // The kernel trusts attributes for a day (DaemonOptions::attr_timeout):
    // a write it was told had landed and that was lost changes the size
    // behind its back. Attributes only (offset -1): no page-cache work
    // that could wait on this request's inode.
    eo.attrs_changed = [s = se.get()](InodeId ino) { fuse_lowlevel_notify_inval_inode(s, ino, -1, 0); };
    std::unique_ptr<Engine> engine;
    Status st = open_store(open_engine, eo, opt.rados ? opt.rados_source : opt.store, &engine);
    if (!st.is_ok()) return fail(st.to_string());
    leased_engine.set(engine.get());
#ifdef HIODSFS_HAVE_RADOS
    // A lease that lapses while the cluster is away is taken again when it
    // is back, if no other client had the store meanwhile.
    if (tier)
        tier->set_lapse_handling(
            [&leased_engine] { return leased_engine.check_tier_unchanged(); },
            [](const std::string& line) { fuse_log(FUSE_LOG_ERR, "%s\n", line.c_str()); });
#endif
    state.vfs = std::make_unique<vfs::Vfs>(*engine);

    ShutdownWatcher watcher(se.get(), opt.mountpoint);
    if (!watcher.install()) return fail(std::string("cannot set up signal handling: ") + std::strerror(errno));
    if (fuse_session_mount(se.get(), opt.mountpoint.c_str()) != 0) {
        leased_engine.clear();
        engine->close();
        return fail("");  // libfuse or fusermount3 said why
    }
    if (!channel.install(se.get())) {
        const std::string why = std::strerror(errno);
        fuse_session_unmount(se.get());
        leased_engine.clear();
        engine->close();
        return fail("cannot take over the FUSE channel: " + why);
    }

    startup.report(0);
    if (!opt.foreground) {
        openlog("hiodsfs", LOG_PID, LOG_DAEMON);
        g_use_syslog = true;
        detach_stdio();
    }
    (void)!::chdir("/");

    watcher.start(pthread_self());
    int loop = serve(se.get(), opt);
    watcher.stop();
    if (loop != 0)
        fuse_log(FUSE_LOG_ERR, "hiodsfs: the request loop ended with an error: %s\n",
                 loop < 0 ? std::strerror(-loop) : ("signal " + std::to_string(loop)).c_str());
    if (!watcher.detached()) fuse_session_unmount(se.get());
    se.reset();
    state.vfs->unpin_all();
    state.vfs.reset();

    // Before close: the lease thread must not reach metadata close resets.
    leased_engine.clear();
    Status closed = engine->close();
#ifdef HIODSFS_HAVE_RADOS
    if (tier) {
        Status unlocked = tier->unlock();
        if (!unlocked)
            fuse_log(FUSE_LOG_ERR, "hiodsfs: %s (its lease ends by itself)\n", unlocked.message().c_str());
    }
#endif
    if (!closed.is_ok()) {
        fuse_log(FUSE_LOG_ERR, "hiodsfs: closing the store failed: %s\n",
                 closed.to_string().c_str());
        return 1;
    }
    return loop == 0 ? 0 : 1;
}

}  // namespace hiodsfs::fuse
