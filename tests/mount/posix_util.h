// Helpers of the POSIX mount tests (posix_*_test.cc): a descriptor that
// closes itself, whole reads and writes, directory listings, extended
// attributes, timestamps, a umask for a scope.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

namespace hiodsfs::mt {

// RAII file descriptor for the tests.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const std::string& path, int flags, mode_t mode = 0644)
        : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = o.fd_;
            o.fd_ = -1;
        }
        return *this;
    }
    int get() const { return fd_; }
    bool ok() const { return fd_ >= 0; }
    int close() {
        int r = ::close(fd_);
        fd_ = -1;
        return r;
    }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

#define REQUIRE_FD(fd) \
    do { INFO("open: " << std::strerror(errno)); REQUIRE((fd).ok()); } while (0)

inline int renameat2_sys(const std::string& from, const std::string& to, unsigned flags) {
    return static_cast<int>(
        syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

inline std::string pread_all(int fd, std::uint64_t off, std::size_t len) {
    std::string out(len, '\0');
    std::size_t done = 0;
    while (done < len) {
        ssize_t r = ::pread(fd, out.data() + done, len - done, static_cast<off_t>(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += static_cast<std::size_t>(r);
    }
    out.resize(done);
    return out;
}

inline void pwrite_all(int fd, std::string_view data, std::uint64_t off) {
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t w = ::pwrite(fd, data.data() + done, data.size() - done,
                             static_cast<off_t>(off + done));
        if (w < 0 && errno == EINTR) continue;
        INFO("pwrite at " << off + done << ": " << std::strerror(errno));
        REQUIRE(w > 0);
        done += static_cast<std::size_t>(w);
    }
}

inline bool all_zero(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

inline std::set<std::string> list_dir(const std::string& dir) {
    std::set<std::string> names;
    DIR* d = opendir(dir.c_str());
    INFO("opendir " << dir << ": " << std::strerror(errno));
    REQUIRE(d != nullptr);
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.insert(n);
    }
    closedir(d);
    return names;
}

inline std::set<std::string> xattr_names(const std::string& path) {
    std::set<std::string> names;
    ssize_t n = llistxattr(path.c_str(), nullptr, 0);
    if (n <= 0) return names;
    std::string buf(static_cast<std::size_t>(n) + 1024, '\0');
    n = llistxattr(path.c_str(), buf.data(), buf.size());
    if (n <= 0) return names;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n);) {
        std::string name(buf.data() + i);
        names.insert(name);
        i += name.size() + 1;
    }
    return names;
}

inline std::string get_xattr(const std::string& path, const std::string& name) {
    ssize_t n = lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    INFO("getxattr " << path << " " << name << ": " << std::strerror(errno));
    REQUIRE(n >= 0);
    std::string v(static_cast<std::size_t>(n), '\0');
    n = lgetxattr(path.c_str(), name.c_str(), v.data(), v.size());
    REQUIRE(n == static_cast<ssize_t>(v.size()));
    return v;
}

inline bool ts_less(const timespec& a, const timespec& b) {
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

struct UmaskGuard {
    mode_t old;
    explicit UmaskGuard(mode_t m) : old(::umask(m)) {}
    ~UmaskGuard() { ::umask(old); }
};
}  // namespace hiodsfs::mt
