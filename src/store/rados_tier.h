// RadosTier: the segments of one store as objects of a RADOS pool, and the
// lock that makes one daemon the store's only writer.
//   STORE.segment.XXXXXXXX   a sealed segment (its id, 8 hex digits), whole
//   STORE.lock               carries the exclusive lock "hiodsfs"
//   STORE.NAME               a metadata object (engine/meta_tier.h)
// The lock is taken with a lease and renewed by a thread of its own; when
// it cannot be renewed before the lease runs out, the tier refuses every
// put and remove (reads go on) before another may take the lock. Then,
// with lapse handling set, it keeps trying to take the lock again: once
// it has it and its owner finds the pool as it left it (no other writer
// came between), writes resume; otherwise (or without lapse handling) it
// tells its owner once that the lock is lost for good.
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

#include "hiodsfs/segment_tier.h"
#include "store/rados_pool.h"

namespace hiodsfs {

class RadosTier : public SegmentTier {
public:
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

    // Takes the store's lock for `lease` as `holder` (shown to whoever is
    // refused: "HOST pid N") and renews it every lease/4. EBUSY naming the
    // holder when another has it. on_lost is called once, from the
    // renewing thread, when the lease could not be renewed in time.
    Status lock(const std::string& holder, std::chrono::seconds lease,
                std::function<void(const std::string&)> on_lost);
    // After a lapse: `retaken` is called (from the renewing thread) once the
    // lock is held again, and says whether the pool is as this client left
    // it; `log` hears of the lapse and of the lock taken again. Set once,
    // after lock(); until then a lapse is a loss.
    void set_lapse_handling(std::function<Status()> retaken, std::function<void(const std::string&)> log);
    // Whether writes are refused now (a lapse not yet over, or a loss).
    bool fenced() const { return fenced_.load(); }
    // Stops renewing and releases the lock (if held).
    Status unlock();
    // The holders of the store's lock.
    Status lockers(std::vector<RadosLocker>* out);
    // Takes the store's lock from a holder known to be dead.
    Status break_lock(const RadosLocker& holder);

    // For tests: bytes of the segment objects (a listing and a stat each).
    RadosPool& pool() { return *pool_.load(); }
    std::string object_name(SegmentId segment) const;

private:
    RadosTier(std::unique_ptr<RadosPool> pool, const RadosOptions& options, std::string store);
    // The connection now (a lapse may replace it); held while it is used.
    std::shared_ptr<RadosPool> conn() const { return pool_.load(); }
    // Takes the lock through `pool`: also when this process's older
    // connection still holds it there (its entry is broken first).
    Status take_lock_with(RadosPool& pool);
    Status fenced_error(const char* what, SegmentId segment) const;
    Status fenced_error(const char* what, const std::string& name) const;
    void renew_loop();
    // After a lapse: tries to take the lock again until it has it (true, the
    // pool checked) or it is lost (false); false also when stopping.
    bool take_back(std::unique_lock<std::mutex>& guard);
    void fence(const std::string& why);

    std::atomic<std::shared_ptr<RadosPool>> pool_;
    RadosOptions options_;  // to connect again
    std::string pool_name_, store_;
    std::chrono::seconds timeout_;

    RadosLock lock_;
    std::chrono::seconds lease_{0};
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
// process ("HOST pid N"): how the daemon and hiodsfs-fsck both come to
// hold a store. The lock of a holder of this host that is gone (killed,
// crashed) is broken (said through `log`) rather than left to its lease,
// since no process of it can write any more; one of this host that still
// runs but has the store mounted nowhere (a daemon just unmounted, still
// writing out what is left) is waited for up to release_wait; any other
// holder fails at once: EBUSY, "store rados:P/S is in use: ... is held by
// HOLDER". Host names are taken to name one machine.
Status open_locked_tier(const RadosOptions& options, const std::string& store, std::chrono::seconds lease,
                        std::chrono::seconds release_wait, std::function<void(const std::string&)> on_lost,
                        const std::function<void(const std::string&)>& log, std::unique_ptr<RadosTier>* out);

}  // namespace hiodsfs
