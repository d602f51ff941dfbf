// Env::posix(): the Env on top of POSIX system calls, and Env::beneath():
// the same for one directory tree reached from its descriptor. Every error
// names the operation and the path so a person can tell which file failed
// and how.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "hiodsfs/env.h"

namespace hiodsfs {

Status File::preadv(const struct iovec* iov, int count, std::uint64_t offset, std::size_t* got) {
    *got = 0;
    return preadv_rest(this, iov, count, offset, got);
}

Status File::preadv_rest(File* f, const struct iovec* iov, int count, std::uint64_t offset,
                         std::size_t* got) {
    std::size_t skip = *got;
    for (int i = 0; i < count; ++i) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        const std::size_t want = iov[i].iov_len - skip;
        std::size_t n = 0;
        HIODSFS_TRY(f->pread(static_cast<char*>(iov[i].iov_base) + skip, want, offset + *got, &n));
        *got += n;
        if (n < want) break;  // end of file
        skip = 0;
    }
    return Status::ok();
}

namespace {

class PosixFile final : public File {
public:
    PosixFile(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

    Status pwrite(const void* data, std::size_t len, std::uint64_t offset) override {
        const char* p = static_cast<const char*>(data);
        while (len > 0) {
            ssize_t n = ::pwrite(fd_.get(), p, len, static_cast<off_t>(offset));
            if (n < 0) {
                if (errno == EINTR) continue;
                return Status::from_errno(
                    errno, "pwrite " + path_ + " at offset " + std::to_string(offset));
            }
            if (n == 0) {
                // No error and no progress: looping would spin forever.
                return Status::error(EIO, "pwrite " + path_ + " at offset " +
                                              std::to_string(offset) + ": wrote 0 of " +
                                              std::to_string(len) + " bytes");
            }
            p += n;
            len -= static_cast<std::size_t>(n);
            offset += static_cast<std::uint64_t>(n);
        }
        return Status::ok();
    }

    Status pread(void* data, std::size_t len, std::uint64_t offset, std::size_t* got) override {
        char* p = static_cast<char*>(data);
        std::size_t total = 0;
        while (total < len) {
            ssize_t n =
                ::pread(fd_.get(), p + total, len - total, static_cast<off_t>(offset + total));
            if (n < 0) {
                if (errno == EINTR) continue;
                *got = total;
                return Status::from_errno(
                    errno, "pread " + path_ + " at offset " + std::to_string(offset + total));
            }
            if (n == 0) break;  // end of file
            total += static_cast<std::size_t>(n);
        }
        *got = total;
        return Status::ok();
    }

    Status preadv(const struct iovec* iov, int count, std::uint64_t offset, std::size_t* got) override {
        std::size_t want = 0;
        for (int i = 0; i < count; ++i) want += iov[i].iov_len;
        ssize_t n;
        do {
            n = ::preadv(fd_.get(), iov, count, static_cast<off_t>(offset));
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            *got = 0;
            return Status::from_errno(errno, "preadv " + path_ + " at offset " + std::to_string(offset));
        }
        *got = static_cast<std::size_t>(n);
        // Short of end of file (rare for regular files): the rest buffer by buffer.
        if (*got < want) return File::preadv_rest(this, iov, count, offset, got);
        return Status::ok();
    }

    void start_writeback(std::uint64_t offset, std::uint64_t len) override {
        // A hint: a failure here shows at the next fdatasync, if it matters.
        (void)::sync_file_range(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(len),
                                SYNC_FILE_RANGE_WRITE);
    }

    Status sync() override {
        // EINTR means the call was interrupted before it did its work, so a
        // retry is safe; any other failure is reported (never retried: after
        // a failed fdatasync the kernel may already have dropped the pages).
        int rc;
        do {
            rc = ::fdatasync(fd_.get());
        } while (rc != 0 && errno == EINTR);
        if (rc != 0) return Status::from_errno(errno, "fdatasync " + path_);
        return Status::ok();
    }

    Status size(std::uint64_t* out) override {
        struct stat st;
        if (::fstat(fd_.get(), &st) != 0) return Status::from_errno(errno, "fstat " + path_);
        *out = static_cast<std::uint64_t>(st.st_size);
        return Status::ok();
    }

    Status truncate(std::uint64_t length) override {
        int rc;
        do {
            rc = ::ftruncate(fd_.get(), static_cast<off_t>(length));
        } while (rc != 0 && errno == EINTR);
        if (rc != 0) {
            return Status::from_errno(errno,
                                      "ftruncate " + path_ + " to " + std::to_string(length));
        }
        return Status::ok();
    }

private:
    UniqueFd fd_;
    std::string path_;
};

// Closes a DIR* on every path out of list_dir.
struct DirCloser {
    void operator()(DIR* d) const { ::closedir(d); }
};

// open(2)'s access and creation flags for a mode.
int access_flags(OpenMode mode) {
    switch (mode) {
        case OpenMode::kRead:
            return O_RDONLY;
        case OpenMode::kReadWrite:
            return O_RDWR | O_CREAT;
        case OpenMode::kCreateNew:
            return O_RDWR | O_CREAT | O_EXCL;
    }
    return O_RDONLY;
}

class PosixEnv final : public Env {
public:
    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        const int flags = O_CLOEXEC | access_flags(mode);
        int fd;
        do {
            // Segments hold file contents: only the store's owner may read them.
            fd = ::open(path.c_str(), flags | O_NOFOLLOW, 0600);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return Status::from_errno(errno, "open " + path);
        *out = std::make_unique<PosixFile>(UniqueFd(fd), path);
        return Status::ok();
    }

    Status unlink(const std::string& path) override {
        if (::unlink(path.c_str()) != 0) return Status::from_errno(errno, "unlink " + path);
        return Status::ok();
    }

    Status rename(const std::string& from, const std::string& to) override {
        if (::rename(from.c_str(), to.c_str()) != 0) {
            return Status::from_errno(errno, "rename " + from + " to " + to);
        }
        return Status::ok();
    }

    Status mkdir(const std::string& path) override {
        if (::mkdir(path.c_str(), 0700) == 0) return Status::ok();
        int err = errno;
        if (err == EEXIST) {
            // Only an existing directory counts as success; a file of that
            // name would make every later path under it fail confusingly.
            struct stat st;
            if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::ok();
            return Status::error(ENOTDIR, "mkdir " + path + ": exists and is not a directory");
        }
        return Status::from_errno(err, "mkdir " + path);
    }

    Status list_dir(const std::string& path, std::vector<std::string>* names) override {
        names->clear();
        std::unique_ptr<DIR, DirCloser> dir(::opendir(path.c_str()));
        if (!dir) return Status::from_errno(errno, "opendir " + path);
        for (;;) {
            errno = 0;
            struct dirent* e = ::readdir(dir.get());
            if (e == nullptr) {
                if (errno != 0) return Status::from_errno(errno, "readdir " + path);
                break;
            }
            if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
            names->emplace_back(e->d_name);
        }
        return Status::ok();
    }

    bool exists(const std::string& path) override {
        struct stat st;
        return ::stat(path.c_str(), &st) == 0;
    }

    Status sync_dir(const std::string& path) override {
        int fd;
        do {
            fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return Status::from_errno(errno, "open directory " + path);
        UniqueFd dir(fd);
        int rc;
        do {
            rc = ::fsync(dir.get());
        } while (rc != 0 && errno == EINTR);
        if (rc != 0) return Status::from_errno(errno, "fsync directory " + path);
        return Status::ok();
    }
};

// Env::beneath(): each path is taken apart and walked from the tree's
// descriptor, one component at a time, with O_NOFOLLOW.
class BeneathEnv final : public Env {
public:
    BeneathEnv(UniqueFd top, std::string name, std::string alias)
        : top_(std::move(top)), name_(std::move(name)), alias_(std::move(alias)) {}

    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        Place at;
        HIODSFS_TRY(locate(path, &at));
        // O_NONBLOCK: a FIFO put in a file's place must not block the open.
        const int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | access_flags(mode);
        int raw;
        do {
            raw = ::openat(at.dir, at.leaf.c_str(), flags, 0600);
        } while (raw < 0 && errno == EINTR);
        if (raw < 0) return failed(errno, at.dir, at.leaf, "open", at.shown);
        UniqueFd fd(raw);
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) return Status::from_errno(errno, "fstat " + at.shown);
        if (!S_ISREG(st.st_mode)) return Status::error(EINVAL, at.shown + " is not a regular file");
        if (mode != OpenMode::kRead && st.st_nlink > 1)
            return Status::error(EMLINK, at.shown + " has " + std::to_string(st.st_nlink) +
                                             " links: writing it would change another file");
        const int status_flags = ::fcntl(fd.get(), F_GETFL);
        if (status_flags < 0 || ::fcntl(fd.get(), F_SETFL, status_flags & ~O_NONBLOCK) != 0)
            return Status::from_errno(errno, "fcntl " + at.shown);
        *out = std::make_unique<PosixFile>(std::move(fd), at.shown);
        return Status::ok();
    }

    Status unlink(const std::string& path) override {
        Place at;
        HIODSFS_TRY(locate(path, &at));
        if (::unlinkat(at.dir, at.leaf.c_str(), 0) != 0)
            return Status::from_errno(errno, "unlink " + at.shown);
        return Status::ok();
    }

    Status rename(const std::string& from, const std::string& to) override {
        Place a, b;
        HIODSFS_TRY(locate(from, &a));
        HIODSFS_TRY(locate(to, &b));
        if (::renameat(a.dir, a.leaf.c_str(), b.dir, b.leaf.c_str()) != 0)
            return Status::from_errno(errno, "rename " + a.shown + " to " + b.shown);
        return Status::ok();
    }

    Status mkdir(const std::string& path) override {
        Place at;
        HIODSFS_TRY(locate(path, &at));
        if (::mkdirat(at.dir, at.leaf.c_str(), 0700) == 0) return Status::ok();
        const int err = errno;
        if (err != EEXIST) return Status::from_errno(err, "mkdir " + at.shown);
        struct stat st {};
        if (::fstatat(at.dir, at.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode))
            return Status::ok();
        if (S_ISLNK(st.st_mode)) return failed(ELOOP, at.dir, at.leaf, "mkdir", at.shown);
        return Status::error(ENOTDIR, "mkdir " + at.shown + ": exists and is not a directory");
    }

    Status list_dir(const std::string& path, std::vector<std::string>* names) override {
        names->clear();
        Place at;
        HIODSFS_TRY(locate(path, &at));
        UniqueFd fd;
        HIODSFS_TRY(open_dir(at, "opendir", &fd));
        std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd.get()));
        if (!dir) return Status::from_errno(errno, "opendir " + at.shown);
        fd.release();  // the DIR owns it now
        for (;;) {
            errno = 0;
            struct dirent* e = ::readdir(dir.get());
            if (e == nullptr) {
                if (errno != 0) return Status::from_errno(errno, "readdir " + at.shown);
                break;
            }
            if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
            names->emplace_back(e->d_name);
        }
        return Status::ok();
    }

    bool exists(const std::string& path) override {
        Place at;
        struct stat st {};
        return locate(path, &at).is_ok() &&
               ::fstatat(at.dir, at.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    }

    Status sync_dir(const std::string& path) override {
        Place at;
        HIODSFS_TRY(locate(path, &at));
        UniqueFd fd;
        HIODSFS_TRY(open_dir(at, "open directory", &fd));
        int rc;
        do {
            rc = ::fsync(fd.get());
        } while (rc != 0 && errno == EINTR);
        if (rc != 0) return Status::from_errno(errno, "fsync directory " + at.shown);
        return Status::ok();
    }

private:
    // Where a path's last component is: leaf in the directory dir (the
    // tree's top, or `parent` when the path has more than one component).
    struct Place {
        UniqueFd parent;
        int dir = -1;
        std::string leaf;   // "." for the top itself
        std::string shown;  // top/REL, for messages
    };

    // REL of a path that is top or alias followed by "/REL" ("" for the top).
    bool relative(const std::string& path, std::string* rel) const {
        for (const std::string* prefix : {&name_, &alias_}) {
            if (prefix->empty() || path.compare(0, prefix->size(), *prefix) != 0) continue;
            if (path.size() == prefix->size()) {
                rel->clear();
                return true;
            }
            if (path[prefix->size()] == '/') {
                *rel = path.substr(prefix->size() + 1);
                return true;
            }
        }
        return false;
    }

    Status locate(const std::string& path, Place* at) const {
        std::string rel;
        if (!relative(path, &rel)) return Status::error(EXDEV, path + " is outside " + name_);
        at->shown = rel.empty() ? name_ : name_ + "/" + rel;
        at->dir = top_.get();
        if (rel.empty()) {
            at->leaf = ".";
            return Status::ok();
        }
        for (std::size_t begin = 0;;) {
            const std::size_t slash = rel.find('/', begin);
            std::string part =
                rel.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
            if (part.empty() || part == "." || part == "..")
                return Status::error(
                    EINVAL, at->shown + ": a path inside " + name_ + " has no empty, . or .. part");
            if (slash == std::string::npos) {
                at->leaf = std::move(part);
                return Status::ok();
            }
            const int fd =
                ::openat(at->dir, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                return failed(errno, at->dir, part, "open", name_ + "/" + rel.substr(0, slash));
            at->parent = UniqueFd(fd);
            at->dir = fd;
            begin = slash + 1;
        }
    }

    Status open_dir(const Place& at, const char* op, UniqueFd* out) const {
        int fd;
        do {
            fd = ::openat(at.dir, at.leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return failed(errno, at.dir, at.leaf, op, at.shown);
        *out = UniqueFd(fd);
        return Status::ok();
    }

    // A failed open of name in dir (shown in messages): a symbolic link
    // there is named as one.
    Status failed(int err, int dir, const std::string& name, const std::string& op,
                  const std::string& shown) const {
        struct stat st {};
        if ((err == ELOOP || err == ENOTDIR || err == EEXIST) &&
            ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            return Status::error(
                ELOOP, shown + " is a symbolic link, which is never followed inside " + name_);
        return Status::from_errno(err, op + " " + shown);
    }

    UniqueFd top_;
    std::string name_, alias_;
};

}  // namespace

Env* Env::posix() {
    // Stateless, so one instance serves every caller and threads.
    static PosixEnv env;
    return &env;
}

Status Env::beneath(int dirfd, const std::string& top, const std::string& alias,
                    std::unique_ptr<Env>* out) {
    const int fd = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return Status::from_errno(errno, "duplicate the descriptor of " + top);
    *out = std::make_unique<BeneathEnv>(UniqueFd(fd), top, alias);
    return Status::ok();
}

}  // namespace hiodsfs
