#include "store/rados_tier.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/mountinfo.h"
#include "common/thread_name.h"

namespace hiodsfs {
namespace {

constexpr const char* kLockName = "hiodsfs";

bool valid_store_name(const std::string& name) {
    if (name.empty() || name.size() > 64 || name[0] == '.') return false;
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '_' || c == '-' || c == '.';
        if (!ok) return false;
    }
    return true;
}

}  // namespace

Status open_locked_tier(const RadosOptions& options, const std::string& store, std::chrono::seconds lease,
                        std::chrono::seconds release_wait, std::function<void(const std::string&)> on_lost,
                        const std::function<void(const std::string&)>& log, std::unique_ptr<RadosTier>* out) {
    std::unique_ptr<RadosTier> tier;
    HIODSFS_TRY(RadosTier::open(options, store, &tier));
    const std::string source = tier->describe();
    const std::string cookie = this_process_cookie();
    const auto deadline = std::chrono::steady_clock::now() + release_wait;
    std::vector<std::string> broken;  // clients of dead holders whose lock was broken
    for (;;) {
        Status st = tier->lock(cookie, lease, on_lost, broken, log);
        if (st) break;
        std::vector<RadosLocker> holders;
        const pid_t local = st.err() == EBUSY && tier->lockers(&holders).is_ok() && !holders.empty()
                                ? pid_of_this_machine(holders.front().cookie)
                                : 0;
        const bool gone = local > 0 && ::kill(local, 0) != 0 && errno == ESRCH;
        if (gone && std::chrono::steady_clock::now() <= deadline) {
            if (log)
                log("breaking the lock of '" + holders.front().cookie + "' on " + source +
                    ": that process of this machine is gone");
            Status broke = tier->break_lock(holders.front());
            if (!broke && broke.err() != ENOENT) return broke;
            if (!holders.front().address.empty()) broken.push_back(holders.front().address);
            continue;
        }
        if (local == 0 || fuse_source_mounted(source) || std::chrono::steady_clock::now() > deadline) {
            if (st.err() == EBUSY) return Status::error(EBUSY, "store " + source + " is in use: " + st.message());
            return st;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    *out = std::move(tier);
    return Status::ok();
}

RadosTier::RadosTier(std::unique_ptr<RadosPool> pool, const RadosOptions& options, std::string store)
    : pool_(std::shared_ptr<RadosPool>(std::move(pool))),
      options_(options),
      pool_name_(options.pool),
      store_(std::move(store)),
      timeout_(options.timeout) {}

RadosTier::~RadosTier() { (void)unlock(); }

Status RadosTier::open(const RadosOptions& options, const std::string& store,
                       std::unique_ptr<RadosTier>* out) {
    if (!valid_store_name(store)) return Status::error(EINVAL, "bad store name '" + store + "'");
    std::unique_ptr<RadosPool> pool;
    HIODSFS_TRY(RadosPool::connect(options, &pool));
    out->reset(new RadosTier(std::move(pool), options, store));
    return Status::ok();
}

std::string RadosTier::object_name(SegmentId segment) const {
    char id[16];
    std::snprintf(id, sizeof id, "%08" PRIx32, segment);
    return store_ + ".segment." + id;
}

Status RadosTier::fenced_error(const char* what, const std::string& name) const {
    std::lock_guard guard(reason_mu_);
    return Status::error(EIO, std::string("refusing to ") + what + " " + name + " in " + describe() + ": " +
                                  fence_reason_);
}

void RadosTier::fence(const std::string& why) {
    {
        std::lock_guard guard(reason_mu_);
        fence_reason_ = why;
    }
    fenced_.store(true);
}

bool RadosTier::fenced() const {
    return fenced_.load() || (lease_ != nullptr && !lease_->may_start(RadosLease::Clock::now()));
}

Status RadosTier::writable(const char* what, const std::string& name) {
    if (fenced_.load()) return fenced_error(what, name);
    if (lease_ != nullptr && !lease_->may_start(RadosLease::Clock::now())) {
        // The renewer has not given up (a renewal may still be on its way),
        // but a write started now might land after the lease, when another
        // may hold the store. Until a renewal lands, or the lease is lost.
        return Status::error(
            EIO, std::string("refusing to ") + what + " " + name + " in " + describe() +
                     ": the lease of its lock could end before the write does (not renewed in "
                     "time); writes wait until it is renewed or taken again");
    }
    return Status::ok();
}

Status RadosTier::put_range(SegmentId segment, std::uint64_t offset, const void* data, std::size_t len) {
    HIODSFS_TRY(writable("write", "segment " + std::to_string(segment)));
    return conn()->write(object_name(segment), offset, data, len);
}

Status RadosTier::put_object(const std::string& name, const void* data, std::size_t len) {
    HIODSFS_TRY(writable("write", name));
    return conn()->write_full(store_ + "." + name, data, len);
}

Status RadosTier::append_object(const std::string& name, const void* data, std::size_t len) {
    HIODSFS_TRY(writable("append to", name));
    return conn()->append(store_ + "." + name, data, len);
}

Status RadosTier::get_object(const std::string& name, std::vector<char>* out) {
    std::vector<std::uint8_t> bytes;
    HIODSFS_TRY(conn()->read(store_ + "." + name, &bytes));
    out->assign(bytes.begin(), bytes.end());
    return Status::ok();
}

Status RadosTier::remove_object(const std::string& name) {
    HIODSFS_TRY(writable("remove", name));
    return conn()->remove(store_ + "." + name);
}

Status RadosTier::list_objects(const std::string& prefix, std::vector<std::string>* out) {
    out->clear();
    HIODSFS_TRY(conn()->list(store_ + "." + prefix, out));
    for (std::string& name : *out) name.erase(0, store_.size() + 1);
    return Status::ok();
}

Status RadosTier::put(SegmentId segment, const void* data, std::size_t len) {
    HIODSFS_TRY(writable("write", "segment " + std::to_string(segment)));
    return conn()->write_full(object_name(segment), data, len);
}

Status RadosTier::get(SegmentId segment, std::vector<char>* out) {
    std::vector<std::uint8_t> bytes;
    HIODSFS_TRY(conn()->read(object_name(segment), &bytes));
    out->assign(bytes.begin(), bytes.end());
    return Status::ok();
}

Status RadosTier::get_range(SegmentId segment, std::uint64_t offset, std::size_t len, std::vector<char>* out) {
    std::vector<std::uint8_t> bytes;
    HIODSFS_TRY(conn()->read(object_name(segment), offset, len, &bytes));
    out->assign(bytes.begin(), bytes.end());
    return Status::ok();
}

Status RadosTier::remove(SegmentId segment) {
    HIODSFS_TRY(writable("remove", "segment " + std::to_string(segment)));
    return conn()->remove(object_name(segment));
}

Status RadosTier::list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) {
    out->clear();
    const std::string prefix = store_ + ".segment.";
    std::vector<std::string> names;
    HIODSFS_TRY(conn()->list(prefix, &names));
    for (const std::string& name : names) {
        const std::string hex = name.substr(prefix.size());
        char* end = nullptr;
        const unsigned long id = std::strtoul(hex.c_str(), &end, 16);
        if (hex.size() != 8 || *end != '\0' || id == 0) continue;  // not one of ours
        std::uint64_t size = 0;
        HIODSFS_TRY(conn()->stat(name, &size));
        out->emplace_back(static_cast<SegmentId>(id), size);
    }
    return Status::ok();
}

std::uint32_t RadosTier::epoch() const {
    std::lock_guard guard(holder_mu_);
    return holder_.epoch;
}

SegmentId RadosTier::first_new_segment() const {
    std::lock_guard guard(holder_mu_);
    return holder_.first_segment;
}

Status RadosTier::reserve_segment(SegmentId id) {
    std::lock_guard guard(holder_mu_);
    if (id < holder_.first_segment) {
        return Status::error(EINVAL, "segment " + std::to_string(id) + " of " + describe() +
                                         " is before this holder's first one (" +
                                         std::to_string(holder_.first_segment) + ")");
    }
    if (id <= holder_.reserved) return Status::ok();
    HIODSFS_TRY(writable("reserve segment ids in", lock_object()));
    HolderRecord next = holder_;
    next.reserved = id > UINT32_MAX - kReservedSegments ? UINT32_MAX : id + kReservedSegments - 1;
    HIODSFS_TRY(write_holder(*conn(), next));
    holder_ = next;
    return Status::ok();
}

Status RadosTier::read_holder(HolderRecord* out, bool* found) {
    std::vector<std::uint8_t> bytes;
    *found = false;
    Status st = conn()->read(lock_object(), &bytes);
    if (st.err() == ENOENT) return Status::ok();
    HIODSFS_TRY(st);
    *found = decode_holder(std::string(bytes.begin(), bytes.end()), out);
    return Status::ok();
}

Status RadosTier::write_holder(RadosPool& pool, const HolderRecord& record) {
    const std::string text = encode_holder(record);
    Status st = pool.write_full(lock_object(), text.data(), text.size(), &lock_);
    if (st.err() == EBUSY) {
        const std::string why = "the lock on " + describe() +
                                " is not this client's any more (the OSD refused " +
                                "a write that asserts it)";
        fence(why + "; the store takes no more writes until it is mounted again");
        return Status::error(EIO, why);
    }
    return st;
}

Status RadosTier::own_address(RadosPool& pool, std::string* out) {
    std::vector<RadosLocker> holders;
    HIODSFS_TRY(pool.lockers(lock_object(), kLockName, &holders));
    for (const RadosLocker& h : holders) {
        if (h.cookie == lock_.cookie) {
            *out = h.address;
            return Status::ok();
        }
    }
    return Status::error(ENOENT, "the lock on " + describe() + " does not list this client");
}

Status RadosTier::take_over(RadosPool& pool, const std::vector<std::string>& also_fence,
                            const std::function<void(const std::string&)>& log) {
    HolderRecord last;
    bool found = false;
    {
        std::vector<std::uint8_t> bytes;
        Status st = pool.read(lock_object(), &bytes);
        if (!st && st.err() != ENOENT) return st;
        found = st.is_ok() && decode_holder(std::string(bytes.begin(), bytes.end()), &last);
    }
    HolderRecord mine;
    mine.cookie = lock_.cookie;
    HIODSFS_TRY(own_address(pool, &mine.address));
    std::vector<std::string> fence_them;
    const auto add = [&](const std::string& a) {
        if (!a.empty() && a != mine.address &&
            std::find(fence_them.begin(), fence_them.end(), a) == fence_them.end())
            fence_them.push_back(a);
    };
    for (const std::string& a : also_fence) add(a);
    if (found && !last.released) add(last.address);
    for (const std::string& a : fence_them) {
        Status st = pool.blocklist(a);
        if (!st) {
            return Status::error(
                st.err(), "cannot fence the last holder of " + describe() + " (" + st.message() +
                              "); the client needs the mon capability of 'osd blocklist' to take "
                              "over a store another client did not let go");
        }
    }
    if (!fence_them.empty()) {
        HIODSFS_TRY(pool.wait_for_latest_map());
        if (log) {
            std::string who;
            for (const std::string& a : fence_them) who += (who.empty() ? "" : ", ") + a;
            const bool named = found && !last.released;
            log("fenced the last holder of " + describe() +
                (named ? " (epoch " + std::to_string(last.epoch) + ", '" + last.cookie + "')"
                       : std::string()) +
                ": blocklisted " + who + ", so nothing it still sends lands");
        }
    }
    if (found && last.epoch == UINT32_MAX)
        return Status::error(EOVERFLOW, describe() + ": holder epochs exhausted");
    mine.epoch = found ? last.epoch + 1 : 1;
    mine.first_segment = found ? std::max(last.reserved, last.first_segment - 1) + 1 : 1;
    mine.reserved = mine.first_segment - 1;
    HIODSFS_TRY(write_holder(pool, mine));
    std::lock_guard guard(holder_mu_);
    holder_ = mine;
    return Status::ok();
}

Status RadosTier::lock(const std::string& cookie, std::chrono::seconds lease,
                       std::function<void(const std::string&)> on_lost,
                       const std::vector<std::string>& also_fence,
                       const std::function<void(const std::string&)>& log) {
    RadosLock lock{lock_object(), kLockName, cookie, "hiodsfs daemon"};
    const std::shared_ptr<RadosPool> pool = conn();
    const auto sent = RadosLease::Clock::now();
    HIODSFS_TRY(pool->lock_exclusive(lock, lease));
    std::lock_guard guard(renew_mu_);
    lock_ = std::move(lock);
    lease_ = std::make_unique<RadosLease>(lease, timeout_);
    lease_->renewed(sent);
    Status taken = take_over(*pool, also_fence, log);
    if (!taken) {
        (void)pool->unlock(lock_);
        lease_.reset();
        return taken;
    }
    on_lost_ = std::move(on_lost);
    locked_ = true;
    stopping_ = false;
    renewer_ = std::thread([this] {
        name_this_thread("rados-lease");
        renew_loop();
    });
    return Status::ok();
}

void RadosTier::set_lapse_handling(std::function<Status()> retaken, std::function<void(const std::string&)> log) {
    std::lock_guard guard(renew_mu_);
    retaken_ = std::move(retaken);
    log_ = std::move(log);
}

void RadosTier::renew_loop() {
    using Clock = RadosLease::Clock;
    std::unique_lock guard(renew_mu_);
    bool failed = false;
    Status last;
    while (!stopping_) {
        renew_cv_.wait_until(guard, lease_->next_renewal(Clock::now(), failed),
                             [&] { return stopping_; });
        if (stopping_) return;
        const Clock::time_point sent = Clock::now();
        Status st;
        if (lease_->may_start(sent)) {
            guard.unlock();
            st = conn()->renew_lock(lock_, lease_->lease());
            guard.lock();
            if (st) {
                lease_->renewed(sent);
                failed = false;
                last = Status::ok();
                continue;
            }
            last = st;
            // Not held at the OSD (ENOENT: it lapsed there, or was broken) or
            // this client fenced: no renewal can bring it back. Anything else
            // (a timeout): tried again while a renewal could still end before
            // the lease does.
            failed = true;
            if (st.err() != ENOENT && st.err() != ESHUTDOWN) continue;
        } else if (last.is_ok()) {
            last = Status::error(ETIMEDOUT, "no renewal was confirmed in time");
        }
        const std::string lapsed =
            "the lock on " + describe() + " could not be renewed (" + last.message() + ")";
        if (!retaken_ || last.err() == ESHUTDOWN) {
            // ESHUTDOWN: the next holder blocklisted this client. ENOENT is
            // taken back like a lapse: a renewal the OSD ran late (a loaded
            // or paused cluster) finds the lease over there, and take_back
            // refuses the lock if another client held it meanwhile.
            const std::string why = lapsed + "; the store takes no more writes until it is mounted again";
            fence(why);
            const auto on_lost = on_lost_;
            locked_ = false;
            guard.unlock();
            if (on_lost) on_lost(why);
            return;
        }
        fence(lapsed + "; writes wait until it is taken again");
        if (log_) {
            const auto log = log_;
            guard.unlock();
            log("hiodsfs: " + lapsed + "; writes to the pool wait until it is taken again");
            guard.lock();
        }
        if (!take_back(guard)) return;
        failed = false;
        last = Status::ok();
    }
}

bool RadosTier::take_back(std::unique_lock<std::mutex>& guard) {
    while (!stopping_) {
        renew_cv_.wait_for(guard, lease_->lease() / 4, [&] { return stopping_; });
        if (stopping_) return false;
        const auto retaken = retaken_;
        const auto log = log_;
        const auto on_lost = on_lost_;
        guard.unlock();
        std::shared_ptr<RadosPool> pool = conn();
        auto sent = RadosLease::Clock::now();
        Status st = take_lock_with(*pool);
        bool fresh = false;
        if (!st && st.err() != EBUSY && st.err() != ESHUTDOWN) {
            // A client cut off may not get through again by itself: after a
            // whole cluster restarts, its tickets are for keys the daemons
            // no longer have. A new connection takes the lock if it can.
            std::unique_ptr<RadosPool> other;
            if (RadosPool::connect(options_, &other)) {
                sent = RadosLease::Clock::now();
                const Status taken = take_lock_with(*other);
                if (taken) {
                    pool = std::shared_ptr<RadosPool>(std::move(other));
                    fresh = true;
                }
                if (taken || taken.err() == EBUSY) st = taken;
            }
        }
        std::string lost;
        if (st.err() == ESHUTDOWN) {
            lost = "the lock on " + describe() +
                   " was taken over by another client, which fenced this one (" + st.message() +
                   "); the store takes no more writes until it is mounted again";
        } else if (st) {
            lease_->renewed(sent);
            // Held again; but another client may have had it meanwhile.
            Status same = check_retaken(*pool, fresh);
            if (same && fresh) pool_.store(pool);
            if (same) same = retaken();
            if (same) {
                fenced_.store(false);
                if (log) log("hiodsfs: the lock on " + describe() + " is taken again; writes resume");
                guard.lock();
                return true;
            }
            lost = "the lock on " + describe() + " was taken again after it lapsed, but " + same.message() +
                   "; the store takes no more writes until it is mounted again";
            (void)pool->unlock(lock_);
        } else if (st.err() == EBUSY) {
            lost = "the lock on " + describe() + " lapsed and another client took it (" + st.message() +
                   "); the store takes no more writes until it is mounted again";
        }
        if (!lost.empty()) {
            fence(lost);
            if (on_lost) on_lost(lost);
            guard.lock();
            locked_ = false;
            return false;
        }
        guard.lock();  // the cluster is still away: try again
    }
    return false;
}

Status RadosTier::check_retaken(RadosPool& pool, bool fresh) {
    std::vector<std::uint8_t> bytes;
    HIODSFS_TRY(pool.read(lock_object(), &bytes));
    HolderRecord now;
    std::lock_guard guard(holder_mu_);
    if (!decode_holder(std::string(bytes.begin(), bytes.end()), &now) ||
        now.epoch != holder_.epoch || now.cookie != holder_.cookie)
        return Status::error(ESTALE, "another client held " + describe() +
                                         " meanwhile (the holder record is not "
                                         "this client's any more)");
    if (!fresh) return Status::ok();
    // The old connection may still have operations on their way: it is
    // fenced like any other holder, and the record names the new one.
    HolderRecord next = holder_;
    HIODSFS_TRY(own_address(pool, &next.address));
    if (next.address == holder_.address) return Status::ok();
    if (!holder_.address.empty()) {
        HIODSFS_TRY(pool.blocklist(holder_.address));
        HIODSFS_TRY(pool.wait_for_latest_map());
    }
    HIODSFS_TRY(write_holder(pool, next));
    holder_ = next;
    return Status::ok();
}

Status RadosTier::take_lock_with(RadosPool& pool) {
    Status st = pool.lock_exclusive(lock_, lease_->lease());
    if (st.err() == EEXIST)
        return pool.renew_lock(lock_, lease_->lease());  // the lease had not run out there
    if (st.err() != EBUSY) return st;
    std::vector<RadosLocker> holders;
    if (!pool.lockers(lock_object(), kLockName, &holders) || holders.empty()) return st;
    for (const RadosLocker& h : holders)
        if (h.cookie != lock_.cookie) return st;  // another process's
    for (const RadosLocker& h : holders) {
        const Status broke = pool.break_lock(lock_object(), kLockName, h);
        if (!broke && broke.err() != ENOENT) return broke;
    }
    return pool.lock_exclusive(lock_, lease_->lease());
}

Status RadosTier::unlock() {
    std::thread renewer;
    bool was_locked = false;
    {
        std::lock_guard guard(renew_mu_);
        stopping_ = true;
        renewer.swap(renewer_);
        was_locked = locked_;
        locked_ = false;
    }
    renew_cv_.notify_all();
    if (renewer.joinable()) renewer.join();
    if (!was_locked || fenced_.load()) return Status::ok();
    // From here on nothing of this holder's may start: its record is about
    // to say it let the store go, so the next holder fences no one.
    fence("the store's lock was let go");
    // Let go cleanly: the next holder has nothing of this one to fence.
    HolderRecord released;
    {
        std::lock_guard guard(holder_mu_);
        released = holder_;
    }
    released.released = true;
    if (write_holder(*conn(), released)) {
        std::lock_guard guard(holder_mu_);
        holder_ = released;
    }
    return conn()->unlock(lock_);
}

Status RadosTier::lockers(std::vector<RadosLocker>* out) {
    return conn()->lockers(lock_object(), kLockName, out);
}

Status RadosTier::break_lock(const RadosLocker& holder) {
    return conn()->break_lock(lock_object(), kLockName, holder);
}

}  // namespace hiodsfs
