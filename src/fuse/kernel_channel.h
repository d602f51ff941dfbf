// KernelChannel: the daemon's own reads and writes of /dev/fuse, under
// libfuse (fuse_session_custom_io), for what libfuse 3.14 cannot say.
//
// Without FUSE_HANDLE_KILLPRIV_V2 the kernel asks GETXATTR
// "security.capability" before every write(2), to learn whether the write
// must drop file capabilities: a second round trip per write request, and
// with the writeback cache the only one. libfuse 3.14 (Debian 12) has no
// FUSE_CAP for it, so the channel adds the flag to libfuse's INIT reply
// when the kernel offers it. The kernel then marks inodes without setuid,
// setgid or security xattrs S_NOSEC and stops asking, and leaves clearing
// setuid/setgid to the file system: WRITE, SETATTR and OPEN(O_TRUNC) carry
// a "kill suid/sgid" flag (set when the caller lacks CAP_FSETID) that
// libfuse 3.14 drops. The channel reads it from the raw request and hands
// it to the handler through current_request(): libfuse's loops run each
// request on the thread that read it.
//
// FOPEN_PARALLEL_DIRECT_WRITES (Linux 6.2) has no field in libfuse 3.14's
// fuse_file_info either: without it the kernel takes a file's inode lock
// for every direct write, so writes of one file reach the daemon one at a
// time. A handler asks for it (allow_parallel_direct_writes) and the
// channel adds it to the OPEN or CREATE reply.
//
// With request_poll= the channel reads through a ReaderGate
// (fuse/reader_gate.h): one thread at a time waits for the next request.
//
// The channel also counts requests by opcode, for status.json.
// Thread-safety: the hooks run on libfuse's worker threads; counts() and
// killpriv_v2() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct fuse_session;
struct iovec;

namespace hiodsfs::fuse {

class ReaderGate;

// What the raw request being handled on this thread said beyond what
// libfuse passes on.
struct RequestFlags {
    // Drop S_ISUID, and S_ISGID when group-executable (FUSE_WRITE_KILL_SUIDGID,
    // FATTR_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID).
    bool kill_suidgid = false;
    std::uint64_t unique = 0;  // the request's id, which its reply carries
    // Set by an OPEN or CREATE handler before it replies with direct_io:
    // the reply also says FOPEN_PARALLEL_DIRECT_WRITES.
    bool parallel_direct_writes = false;
};
const RequestFlags& current_request();
// For the OPEN or CREATE request handled on this thread.
void allow_parallel_direct_writes();

class KernelChannel {
public:
    KernelChannel();
    ~KernelChannel();
    KernelChannel(const KernelChannel&) = delete;
    KernelChannel& operator=(const KernelChannel&) = delete;

    // Routes the session's /dev/fuse traffic through this channel; call after
    // fuse_session_mount and before the loop. False (errno set) on failure.
    bool install(fuse_session* se);
    // Before install: one request thread at a time waits for a request,
    // polling for it this long before it sleeps (ReaderGate); a waiting
    // thread looks every watch whether the reader is busy.
    void poll_for_requests(std::chrono::microseconds poll,
                           std::chrono::microseconds watch = std::chrono::milliseconds(2));

    // Whether the INIT reply carried FUSE_HANDLE_KILLPRIV_V2.
    bool killpriv_v2() const { return killpriv_v2_.load(std::memory_order_relaxed); }
    // Requests received so far, by name of opcode (those seen at least once).
    std::vector<std::pair<std::string, std::uint64_t>> counts() const;

private:
    static long read_hook(int fd, void* buf, std::size_t len, void* self);
    static long writev_hook(int fd, ::iovec* iov, int count, void* self);
    void note_request(const void* buf, std::size_t len);

    static constexpr std::size_t kOpcodes = 64;
    std::atomic<bool> kernel_offers_v2_{false};
    std::atomic<std::uint64_t> init_unique_{0};
    std::atomic<bool> killpriv_v2_{false};
    std::array<std::atomic<std::uint64_t>, kOpcodes> counts_{};
    std::unique_ptr<ReaderGate> gate_;
};

}  // namespace hiodsfs::fuse
