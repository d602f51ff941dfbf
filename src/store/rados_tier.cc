#include "store/rados_tier.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

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

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
    return name;
}

// The pid of a lock cookie "HOST pid PID" of this host, or 0.
pid_t pid_of_local_holder(const std::string& cookie, const std::string& host) {
    const std::string prefix = host + " pid ";
    if (cookie.rfind(prefix, 0) != 0) return 0;
    const std::string digits = cookie.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
    return static_cast<pid_t>(std::stol(digits));
}

}  // namespace

Status open_locked_tier(const RadosOptions& options, const std::string& store, std::chrono::seconds lease,
                        std::chrono::seconds release_wait, std::function<void(const std::string&)> on_lost,
                        const std::function<void(const std::string&)>& log, std::unique_ptr<RadosTier>* out) {
    std::unique_ptr<RadosTier> tier;
    HIODSFS_TRY(RadosTier::open(options, store, &tier));
    const std::string source = tier->describe();
    const std::string host = host_name();
    const std::string holder = host + " pid " + std::to_string(::getpid());
    const auto deadline = std::chrono::steady_clock::now() + release_wait;
    for (;;) {
        Status st = tier->lock(holder, lease, on_lost);
        if (st) break;
        std::vector<RadosLocker> holders;
        const pid_t local = st.err() == EBUSY && tier->lockers(&holders).is_ok() && !holders.empty()
                                ? pid_of_local_holder(holders.front().cookie, host)
                                : 0;
        const bool gone = local > 0 && ::kill(local, 0) != 0 && errno == ESRCH;
        if (gone && std::chrono::steady_clock::now() <= deadline) {
            if (log) log("breaking the lock of '" + holders.front().cookie + "' on " + source +
                         ": that process of this host is gone");
            Status broke = tier->break_lock(holders.front());
            if (!broke && broke.err() != ENOENT) return broke;
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

Status RadosTier::fenced_error(const char* what, SegmentId segment) const {
    return fenced_error(what, "segment " + std::to_string(segment));
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

Status RadosTier::put_range(SegmentId segment, std::uint64_t offset, const void* data, std::size_t len) {
    if (fenced_.load()) return fenced_error("write", segment);
    return conn()->write(object_name(segment), offset, data, len);
}

Status RadosTier::put_object(const std::string& name, const void* data, std::size_t len) {
    if (fenced_.load()) return fenced_error("write", name);
    return conn()->write_full(store_ + "." + name, data, len);
}

Status RadosTier::append_object(const std::string& name, const void* data, std::size_t len) {
    if (fenced_.load()) return fenced_error("append to", name);
    return conn()->append(store_ + "." + name, data, len);
}

Status RadosTier::get_object(const std::string& name, std::vector<char>* out) {
    std::vector<std::uint8_t> bytes;
    HIODSFS_TRY(conn()->read(store_ + "." + name, &bytes));
    out->assign(bytes.begin(), bytes.end());
    return Status::ok();
}

Status RadosTier::remove_object(const std::string& name) {
    if (fenced_.load()) return fenced_error("remove", name);
    return conn()->remove(store_ + "." + name);
}

Status RadosTier::list_objects(const std::string& prefix, std::vector<std::string>* out) {
    out->clear();
    HIODSFS_TRY(conn()->list(store_ + "." + prefix, out));
    for (std::string& name : *out) name.erase(0, store_.size() + 1);
    return Status::ok();
}

Status RadosTier::put(SegmentId segment, const void* data, std::size_t len) {
    if (fenced_.load()) return fenced_error("write", segment);
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
    if (fenced_.load()) return fenced_error("remove", segment);
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

Status RadosTier::lock(const std::string& holder, std::chrono::seconds lease,
                       std::function<void(const std::string&)> on_lost) {
    RadosLock lock{store_ + ".lock", kLockName, holder, "hiodsfs daemon"};
    HIODSFS_TRY(conn()->lock_exclusive(lock, lease));
    std::lock_guard guard(renew_mu_);
    lock_ = std::move(lock);
    lease_ = lease;
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
    using Clock = std::chrono::steady_clock;
    // The lease runs from when the request was sent, at the latest.
    Clock::time_point held_until = Clock::now() + lease_ - std::chrono::seconds(1);
    std::unique_lock guard(renew_mu_);
    while (!stopping_) {
        renew_cv_.wait_for(guard, lease_ / 4, [&] { return stopping_; });
        if (stopping_) return;
        guard.unlock();
        const Clock::time_point sent = Clock::now();
        const Status st = conn()->renew_lock(lock_, lease_);
        guard.lock();
        if (st) {
            held_until = sent + lease_;
            continue;
        }
        // Another try may fail too and take up to the timeout: give up
        // while the lease still holds, so nothing is written after it.
        if (st.err() != ENOENT && Clock::now() + timeout_ < held_until) continue;
        const std::string lapsed = "the lock on " + describe() + " could not be renewed (" + st.message() + ")";
        if (!retaken_ || st.err() == ENOENT) {
            // ENOENT: the lock was taken from this client (broken), not left to lapse.
            const std::string why = lapsed + "; the store takes no more writes until it is mounted again";
            fence(why);
            const auto on_lost = on_lost_;
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
        held_until = Clock::now() + lease_ - std::chrono::seconds(1);
    }
}

bool RadosTier::take_back(std::unique_lock<std::mutex>& guard) {
    while (!stopping_) {
        renew_cv_.wait_for(guard, lease_ / 4, [&] { return stopping_; });
        if (stopping_) return false;
        const auto retaken = retaken_;
        const auto log = log_;
        const auto on_lost = on_lost_;
        guard.unlock();
        Status st = take_lock_with(*conn());
        if (!st && st.err() != EBUSY) {
            // A client cut off may not get through again by itself: after a
            // whole cluster restarts, its tickets are for keys the daemons
            // no longer have. A new connection takes the lock if it can.
            std::unique_ptr<RadosPool> fresh;
            if (RadosPool::connect(options_, &fresh)) {
                const Status taken = take_lock_with(*fresh);
                if (taken) pool_.store(std::shared_ptr<RadosPool>(std::move(fresh)));
                if (taken || taken.err() == EBUSY) st = taken;
            }
        }
        std::string lost;
        if (st) {
            // Held again; but another client may have had it meanwhile.
            const Status same = retaken();
            if (same) {
                fenced_.store(false);
                if (log) log("hiodsfs: the lock on " + describe() + " is taken again; writes resume");
                guard.lock();
                return true;
            }
            lost = "the lock on " + describe() + " was taken again after it lapsed, but " + same.message() +
                   "; the store takes no more writes until it is mounted again";
            (void)conn()->unlock(lock_);
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

Status RadosTier::take_lock_with(RadosPool& pool) {
    Status st = pool.lock_exclusive(lock_, lease_);
    if (st.err() == EEXIST) return pool.renew_lock(lock_, lease_);  // the lease had not run out there
    if (st.err() != EBUSY) return st;
    std::vector<RadosLocker> holders;
    if (!pool.lockers(store_ + ".lock", kLockName, &holders) || holders.empty()) return st;
    for (const RadosLocker& h : holders)
        if (h.cookie != lock_.cookie) return st;  // another process's
    for (const RadosLocker& h : holders) {
        const Status broke = pool.break_lock(store_ + ".lock", kLockName, h);
        if (!broke && broke.err() != ENOENT) return broke;
    }
    return pool.lock_exclusive(lock_, lease_);
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
    return conn()->unlock(lock_);
}

Status RadosTier::lockers(std::vector<RadosLocker>* out) {
    return conn()->lockers(store_ + ".lock", kLockName, out);
}

Status RadosTier::break_lock(const RadosLocker& holder) {
    return conn()->break_lock(store_ + ".lock", kLockName, holder);
}

}  // namespace hiodsfs
