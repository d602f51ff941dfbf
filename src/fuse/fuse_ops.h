// The libfuse low-level operations of the daemon: each one converts the
// request, calls the Vfs, and answers with exactly one fuse_reply_*. No
// exception leaves an operation (std::bad_alloc becomes ENOMEM, anything
// else EIO), and a reply the kernel never received gives back the pins it
// carried.
// Thread-safety: the operations run on libfuse's worker threads; FuseState
// is written before the session starts (and in init) and read after.
#pragma once

// 3.12: fuse_session_loop_mt with a fuse_loop_config.
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "vfs/vfs.h"

namespace hiodsfs::fuse {

class KernelChannel;

struct FuseSettings {
    // Long: every change reaches the store through this kernel (see
    // DaemonOptions::entry_timeout).
    double entry_timeout = 86400;
    double attr_timeout = 86400;
    bool writeback_cache = true;  // asked for; granted only if the kernel can
    std::uint32_t max_write = 1u << 20;
};

// The session's userdata.
struct FuseState {
    FuseSettings settings;
    std::unique_ptr<vfs::Vfs> vfs;  // set before the session is mounted
    // What init() negotiated, for logs and the Vfs.
    bool dont_mask = false;
    bool posix_acl = false;
    bool writeback_cache = false;
    std::atomic<bool> initialized{false};
    // The /dev/fuse channel (kernel_channel.h); null when libfuse's own is used.
    KernelChannel* channel = nullptr;
};

const fuse_lowlevel_ops& fuse_operations();

}  // namespace hiodsfs::fuse
