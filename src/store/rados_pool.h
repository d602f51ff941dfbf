// RadosPool: the objects of one Ceph RADOS pool, through librados, for the
// RADOS backend of the chunk store (issue 15): whole-object writes, whole and
// ranged reads, stat, remove, listing by name prefix, the exclusive
// advisory lock with a lease that makes one daemon the store's only writer,
// and the fence of another client (the OSDs' blocklist). Every write is one
// compound operation; given the lock it holds, the operation also asserts
// that lock (cls_lock's assert_locked) on the object, and the OSD applies
// the write only while this client holds it.
// Every call returns a Status whose errno is librados's and whose message
// names the object and the pool. librados's types stay in rados_pool.cc,
// which calls librados through the table connect loads (librados_api.h),
// or the one the options give (a test's cluster in memory).
// Built only when meson found librados's header (HIODSFS_HAVE_RADOS).
// Thread-safety: all methods may be called from several threads at once
// (librados's I/O context is thread-safe).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs {

struct LibradosApi;

struct RadosOptions {
    std::string conf_path;           // a ceph.conf; names the mons
    std::string client_id = "admin"; // the client.ID whose key is used
    std::string keyring;             // empty: the one the conf names
    std::string pool;
    // Bounds connecting and every later operation: an unreachable cluster
    // is an ETIMEDOUT error after about this long, never a hang.
    std::chrono::seconds timeout{10};
    // The librados functions to call; null: librados.so.2's (load_librados).
    // Tests give a cluster in memory (tests/store/memory_rados.h). A field
    // that only code can set, never an option or environment variable: no
    // user of the daemon or of hiodsfs-fsck can point a store at a stand-in
    // whose objects vanish with the process.
    const LibradosApi* librados = nullptr;
};

// One holder of a lock, as the OSD lists it.
struct RadosLocker {
    std::string client;   // "client.4115"
    std::string cookie;
    std::string address;
};

// An exclusive lock on one object, held by one (client, cookie) pair.
struct RadosLock {
    std::string object;
    std::string name;        // the lock's name on the object
    std::string cookie;      // this holder's identity: shown to whoever is refused
    std::string description;
};

// The input of cls_lock's method assert_locked (a cls_lock_assert_op in
// Ceph's encoding: version 1, compat 1, the length of what follows, then
// the lock's name, its type (exclusive: 1), the cookie and the tag, which
// rados_lock_exclusive leaves empty).
std::string cls_lock_assert_input(const RadosLock& lock);

class RadosPool {
public:
    ~RadosPool();
    RadosPool(const RadosPool&) = delete;
    RadosPool& operator=(const RadosPool&) = delete;

    // Connects to the cluster and opens the pool (ENOENT when it does not
    // exist).
    static Status connect(const RadosOptions& options, std::unique_ptr<RadosPool>* out);

    // Replaces the object's contents with len bytes (creates it if needed).
    // With `held` (a lock on this very object), only while this client
    // holds it: EBUSY from the OSD otherwise, and nothing is written.
    Status write_full(const std::string& object, const void* data, std::size_t len,
                      const RadosLock* held = nullptr);
    // Writes len bytes at offset (creates the object if needed).
    Status write(const std::string& object, std::uint64_t offset, const void* data, std::size_t len);
    // Adds len bytes at the object's end, in one operation.
    Status append(const std::string& object, const void* data, std::size_t len);
    // The whole object.
    Status read(const std::string& object, std::vector<std::uint8_t>* out);
    // Up to len bytes at offset; fewer (or none) past the object's end.
    Status read(const std::string& object, std::uint64_t offset, std::size_t len,
                std::vector<std::uint8_t>* out);
    Status stat(const std::string& object, std::uint64_t* size);
    Status remove(const std::string& object);
    // The names of the pool's objects that start with prefix, sorted. Reads
    // the names of the whole pool: for occasional use (fsck, recovery).
    Status list(const std::string& prefix, std::vector<std::string>* names);

    // Takes the lock for lease; EBUSY, naming the holder, if another holds it.
    Status lock_exclusive(const RadosLock& lock, std::chrono::seconds lease);
    // Extends a lease this client holds; fails (ENOENT) if it lapsed and
    // was lost, instead of taking the lock anew behind another's back.
    Status renew_lock(const RadosLock& lock, std::chrono::seconds lease);
    Status unlock(const RadosLock& lock);
    // "cookie (client.N at ADDR)" of each holder; empty when none.
    Status lock_holders(const std::string& object, const std::string& name,
                        std::vector<std::string>* holders);
    // The same, field by field.
    Status lockers(const std::string& object, const std::string& name, std::vector<RadosLocker>* out);
    // Takes the lock away from a holder (one known to be dead); ENOENT when
    // that holder no longer has it.
    Status break_lock(const std::string& object, const std::string& name, const RadosLocker& holder);

    // Adds a client's address ("v1:127.0.0.1:0/3506744153", as lockers()
    // gives it) to the cluster's blocklist, for the mons' default time (an
    // hour): every OSD refuses that client's operations from the map that
    // has it on. Needs the mon capability of the command "osd blocklist".
    Status blocklist(const std::string& address);
    // Waits until this client has the cluster's newest map: every operation
    // sent after it carries that map, and an OSD handles it only once it has
    // the map too (so after a blocklist just added).
    Status wait_for_latest_map();

    const std::string& pool() const { return pool_; }

private:
    struct Handles;
    class WriteOp;
    RadosPool(std::unique_ptr<Handles> handles, std::string pool);
    Status error(int rc, const char* what, const std::string& object) const;
    Status operate(WriteOp& op, const char* what, const std::string& object);
    Status take_lock(const RadosLock& lock, std::chrono::seconds lease, bool renew);

    std::unique_ptr<Handles> handles_;
    std::string pool_;
};

}  // namespace hiodsfs
