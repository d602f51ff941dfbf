#include "store/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/unique_fd.h"

namespace hiodsfs {

Status read_key_file(const std::string& path, StoreKey* out) {
    const std::string name = "key file " + path;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd.valid()) {
        const int e = errno;
        if (e == ELOOP) return Status::error(e, name + " is a symbolic link: give the file it points to");
        return Status::error(e, name + ": " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Status::error(errno, name + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return Status::error(EINVAL, name + " is not a regular file");
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
        return Status::error(EPERM, name + " belongs to uid " + std::to_string(st.st_uid) +
                                        ": it must be root's (chown root " + path + ")");
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return Status::error(EPERM, name + " has mode " + mode + ", which lets other users read or change it (chmod 600 " +
                                        path + ")");
    }
    if (st.st_size != static_cast<off_t>(StoreKey::kBytes))
        return Status::error(EINVAL, name + " holds " + std::to_string(st.st_size) + " bytes, not a key's 32 (make one with: head -c 32 /dev/urandom > " + path + ")");
    std::array<std::uint8_t, StoreKey::kBytes> bytes{};
    struct Wipe {  // on every way out, a failed read's partial key too
        std::array<std::uint8_t, StoreKey::kBytes>& b;
        ~Wipe() { explicit_bzero(b.data(), b.size()); }
    } wipe{bytes};
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::error(errno, name + ": " + std::strerror(errno));
        if (n == 0) return Status::error(EINVAL, name + " shrank while it was read");
        got += static_cast<std::size_t>(n);
    }
    *out = StoreKey(std::span<const std::uint8_t, StoreKey::kBytes>(bytes));
    return Status::ok();
}

}  // namespace hiodsfs
