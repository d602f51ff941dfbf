// Test support for the mount tests: a real hiodsfs daemon on a real FUSE
// mount in a fresh temporary directory, plus small helpers (run a command,
// make and compare files, act as another user).
//
// MountFixture is RAII: whatever a test does or however it fails, the
// destructor unmounts (fusermount3 -u, retried, then -uz and kill) and
// removes the temporary directory. The daemon binary is $HIODSFS_BIN, else
// the build tree's src/fuse/hiodsfs.
// Thread-safety: a fixture belongs to the test that made it; the free
// helpers may be called from any thread, except those that use Catch2
// assertions (they say so), which only the test's own thread may call.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/engine.h"

namespace hiodsfs::mt {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

// The unprivileged user and group (nobody, nogroup) that permission tests
// act as.
constexpr uid_t kUser = 65534;
constexpr gid_t kGroup = 65534;

// The daemon under test.
std::string daemon_binary();
// More -o options for every daemon of the run, from HIODSFS_DAEMON_OPTIONS
// (scripts/test gives the TSan daemon a smaller metadata map: TSan has
// 1.5 TiB of addresses); "" if none.
std::string run_daemon_options();
// A test's -o options with the tests' defaults before them: background work
// at nice 0 unless the test sets background_nice. scripts/test runs several
// test binaries at once in one session, and a pass at the daemon's default
// nice 19 would get a sliver of the CPU beside them and drain for minutes;
// tests/mount/hybrid_test.cc's [nice] test runs it niced.
std::vector<std::string> with_test_defaults(const std::vector<std::string>& opts);
// An integer from the environment, or def when unset or not a number.
long env_long(const char* name, long def);
bool is_root();
// Full path of a program on $PATH, or "" when it is not there.
std::string which(const std::string& program);

// The result of a command run to completion.
struct CmdResult {
    int status = -1;  // exit code; 128+N when killed by signal N; -1 when it could not start
    std::string out, err;
    bool timed_out = false;
    bool ok() const { return status == 0; }
    // "exit 1; stderr: ..." for failure messages.
    std::string describe() const;
};

// Runs argv (looked up on $PATH) with stdin from /dev/null, capturing stdout
// and stderr; `env` entries ("K=V") are added to the environment. A command
// still running after `timeout` is killed.
CmdResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
              std::chrono::seconds timeout = std::chrono::seconds(600));
// Runs a /bin/sh script the same way.
CmdResult sh(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds(600));
// Single-quotes a string for /bin/sh.
std::string shq(std::string_view s);

// A fresh directory (mode 0755) under $TMPDIR or /tmp; removed with
// everything in it on destruction (never crossing into another mount).
class TempDir {
public:
    explicit TempDir(const std::string& prefix = "hiodsfs-mt-");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Removes a tree without following symlinks or crossing mounts; best effort.
void remove_tree(const std::string& path) noexcept;

class MountFixture {
public:
    // `options` are the daemon's -o options ("chunking=fixed", ...). Mounts
    // at once unless mount_now is false.
    explicit MountFixture(std::vector<std::string> options = {}, bool mount_now = true);
    ~MountFixture();
    MountFixture(const MountFixture&) = delete;
    MountFixture& operator=(const MountFixture&) = delete;

    const std::string& dir() const { return dir_; }      // the temp dir (backing fs)
    const std::string& store() const { return store_; }  // dir/store
    const std::string& mnt() const { return mnt_; }      // dir/mnt
    // mnt/rel: a path inside the mount.
    std::string path(std::string_view rel) const;
    // dir/rel: a path on the backing file system, beside the store.
    std::string scratch(std::string_view rel) const;
    const std::vector<std::string>& options() const { return options_; }
    // What the daemon mounts: store() unless set (a rados:POOL/STORE
    // source, whose cache_dir the options name).
    void set_source(std::string source) { source_ = std::move(source); }
    void set_options(std::vector<std::string> options) { options_ = std::move(options); }
    // The daemon's standard input: this file (a passphrase for key=ask)
    // instead of /dev/null.
    void set_stdin(std::string path) { stdin_path_ = std::move(path); }

    // Starts the daemon in the foreground (-f) and waits until the mount is
    // live; FAILs (with the daemon's stderr) when it does not come up.
    void mount();
    // fusermount3 -u, then waits for the daemon to exit; REQUIREs status 0.
    void unmount();
    // The same, returning the daemon's exit status instead of checking it.
    int unmount_status();
    // unmount() + mount(): everything read afterwards comes from the store,
    // not from the kernel's caches.
    void remount();
    // SIGKILLs the daemon (a crash at a random moment), reaps it, and
    // detaches the dead mount; mount() may follow. while_dead runs between
    // the kill and the detach: a writer still running must be joined there,
    // while its calls fail with ENOTCONN, or it would go on writing into the
    // bare mount point once the mount is gone.
    void crash(const std::function<void()>& while_dead = {});
    bool mounted() const { return pid_ > 0; }
    pid_t daemon_pid() const { return pid_; }
    // The daemon's stdout+stderr of the current (or last) mount.
    std::string daemon_log() const;

    // Opens the store with the engine library (only while unmounted: one
    // process at a time) and returns its counters. REQUIREs success.
    SpaceCounters counters();
    // unmount(), counters(), mount().
    SpaceCounters counters_between_mounts();

private:
    void force_cleanup() noexcept;
    bool in_mountinfo() const;

    TempDir tmp_;
    std::string dir_, store_, mnt_;
    std::vector<std::string> options_;
    std::string source_;
    std::string stdin_path_;
    pid_t pid_ = -1;
    int mount_count_ = 0;
    std::string log_path_;
};

// Opens an existing store with the engine library, read-only, and returns
// its counters. Waits (up to timeout) while another process holds the store.
// Uses no Catch2 assertions; the Status says what went wrong.
Status read_counters(const std::string& store, SpaceCounters* out,
                     std::chrono::seconds timeout = std::chrono::seconds(30));
std::string describe(const SpaceCounters& c);
// A number from STORE/status.json, which the daemon rewrites every control
// interval; -1 when the file or the field is not there.
long long status_field(const std::string& store, const std::string& field);
// Waits until the daemon on `store` reports an empty dirty queue and no raw
// bytes, in a status.json it published after this call began (an older one
// may predate the writes the caller wants drained).
bool wait_drained(const std::string& store, std::chrono::seconds timeout);

// Deterministic pseudo-random bytes (fast; not for cryptography).
std::string random_bytes(std::size_t n, std::uint64_t seed);
void fill_random(void* buf, std::size_t n, std::uint64_t seed);
std::uint64_t splitmix64(std::uint64_t& state);

// Catch2-asserting file helpers (test thread only).
void write_file(const std::string& path, std::string_view data, mode_t mode = 0644);
std::string read_file(const std::string& path);
// A file's bytes, or "" when it cannot be read (status.json is replaced by a
// rename every control interval); never a test failure.
std::string read_file_or_empty(const std::string& path);
// The names of a process's threads (/proc/PID/task/*/comm), one per thread.
std::multiset<std::string> thread_names(pid_t pid);
void make_dir(const std::string& path, mode_t mode = 0755);
struct stat stat_of(const std::string& path);   // lstat; REQUIREs success
bool exists(const std::string& path);           // lstat succeeds
// XORs the byte at offset of a file (on the backing file system) with mask:
// damage as a disk would do it.
void flip_byte(const std::string& path, std::uint64_t offset, std::uint8_t mask = 0x01);
// Byte comparison of two files; "" when equal, else where they differ.
std::string compare_files(const std::string& a, const std::string& b);

// errno of a failed call, or 0 when it succeeded (did not return -1).
#define MT_ERRNO(expr)                                   \
    ([&]() -> int {                                      \
        errno = 0;                                       \
        const long mt_r_ = static_cast<long>(expr);      \
        return mt_r_ == -1 ? errno : 0;                  \
    }())

// Runs fn in a forked child with the given credentials (setgroups({}),
// setgid, setuid) and returns what fn returned (0..255; an errno value is
// the usual choice), or -1 when the child died. fn must not use Catch2.
int run_as(uid_t uid, gid_t gid, const std::function<int()>& fn);

// A fresh directory named `name` on the backing file system (the reference:
// ext4 on the machines we run on) and one in the mount, in that order, so a
// check written once runs against both and a wrong expectation shows up on
// the reference first.
struct Root {
    std::string dir;
    bool in_mount = false;
    const char* where = "";  // for messages
};
std::vector<Root> ext4_and_mount(const MountFixture& fx, const std::string& name);

// Sleeps long enough for the kernel's file time stamps to move on.
void tick();
// Seconds since t0, for tests that report how long a step took.
double seconds_since(std::chrono::steady_clock::time_point t0);
// Disk usage of a directory tree in bytes, as `du -sB1` counts it, of the
// files that are there: one that goes meanwhile (a store's status.json.tmp)
// is not an error (Catch2-asserting).
std::uint64_t du_bytes(const std::string& path);

// Whether something is mounted at mnt (an absolute path without symbolic
// links), from /proc/self/mountinfo: never a stat of the mount, which would
// hang on a daemon that does not answer. *fstype gets the topmost's type.
bool mounted_at(const std::string& mnt, std::string* fstype = nullptr);
// Lines of a command's output ("a\nb" and "a\nb\n" are two).
std::size_t line_count(const std::string& s);

// Takes down every FUSE mount at mnt when a test ends, however it ends,
// without a system call on the mount's files: its connection is aborted
// through fusectl (/sys/fs/fuse/connections/N/abort, mounted if need be),
// which ends every request a daemon stuck on its own mount waits for, then
// the mount is detached. Other mounts at mnt (a bind mount) are unmounted.
struct AbortGuard {
    std::string mnt;
    ~AbortGuard();
};

// An ext4 of `bytes` on a loop device at `dir` (its image beside it),
// unmounted on destruction however the test ends (root; mkfs.ext4).
struct LoopExt4 {
    std::string dir, image;
    bool mounted = false;
    LoopExt4(std::string d, std::uint64_t bytes);
    ~LoopExt4();
    LoopExt4(const LoopExt4&) = delete;
    LoopExt4& operator=(const LoopExt4&) = delete;
};

// The daemon in the foreground as MountFixture runs it, with the store and
// mount point where the test puts them (on a small file system, say);
// unmounted and reaped on destruction however the test ends.
struct ForegroundDaemon {
    std::string store, mnt;
    pid_t pid = -1;
    // Starts it with these -o options and waits until the mount is live.
    void start(const std::vector<std::string>& opts);
    // Unmounts; CHECKs that the daemon exited 0.
    void stop();
    ~ForegroundDaemon();
};

}  // namespace hiodsfs::mt
