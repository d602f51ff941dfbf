// RadosTier: the segments of one store as objects of a RADOS pool, and the
// lock that makes one daemon the store's only writer.
//   STORE.segment.XXXXXXXX   a segment (its id, 8 hex digits)
//   STORE.lock               carries the exclusive lock "hiodsfs" and, as
//                            its content, the holder record (rados_holder.h)
//   STORE.NAME               a metadata object (engine/meta_tier.h)
// The lock is a fence the cluster enforces, not only a promise:
//  - taking it, a holder blocklists the address of the last holder that did
//    not let the store go (the record names it; and that of a dead holder
//    whose lock it broke), waits for the map that has the blocklist, and
//    only then reads or writes anything: from then on every OSD refuses
//    whatever that holder still sends, also operations it sent before.
//  - it writes its record (its epoch, one more than the last, and its
//    address) with an operation that asserts the lock on that object, as
//    every later change of the record does (the segment ids it reserves).
//  - it creates segment ids only past the last holder's reserved ones.
// The lease is renewed by a thread of its own (rados_lease.h); no write
// starts once it could end after the lease, renewed or not. When the lease
// lapses the tier refuses every put and remove (reads go on). Then, with
// lapse handling set, it keeps trying to take the lock again: once it has
// it, its record is still the store's (no other holder came between) and
// its owner finds the pool as it left it, writes resume; otherwise (or
// without lapse handling) it tells its owner once that the lock is lost
// for good.
// Built only with librados's header (HIODSFS_HAVE_RADOS); librados's types
// stay in rados_pool.cc.
// Thread-safety: all methods may be called from several threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hiodsfs/segment_tier.h"
#include "store/rados_holder.h"
#include "store/rados_lease.h"
#include "store/rados_pool.h"

namespace hiodsfs {

class RadosTier : public SegmentTier {
public:
    // Segment ids a holder reserves at a time (a write of its record).
    static constexpr SegmentId kReservedSegments = 64;

    // Connects (options.pool is the pool) and names the store's objects
    // (a store name is 1 to 64 of [A-Za-z0-9_.-], not starting with '.').
    static Status open(const RadosOptions& options, const std::string& store,
                       std::unique_ptr<RadosTier>* out);
    ~RadosTier() override;

    std::string describe() const override { return "rados:" + pool_name_ + "/" + store_; }
    Status put(SegmentId segment, const void* data, std::size_t len) override;
    Status get(SegmentId segment, std::vector<char>* out) override;
    Status get_range(SegmentId segment, std::uint64_t offset, std::size_t len, std::vector<char>* out) override;
    Status put_range(SegmentId segment, std::uint64_t offset, const void* data, std::size_t len) override;
    Status remove(SegmentId segment) override;
    Status list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) override;
    Status put_object(const std::string& name, const void* data, std::size_t len) override;
    Status append_object(const std::string& name, const void* data, std::size_t len) override;
    Status get_object(const std::string& name, std::vector<char>* out) override;
    Status remove_object(const std::string& name) override;
    Status list_objects(const std::string& prefix, std::vector<std::string>* out) override;
    std::uint32_t epoch() const override;
    SegmentId first_new_segment() const override;
    Status reserve_segment(SegmentId id) override;

    // Takes the store's lock for `lease` as `cookie` (this_process_cookie()),
    // fences the last holder (and the clients at `also_fence`: holders
    // whose lock was broken), writes this holder's record and renews the
    // lock every lease/4. EBUSY naming the holder when another has it; an
    // error (and the lock let go) when the last holder cannot be fenced.
    // on_lost is called once, from the renewing thread, when the lease
    // could not be renewed in time; `log` hears of the fence.
    Status lock(const std::string& cookie, std::chrono::seconds lease,
                std::function<void(const std::string&)> on_lost,
                const std::vector<std::string>& also_fence = {},
                const std::function<void(const std::string&)>& log = {});
    // After a lapse: `retaken` is called (from the renewing thread) once the
    // lock is held again, and says whether the pool is as this client left
    // it; `log` hears of the lapse and of the lock taken again. Set once,
    // after lock(); until then a lapse is a loss.
    void set_lapse_handling(std::function<Status()> retaken, std::function<void(const std::string&)> log);
    // Whether writes are refused now (a lapse not yet over, or a loss).
    bool fenced() const;
    // Stops renewing, marks the record released and lets the lock go (if held).
    Status unlock();
    // The holders of the store's lock.
    Status lockers(std::vector<RadosLocker>* out);
    // Takes the store's lock from a holder known to be dead.
    Status break_lock(const RadosLocker& holder);
    // The store's holder record as the pool has it; false when it has none.
    Status read_holder(HolderRecord* out, bool* found);

    // For tests: bytes of the segment objects (a listing and a stat each).
    RadosPool& pool() { return *pool_.load(); }
    std::string object_name(SegmentId segment) const;
    std::string lock_object() const { return store_ + ".lock"; }

private:
    RadosTier(std::unique_ptr<RadosPool> pool, const RadosOptions& options, std::string store);
    // The connection now (a lapse may replace it); held while it is used.
    std::shared_ptr<RadosPool> conn() const { return pool_.load(); }
    // Takes the lock through `pool`: also when this process's older
    // connection still holds it there (its entry is broken first).
    Status take_lock_with(RadosPool& pool);
    // Right after the lock is taken: fences the last holder and writes ours.
    Status take_over(RadosPool& pool, const std::vector<std::string>& also_fence,
                     const std::function<void(const std::string&)>& log);
    // This client's address as the OSD lists it among the lock's holders.
    Status own_address(RadosPool& pool, std::string* out);
    Status write_holder(RadosPool& pool, const HolderRecord& record);
    // OK when a write may start now: not fenced, and the lease lasts longer
    // than the write may take (else the tier fences itself).
    Status writable(const char* what, const std::string& name);
    Status fenced_error(const char* what, const std::string& name) const;
    void renew_loop();
    // After a lapse: tries to take the lock again until it has it (true, the
    // pool checked) or it is lost (false); false also when stopping.
    bool take_back(std::unique_lock<std::mutex>& guard);
    // Holding the lock again (through `pool`, on `fresh` connection or the
    // old one): whether the store is still as this holder left it.
    Status check_retaken(RadosPool& pool, bool fresh);
    void fence(const std::string& why);

    std::atomic<std::shared_ptr<RadosPool>> pool_;
    RadosOptions options_;  // to connect again
    std::string pool_name_, store_;
    std::chrono::seconds timeout_;

    RadosLock lock_;
    std::unique_ptr<RadosLease> lease_;  // set by lock()
    mutable std::mutex holder_mu_;
    HolderRecord holder_;  // this holder's record as last written (holder_mu_)
    std::function<void(const std::string&)> on_lost_;
    std::function<Status()> retaken_;
    std::function<void(const std::string&)> log_;
    std::atomic<bool> fenced_{false};
    mutable std::mutex reason_mu_;
    std::string fence_reason_;  // under reason_mu_; set before fenced_
    std::mutex renew_mu_;
    std::condition_variable renew_cv_;
    bool locked_ = false, stopping_ = false;
    std::thread renewer_;
};

// Connects to options.pool and takes the lock of `store` there as this
// process (this_process_cookie()): how the daemon and hiodsfs-fsck both
// come to hold a store. The lock of a holder of this machine (this boot,
// this pid namespace) that is gone (killed, crashed) is broken (said
// through `log`) and its client fenced, rather than left to its lease,
// since no process of it can write any more; one of this machine that still
// runs but has the store mounted nowhere (a daemon just unmounted, still
// writing out what is left) is waited for up to release_wait; any other
// holder fails at once: EBUSY, "store rados:P/S is in use: ... is held by
// HOLDER".
Status open_locked_tier(const RadosOptions& options, const std::string& store, std::chrono::seconds lease,
                        std::chrono::seconds release_wait, std::function<void(const std::string&)> on_lost,
                        const std::function<void(const std::string&)>& log, std::unique_ptr<RadosTier>* out);

}  // namespace hiodsfs
