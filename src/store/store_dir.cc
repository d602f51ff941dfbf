#include "store/store_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace hiodsfs {
namespace {

std::string octal(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

// The user this process acts as, and root: who may own a store.
bool trusted_owner(uid_t uid) { return uid == ::geteuid() || uid == 0; }

std::string trusted_owners() {
    const uid_t me = ::geteuid();
    return me == 0 ? "root" : "uid " + std::to_string(me) + " or root";
}

// The refusal of what (a path) that owner st fails the rule for; "" when it passes.
std::string owner_problem(const std::string& what, const struct stat& st) {
    if (!trusted_owner(st.st_uid))
        return what + " is owned by uid " + std::to_string(st.st_uid) + ", not by " +
               trusted_owners() + ": its owner could replace its files while it is open";
    return "";
}

Status symlink_refused(const std::string& shown, const std::string& store) {
    return Status::error(ELOOP,
                         shown + " is a symbolic link, which is never followed inside " + store);
}

// The directory a path that does not exist yet would be made in ("" at the top).
std::string directory_to_make_in(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return path == "." ? "" : ".";
    if (slash == 0) return path.size() > 1 ? "/" : "";
    return path.substr(0, slash);
}

}  // namespace

Status StoreDir::open(const std::string& path, const StoreDirOptions& options,
                      std::unique_ptr<StoreDir>* out) {
    if (path.empty()) return Status::error(EINVAL, "no store directory given");
    std::unique_ptr<StoreDir> d(new StoreDir());
    d->path_ = path;
    d->options_ = options;
    // The path as given may pass through symbolic links (the user's to
    // choose); below it, none is followed.
    auto open_it = [&] {
        return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    };
    d->fd_ = open_it();
    if (!d->fd_.valid() && errno == ENOENT && options.create && !options.read_only) {
        if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
            return Status::from_errno(errno, "cannot create store directory " + path);
        d->fd_ = open_it();
    }
    if (!d->fd_.valid()) {
        const int err = errno;
        if (err == ENOTDIR) return Status::error(ENOTDIR, "store " + path + " is not a directory");
        return Status::from_errno(err, "store " + path);
    }
    struct stat st {};
    if (::fstat(d->fd_.get(), &st) != 0) return Status::from_errno(errno, "store " + path);
    const std::string waive = options.waiver.empty() ? "" : ", or " + options.waiver;
    if (options.check_owner) {
        const std::string owner = owner_problem("store " + path, st);
        if (!owner.empty())
            return Status::error(EPERM, owner + "; chown it to " + trusted_owners() + waive);
        if ((st.st_mode & 022) != 0) {
            const char* who = (st.st_mode & 022) == 022 ? "group and others"
                              : (st.st_mode & 020)      ? "group"
                                                        : "others";
            return Status::error(
                EPERM, "store " + path + " is writable by " + who + " (mode " + octal(st.st_mode) +
                           "): they could replace its files while it is open; chmod go-w it" +
                           waive);
        }
    }
    if (::faccessat(d->fd_.get(), ".", options.read_only ? R_OK | X_OK : R_OK | W_OK | X_OK, 0) !=
        0)
        return Status::from_errno(errno, "store " + path + " is not accessible");
    d->via_fd_ = proc_path(d->fd_.get());
    if (d->via_fd_.empty())
        d->via_fd_ = path;
    else
        d->aliases_.emplace_back(d->via_fd_, path);
    HIODSFS_TRY(Env::beneath(d->fd_.get(), path, d->via_fd_, &d->env_));
    *out = std::move(d);
    return Status::ok();
}

std::string StoreDir::proc_path(int fd) {
    const std::string p = "/proc/self/fd/" + std::to_string(fd);
    struct stat through {
    }, direct{};
    if (::stat(p.c_str(), &through) != 0 || ::fstat(fd, &direct) != 0) return "";
    return through.st_dev == direct.st_dev && through.st_ino == direct.st_ino ? p : "";
}

Status StoreDir::library_dir(const std::string& name, bool create, std::string* path) {
    const std::string shown = path_ + "/" + name;
    if (create && !options_.read_only && ::mkdirat(fd(), name.c_str(), 0700) != 0 &&
        errno != EEXIST)
        return Status::from_errno(errno, "create " + shown);
    UniqueFd dir(::openat(fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!dir.valid()) {
        const int err = errno;
        if (::fstatat(fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            return symlink_refused(shown, path_);
        return Status::from_errno(err, "open " + shown);
    }
    if (::fstat(dir.get(), &st) != 0) return Status::from_errno(errno, "stat " + shown);
    if (options_.check_owner) {
        const std::string owner = owner_problem(shown, st);
        if (!owner.empty()) return Status::error(EPERM, owner);
    }
    // Before the library opens anything in it: no one else may put a link there meanwhile.
    if (!options_.read_only && (st.st_mode & 077) != 0 &&
        ::fchmod(dir.get(), st.st_mode & 0700) != 0)
        return Status::from_errno(
            errno, "cannot make " + shown + " (mode " + octal(st.st_mode) + ") private");
    struct stat data {};
    const std::string data_shown = shown + "/data.mdb";
    if (::fstatat(dir.get(), "data.mdb", &data, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(data.st_mode)) return symlink_refused(data_shown, path_);
        if (!S_ISREG(data.st_mode))
            return Status::error(EINVAL, data_shown + " is not a regular file");
        if (data.st_nlink != 1)
            return Status::error(EMLINK, data_shown + " has " + std::to_string(data.st_nlink) +
                                             " links: writing it would change another file");
        if (options_.check_owner) {
            const std::string owner = owner_problem(data_shown, data);
            if (!owner.empty()) return Status::error(EPERM, owner);
        }
    }
    const std::string through = proc_path(dir.get());
    *path = through.empty() ? shown : through;
    if (!through.empty()) aliases_.emplace_back(through, shown);
    library_fds_.push_back(std::move(dir));
    return Status::ok();
}

Status StoreDir::named(const Status& st) const {
    if (st.is_ok()) return st;
    std::string m = st.message();
    for (const auto& [from, to] : aliases_) {
        // "/proc/self/fd/1" must not match the start of "/proc/self/fd/12".
        for (std::size_t at = m.find(from); at != std::string::npos; at = m.find(from, at)) {
            const std::size_t end = at + from.size();
            if (end < m.size() && m[end] >= '0' && m[end] <= '9') {
                at = end;
                continue;
            }
            m.replace(at, from.size(), to);
            at += to.size();
        }
    }
    return Status::error(st.err(), m);
}

Status StoreDir::statvfs(struct statvfs* out) const {
    if (::fstatvfs(fd(), out) != 0) return Status::from_errno(errno, "statfs of store " + path_);
    return Status::ok();
}

Status check_outside_mount(const std::string& dir, const std::string& what,
                           const std::string& mountpoint) {
    struct stat mp {};
    if (::stat(mountpoint.c_str(), &mp) != 0) return Status::ok();  // the mount says what is wrong
    // The directory, or the nearest one above it that exists.
    std::string at = dir;
    UniqueFd cur;
    while (!at.empty()) {
        cur = UniqueFd(::open(at.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (cur.valid() || errno != ENOENT) break;
        at = directory_to_make_in(at);
    }
    if (!cur.valid()) return Status::ok();  // the store's own open says what is wrong
    const std::string why =
        ": the daemon would reach it through its own mount and wait on itself; put it outside " +
        mountpoint;
    // Up through ".." to the root, whose ".." is itself.
    for (bool first = at == dir;; first = false) {
        struct stat st {};
        if (::fstat(cur.get(), &st) != 0) return Status::ok();
        if (st.st_dev == mp.st_dev && st.st_ino == mp.st_ino)
            return Status::error(
                EINVAL, what + " " + dir +
                            (first ? " is the mount point " : " lies inside the mount point ") +
                            mountpoint + why);
        UniqueFd up(::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
        struct stat above {};
        if (!up.valid() || ::fstat(up.get(), &above) != 0) return Status::ok();
        if (above.st_dev == st.st_dev && above.st_ino == st.st_ino) return Status::ok();
        cur = std::move(up);
    }
}

}  // namespace hiodsfs
