#include "fuse/kernel_channel.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/thread_name.h"
#include "fuse/fuse_ops.h"
#include "fuse/reader_gate.h"
#include "fuse_lowlevel.h"

namespace hiodsfs::fuse {
namespace {

thread_local RequestFlags t_request;

// Opcode names as in <linux/fuse.h>, lower case; unnamed ones count as "opN".
const char* opcode_name(std::size_t op) {
    static const char* const kNames[] = {
        nullptr,     "lookup",  "forget",   "getattr",     "setattr",  "readlink",  "symlink",
        nullptr,     "mknod",   "mkdir",    "unlink",      "rmdir",    "rename",    "link",
        "open",      "read",    "write",    "statfs",      "release",  nullptr,     "fsync",
        "setxattr",  "getxattr", "listxattr", "removexattr", "flush",   "init",      "opendir",
        "readdir",   "releasedir", "fsyncdir", "getlk",    "setlk",    "setlkw",    "access",
        "create",    "interrupt", "bmap",   "destroy",     "ioctl",    "poll",      "notify_reply",
        "batch_forget", "fallocate", "readdirplus", "rename2", "lseek", "copy_file_range",
        "setupmapping", "removemapping", "syncfs", "tmpfile", "statx"};
    if (op < sizeof(kNames) / sizeof(kNames[0]) && kNames[op] != nullptr) return kNames[op];
    return nullptr;
}

KernelChannel* channel_of(void* userdata) { return static_cast<FuseState*>(userdata)->channel; }

// The fixed part of a request's arguments, if the request holds it.
template <typename T>
bool args_of(const void* buf, std::size_t len, T* out) {
    if (len < sizeof(fuse_in_header) + sizeof(T)) return false;
    std::memcpy(out, static_cast<const char*>(buf) + sizeof(fuse_in_header), sizeof(T));
    return true;
}

}  // namespace

const RequestFlags& current_request() { return t_request; }

void allow_parallel_direct_writes() { t_request.parallel_direct_writes = true; }

KernelChannel::KernelChannel() = default;
KernelChannel::~KernelChannel() = default;

void KernelChannel::poll_for_requests(std::chrono::microseconds poll, std::chrono::microseconds watch) {
    gate_ = std::make_unique<ReaderGate>(poll, watch);
}

bool KernelChannel::install(fuse_session* se) {
    fuse_custom_io io{};
    io.read = [](int fd, void* buf, size_t len, void* userdata) -> ssize_t {
        return read_hook(fd, buf, len, channel_of(userdata));
    };
    io.writev = [](int fd, iovec* iov, int count, void* userdata) -> ssize_t {
        return writev_hook(fd, iov, count, channel_of(userdata));
    };
    const int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));
    if (rc != 0) errno = -rc;
    return rc == 0;
}

long KernelChannel::read_hook(int fd, void* buf, std::size_t len, void* self) {
    // libfuse starts the request threads; each is named as it first reads.
    thread_local bool named = false;
    if (!named) {
        name_this_thread("fuse-req");
        named = true;
    }
    ReaderGate* gate = static_cast<KernelChannel*>(self)->gate_.get();
    if (gate != nullptr) gate->enter(fd);
    const ssize_t n = ::read(fd, buf, len);
    if (gate != nullptr) {
        const int err = errno;
        gate->leave(n > 0 && ReaderGate::ready(fd));
        // Unmounted: nothing more to wait for, every thread reads its error.
        if (n < 0 && err == ENODEV) gate->open();
        errno = err;
    }
    t_request = RequestFlags{};
    if (n > 0) static_cast<KernelChannel*>(self)->note_request(buf, static_cast<std::size_t>(n));
    return n;
}

void KernelChannel::note_request(const void* buf, std::size_t len) {
    fuse_in_header h;
    if (len < sizeof h) return;
    std::memcpy(&h, buf, sizeof h);
    t_request.unique = h.unique;
    if (h.opcode < kOpcodes) counts_[h.opcode].fetch_add(1, std::memory_order_relaxed);
    switch (h.opcode) {
    case FUSE_INIT: {
        fuse_init_in in;
        if (args_of(buf, len, &in) && (in.flags & FUSE_HANDLE_KILLPRIV_V2)) {
            init_unique_.store(h.unique);
            kernel_offers_v2_.store(true);
        }
        break;
    }
    case FUSE_WRITE: {
        fuse_write_in in;
        if (args_of(buf, len, &in)) t_request.kill_suidgid = (in.write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
        break;
    }
    case FUSE_SETATTR: {
        fuse_setattr_in in;
        if (args_of(buf, len, &in)) t_request.kill_suidgid = (in.valid & FATTR_KILL_SUIDGID) != 0;
        break;
    }
    case FUSE_OPEN: {
        fuse_open_in in;
        if (args_of(buf, len, &in)) t_request.kill_suidgid = (in.open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
        break;
    }
    default:
        break;
    }
}

// A copy of iov[1] with `bits` or-ed into the 32-bit field at `at`, written
// in libfuse's place (the argument is libfuse's own buffer).
static long writev_patched(int fd, ::iovec* iov, int count, std::size_t at, std::uint32_t bits) {
    std::string arg(static_cast<const char*>(iov[1].iov_base), iov[1].iov_len);
    std::uint32_t v;
    std::memcpy(&v, arg.data() + at, sizeof v);
    v |= bits;
    std::memcpy(arg.data() + at, &v, sizeof v);
    std::vector<iovec> copy(iov, iov + count);
    copy[1].iov_base = arg.data();
    return ::writev(fd, copy.data(), count);
}

long KernelChannel::writev_hook(int fd, ::iovec* iov, int count, void* self) {
    auto* ch = static_cast<KernelChannel*>(self);
    // libfuse sends a reply as the header and then its argument.
    fuse_out_header h;
    if (t_request.parallel_direct_writes && count >= 2 && iov[0].iov_len >= sizeof h &&
        iov[1].iov_len >= sizeof(fuse_open_out)) {
        std::memcpy(&h, iov[0].iov_base, sizeof h);
        if (h.unique == t_request.unique && h.error == 0) {
            t_request.parallel_direct_writes = false;
            // OPEN's argument is a fuse_open_out; CREATE's a fuse_entry_out
            // and then one.
            const std::size_t at = iov[1].iov_len - sizeof(fuse_open_out) + offsetof(fuse_open_out, open_flags);
            return writev_patched(fd, iov, count, at, FOPEN_PARALLEL_DIRECT_WRITES);
        }
    }
    if (ch->kernel_offers_v2_.load() && count >= 2 &&
        iov[0].iov_len >= sizeof h && !ch->killpriv_v2_.load()) {
        std::memcpy(&h, iov[0].iov_base, sizeof h);
        constexpr std::size_t kFlags = offsetof(fuse_init_out, flags);
        if (h.unique == ch->init_unique_.load() && h.error == 0 && iov[1].iov_len >= kFlags + 4) {
            const long n = writev_patched(fd, iov, count, kFlags, FUSE_HANDLE_KILLPRIV_V2);
            if (n >= 0) ch->killpriv_v2_.store(true);
            return n;
        }
    }
    return ::writev(fd, iov, count);
}

std::vector<std::pair<std::string, std::uint64_t>> KernelChannel::counts() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (std::size_t op = 0; op < kOpcodes; ++op) {
        const std::uint64_t n = counts_[op].load(std::memory_order_relaxed);
        if (n == 0) continue;
        const char* name = opcode_name(op);
        out.emplace_back(name != nullptr ? name : "op" + std::to_string(op), n);
    }
    return out;
}

}  // namespace hiodsfs::fuse
