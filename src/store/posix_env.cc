// Env::posix(): the Env on top of POSIX system calls. Every error names the
// operation and the path so a person can tell which file failed and how.

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

// Owns one file descriptor; closes it exactly once.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    ~UniqueFd() {
        // close() may report EINTR, but on Linux the fd is released anyway;
        // retrying could close a descriptor another thread just got.
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_ = -1;
};

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

class PosixEnv final : public Env {
public:
    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        int flags = O_CLOEXEC;
        switch (mode) {
            case OpenMode::kRead:
                flags |= O_RDONLY;
                break;
            case OpenMode::kReadWrite:
                flags |= O_RDWR | O_CREAT;
                break;
            case OpenMode::kCreateNew:
                flags |= O_RDWR | O_CREAT | O_EXCL;
                break;
        }
        int fd;
        do {
            // Segments hold file contents: only the store's owner may read them.
            fd = ::open(path.c_str(), flags, 0600);
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

}  // namespace

Env* Env::posix() {
    // Stateless, so one instance serves every caller and threads.
    static PosixEnv env;
    return &env;
}

}  // namespace hiodsfs
