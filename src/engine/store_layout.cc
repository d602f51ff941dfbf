#include "engine/store_layout.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {
namespace {
constexpr const char* kMagicLine = "hiodsfs store";

// Entries of the directory open as dirfd, without "." and "..".
Status entries_of(int dirfd, const std::string& path, std::vector<std::string>* names) {
    int fd = ::dup(dirfd);
    if (fd < 0) return Status::from_errno(errno, "opendir " + path);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
        int err = errno;
        ::close(fd);
        return Status::from_errno(err, "opendir " + path);
    }
    for (;;) {
        errno = 0;
        struct dirent* e = ::readdir(d);
        if (e == nullptr) break;
        std::string n = e->d_name;
        if (n != "." && n != "..") names->push_back(std::move(n));
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return Status::from_errno(err, "readdir " + path);
    return Status::ok();
}

// Tightens name (in dirfd) to 0600 or 0700; for a directory, then its
// entries (depth levels more). Opened with O_NOFOLLOW and changed through
// the descriptor, so a symlink put in its place is not followed.
Status make_private(int dirfd, const std::string& dir, const std::string& name, int depth) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return Status::ok();  // gone meanwhile (a temporary file)
        return Status::from_errno(errno, "stat " + path);
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (!is_dir && !S_ISREG(st.st_mode)) return Status::ok();
    const bool loose = (st.st_mode & 077) != 0;
    if (!loose && (!is_dir || depth == 0)) return Status::ok();
    int fd = ::openat(dirfd, name.c_str(),
                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
    if (fd < 0) return Status::from_errno(errno, "cannot make " + path + " private: open");
    Status result;
    if (loose && ::fchmod(fd, st.st_mode & 0700) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        result = Status::from_errno(errno, "cannot make " + path + " (mode " + mode + ", owner uid " +
                                               std::to_string(st.st_uid) + ") private");
    }
    if (result && is_dir && depth > 0) {
        std::vector<std::string> names;
        result = entries_of(fd, path, &names);
        for (std::size_t i = 0; result && i < names.size(); ++i)
            result = make_private(fd, path, names[i], depth - 1);
    }
    ::close(fd);
    return result;
}

}  // namespace

Status make_store_private(const StoreDir& store) {
    std::vector<std::string> names;
    Status st = entries_of(store.fd(), store.path(), &names);
    // The store's files, and those of meta/ and segments/ (one level down).
    for (std::size_t i = 0; st && i < names.size(); ++i)
        st = make_private(store.fd(), store.path(), names[i], 1);
    return st;
}

Status read_store_record(Env* env, const std::string& path, std::string* text, bool* exists) {
    if (!env->exists(path)) {
        *exists = false;
        return Status::ok();
    }
    *exists = true;
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(path, OpenMode::kRead, &f));
    text->assign(4096, '\0');
    std::size_t got = 0;
    HIODSFS_TRY(f->pread(text->data(), text->size(), 0, &got));
    text->resize(got);
    return Status::ok();
}

Status read_store_format(Env* env, const std::string& store, StoreFormat* out, bool* exists) {
    const std::string path = store + "/FORMAT";
    std::string text;
    HIODSFS_TRY(read_store_record(env, path, &text, exists));
    return *exists ? parse_store_format(text, path, out) : Status::ok();
}

namespace {

bool is_hex(const std::string& s, std::size_t len) {
    return s.size() == len && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Status parse_encryption_line(const std::string& rest, const std::string& where, StoreEncryption* out) {
    std::istringstream in(rest);
    std::string cipher, id, check, extra;
    in >> cipher >> id >> check;
    if (cipher != StoreEncryption::kCipher && cipher != StoreEncryption::kAesGcmCipher)
        return Status::error(EPROTO, where + ": encrypted with " + cipher + ", which this hiodsfs does not know");
    if (id.rfind("id=", 0) != 0 || check.rfind("check=", 0) != 0 || (in >> extra) || !is_hex(id.substr(3), 32) ||
        !is_hex(check.substr(6), 64))
        return Status::error(EUCLEAN, where + ": bad encryption line");
    out->cipher = cipher;
    out->id = id.substr(3);
    out->check = check.substr(6);
    return Status::ok();
}

}  // namespace

Status parse_store_format(const std::string& text, const std::string& where, StoreFormat* out) {
    std::istringstream in(text);
    std::string line;
    bool magic = false, have_version = false, have_chunking = false;
    while (std::getline(in, line)) {
        if (line == kMagicLine) {
            magic = true;
        } else if (line.rfind("format ", 0) == 0) {
            out->version = static_cast<std::uint32_t>(std::strtoul(line.c_str() + 7, nullptr, 10));
            out->log_open = out->version > kLogOpenVersionOffset;
            if (out->log_open) out->version -= kLogOpenVersionOffset;
            have_version = out->version != 0;
        } else if (line.rfind("chunking ", 0) == 0) {
            Status st = ChunkingParams::parse(line.substr(9), &out->chunking);
            if (!st) return Status::error(EUCLEAN, where + ": bad chunking line: " + st.message());
            have_chunking = true;
        } else if (line.rfind("tier ", 0) == 0) {
            out->tier = line.substr(5);
        } else if (line.rfind("encryption ", 0) == 0) {
            HIODSFS_TRY(parse_encryption_line(line.substr(11), where, &out->encryption));
        }
    }
    if (!magic || !have_version || !have_chunking)
        return Status::error(EUCLEAN, where + " is not a hiodsfs format record");
    if (out->version <= kEncryptedFormatVersion && out->encryption.on() != (out->version == kEncryptedFormatVersion))
        return Status::error(EUCLEAN, where + ": format " + std::to_string(out->version) +
                                          (out->encryption.on() ? " with" : " without") + " an encryption line");
    return Status::ok();
}

Status check_format_version(const std::string& store, const StoreFormat& format) {
    if (format.version >= kOldestOpenableFormat && format.version <= kFormatVersion) return Status::ok();
    if (format.version == kEncryptedFormatVersion) return Status::ok();
    if (format.version < kFormatVersion)
        return Status::error(EPROTO, "store " + store + " has format version " +
                                         std::to_string(format.version) + ", older than this hiodsfs's " +
                                         std::to_string(kFormatVersion) + ": convert it with `hiodsfs-fsck --upgrade " +
                                         store + "` (unmounted; the old metadata is kept until it is done)");
    return Status::error(EPROTO, "store " + store + " has format version " +
                                     std::to_string(format.version) +
                                     "; this hiodsfs reads formats " + std::to_string(kOldestOpenableFormat) + " to " +
                                     std::to_string(kEncryptedFormatVersion));
}

std::string store_format_text(const StoreFormat& format) {
    const std::uint32_t version = format.version + (format.log_open ? kLogOpenVersionOffset : 0);
    return std::string(kMagicLine) + "\nformat " + std::to_string(version) + "\nchunking " +
           format.chunking.describe() + "\n" + (format.tier.empty() ? "" : "tier " + format.tier + "\n") +
           (format.encryption.on() ? "encryption " + format.encryption.cipher + " id=" + format.encryption.id +
                                         " check=" + format.encryption.check + "\n"
                                   : "");
}

Status write_store_record(Env* env, const std::string& store, const std::string& name, const std::string& text) {
    const std::string tmp = store + "/" + name + ".tmp";
    {
        // A file of that name (a crash's, or a link someone put there) is
        // replaced, never written through.
        Status gone = env->unlink(tmp);
        if (!gone && gone.err() != ENOENT) return gone;
        std::unique_ptr<File> f;
        HIODSFS_TRY(env->open(tmp, OpenMode::kCreateNew, &f));
        HIODSFS_TRY(f->pwrite(text.data(), text.size(), 0));
        HIODSFS_TRY(f->sync());
    }
    HIODSFS_TRY(env->rename(tmp, store + "/" + name));
    return env->sync_dir(store);
}

Status write_store_format(Env* env, const std::string& store, const StoreFormat& format) {
    return write_store_record(env, store, "FORMAT", store_format_text(format));
}

Status StoreLock::acquire(const StoreDir& store_dir, bool exclusive, unsigned wait_ms,
                          std::unique_ptr<StoreLock>* out) {
    const std::string& store = store_dir.path();
    std::string path = store + "/lock";
    // O_NONBLOCK: a FIFO in its place must not block the open.
    constexpr int kFlags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    int fd = ::openat(store_dir.fd(), "lock", O_RDWR | O_CREAT | kFlags, 0600);
    if (fd < 0 && errno == EROFS && !exclusive)
        fd = ::openat(store_dir.fd(), "lock", O_RDONLY | kFlags);
    if (fd < 0 && errno == ELOOP)
        return Status::error(
            ELOOP,
            "lock file " + path + " is a symbolic link, which is never followed inside " + store);
    if (fd < 0) return Status::from_errno(errno, "open lock file " + path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        const std::string what = !S_ISREG(st.st_mode)
                                     ? "is not a regular file"
                                     : "has " + std::to_string(st.st_nlink) + " links";
        ::close(fd);
        return Status::error(
            EINVAL, "lock file " + path + " " + what + ": its holder writes its pid into it");
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
            char pid[32] = {};
            ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
            std::string who = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : "";
            while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
            ::close(fd);
            return Status::error(EBUSY, "store " + store + " is in use by another process" +
                                            (who.empty() ? "" : " (pid " + who + ")"));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (exclusive) {
        std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd, 0) == 0) {
            [[maybe_unused]] ssize_t n = ::pwrite(fd, pid.data(), pid.size(), 0);
        }
    }
    out->reset(new StoreLock(fd));
    return Status::ok();
}

StoreLock::~StoreLock() { ::close(fd_); }

Status read_format_copy(Txn& t, StoreFormat* out, bool* found) {
    std::string_view v;
    HIODSFS_TRY(t.get(Db::kSuper, kFormatCopyKey, &v, found));
    if (!*found) return Status::ok();
    return parse_store_format(std::string(v), "the metadata's copy of FORMAT", out);
}

Status write_format_copy(Txn& t, const StoreFormat& format) {
    StoreFormat copy = format;
    copy.log_open = false;  // the metadata's state, not the directory's
    return t.put(Db::kSuper, kFormatCopyKey, store_format_text(copy));
}

bool same_format(const StoreFormat& a, const StoreFormat& b) {
    // 4 and 5 are one format as far as the metadata goes: a read-write open
    // marks FORMAT 5 before the copy, and a crash between leaves them apart.
    auto openable = [](std::uint32_t v) { return v >= kOldestOpenableFormat && v <= kFormatVersion; };
    return (a.version == b.version || (openable(a.version) && openable(b.version))) && a.chunking == b.chunking &&
           a.encryption == b.encryption;
}

}  // namespace hiodsfs
