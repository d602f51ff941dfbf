// MemoryRados: a Ceph cluster in memory behind the librados functions
// RadosPool calls (store/librados_api.h), so that RadosTier's own threads
// (the lease renewer, the takeover, the segment store's uploader through
// it) run under ThreadSanitizer, which cannot see into Debian's librados.
// RadosOptions::librados points a connection at it; the daemon never does.
// It does what the OSDs and mons do for those calls:
//  - objects of one pool: read, stat, list, and compound writes (write,
//    write_full, append, remove) applied whole or not at all;
//  - cls_lock's exclusive lock: take (EBUSY when another client or cookie
//    holds it, EEXIST when this one does), renew only while held (ENOENT
//    after it lapsed or was broken), unlock, break, list the lockers; a
//    lease lapses by the steady clock, and a lock creates its object;
//  - cls_lock's assert_locked in a compound write (EBUSY unless this very
//    client holds the lock with that cookie), its input decoded as
//    Ceph encodes it;
//  - the blocklist (the mon command "osd blocklist add"): from the OSD map
//    that has it on, every operation of that client fails with ESHUTDOWN
//    (EBLOCKLISTED). A map reaches the OSD only with an operation of a
//    client that has it (it connected after the blocklist, or waited for
//    the newest map): a holder that blocklists and writes without waiting
//    may still see the old holder's writes land, as on a real cluster.
// Each connection is a client of its own ("client.N", address
// "v1:127.0.0.1:0/NONCE"). Faults: lock calls that fail, and clients cut
// off (their operations time out, as after a cluster restart with new keys).
// Thread-safety: every method, and every librados call, takes one mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/rados_pool.h"

namespace hiodsfs::test {

namespace memrados {
struct Cluster;
}

class MemoryRados {
public:
    MemoryRados();
    ~MemoryRados();
    MemoryRados(const MemoryRados&) = delete;
    MemoryRados& operator=(const MemoryRados&) = delete;

    // Options that connect to this cluster's pool, with this timeout.
    RadosOptions options(std::chrono::seconds timeout) const;

    // Every lock call (a take or a renewal) fails with -err while err is
    // not 0, as one the cluster does not answer in time would (ETIMEDOUT).
    void fail_locks(int err);
    // Every client connected so far cannot reach the cluster any more:
    // each later operation fails with ETIMEDOUT. New connections work.
    void cut_off_clients();

    // The object's bytes; false when it does not exist.
    bool object(const std::string& name, std::string* out) const;
    // The names of the objects that start with prefix, sorted.
    std::vector<std::string> objects(const std::string& prefix) const;
    // The live holders of lock `name` on `object`.
    std::vector<RadosLocker> lockers(const std::string& object, const std::string& name) const;
    // The blocklisted addresses, in the order they were added.
    std::vector<std::string> blocklist() const;
    // Renewals of a lock that the cluster granted, by any client.
    std::uint64_t renewals() const;
    // Writes (compound operations) that landed from the client at address.
    std::uint64_t writes_from(const std::string& address) const;

private:
    std::shared_ptr<memrados::Cluster> cluster_;
};

}  // namespace hiodsfs::test
