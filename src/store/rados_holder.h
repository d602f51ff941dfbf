// Who holds a RADOS store, as the store's lock object says it:
//  - the lock's cookie, which names this process so that a later one can
//    tell whether that process still runs: the host name (for people), the
//    pid, the kernel's boot id and the pid namespace. A pid means something
//    only in its own namespace and boot, so a holder is "of this machine"
//    only when both match ours; two containers with the same host name are
//    strangers to each other.
//  - the holder record, the content of STORE.lock, written by each holder
//    right after it takes the lock and only while it holds it (the OSD
//    checks the lock in the same operation): the holder's epoch (one more
//    than the last holder's; the store's metadata objects carry it in their
//    names), the client address its operations come from (what the next
//    holder blocklists before it reads or writes anything), the segment ids
//    it may create, and whether it let the store go cleanly.
// Thread-safety: free functions without shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "hiodsfs/types.h"

namespace hiodsfs {

// This process's lock cookie: "HOST pid PID boot BOOT_ID pidns PIDNS".
std::string this_process_cookie();

// What a cookie says of its process.
struct CookieOwner {
    std::string host;
    pid_t pid = 0;
    std::string boot_id;  // /proc/sys/kernel/random/boot_id
    std::string pid_ns;   // the inode of /proc/self/ns/pid
};
// False for a cookie not in the form above (one of an older hiodsfs: "HOST
// pid PID", which says nothing of its boot or namespace).
bool parse_cookie(const std::string& cookie, CookieOwner* out);

// The pid of the cookie's process when it is of this boot and pid namespace
// (so kill(pid, 0) is about that very process); 0 otherwise.
pid_t pid_of_this_machine(const std::string& cookie);

struct HolderRecord {
    std::uint32_t epoch = 0;
    std::string cookie;
    std::string address;  // as the OSD sees the holder's client ("v1:IP:PORT/NONCE")
    // Segment ids the holder may create: from first to reserved (none yet
    // when reserved < first). The next holder starts after `reserved`.
    SegmentId first_segment = 1;
    SegmentId reserved = 0;
    bool released = false;  // unlocked cleanly: nothing of it is left to fence
};

std::string encode_holder(const HolderRecord& r);
// False when the text is not a holder record (an empty lock object, made by
// an older hiodsfs, is none).
bool decode_holder(const std::string& text, HolderRecord* out);

}  // namespace hiodsfs
