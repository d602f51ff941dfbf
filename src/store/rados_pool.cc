#include "store/rados_pool.h"

#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "store/librados_api.h"

namespace hiodsfs {

struct RadosPool::Handles {
    const LibradosApi* api = nullptr;  // librados is called only through this
    rados_t cluster = nullptr;
    rados_ioctx_t io = nullptr;
    ~Handles() {
        if (io != nullptr) api->ioctx_destroy(io);
        if (cluster != nullptr) api->shutdown(cluster);
    }
};

namespace {

// librados reads at most INT_MAX bytes in one call (its result is an int);
// objects are far smaller (osd_max_object_size is 128 MiB by default).
constexpr std::size_t kMaxRead = INT_MAX - 1;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Splits librados's "a\0b\0" lists.
std::vector<std::string> split_nul(const std::vector<char>& buf, std::size_t len) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i < len && i < buf.size(); ++i) {
        if (buf[i] == '\0') {
            out.emplace_back(buf.data() + start, i - start);
            start = i + 1;
        }
    }
    return out;
}

}  // namespace

RadosPool::RadosPool(std::unique_ptr<Handles> handles, std::string pool)
    : handles_(std::move(handles)), pool_(std::move(pool)) {}

RadosPool::~RadosPool() = default;

Status RadosPool::error(int rc, const char* what, const std::string& object) const {
    return Status::from_errno(-rc, std::string("rados ") + what + " of object " + quoted(object) +
                                       " in pool " + quoted(pool_));
}

Status RadosPool::connect(const RadosOptions& options, std::unique_ptr<RadosPool>* out) {
    auto handles = std::make_unique<Handles>();
    HIODSFS_TRY(load_librados(&handles->api));
    const std::string where = "the Ceph cluster of " + options.conf_path;
    int rc = handles->api->create2(&handles->cluster, "ceph", ("client." + options.client_id).c_str(), 0);
    if (rc < 0) return Status::from_errno(-rc, "rados: client." + options.client_id);
    rc = handles->api->conf_read_file(handles->cluster, options.conf_path.c_str());
    if (rc < 0) return Status::from_errno(-rc, "rados: reading " + options.conf_path);
    if (!options.keyring.empty()) {
        rc = handles->api->conf_set(handles->cluster, "keyring", options.keyring.c_str());
        if (rc < 0) return Status::from_errno(-rc, "rados: keyring " + options.keyring);
    }
    // Without these librados waits for an unreachable mon or OSD forever.
    const std::string secs = std::to_string(std::max<long>(1, options.timeout.count()));
    for (const char* key : {"client_mount_timeout", "rados_mon_op_timeout", "rados_osd_op_timeout"}) {
        rc = handles->api->conf_set(handles->cluster, key, secs.c_str());
        if (rc < 0) return Status::from_errno(-rc, std::string("rados: setting ") + key);
    }
    rc = handles->api->connect(handles->cluster);
    if (rc < 0) {
        return Status::from_errno(-rc, "rados: connecting to " + where + " as client." +
                                           options.client_id + " (timeout " + secs + " s)");
    }
    rc = handles->api->ioctx_create(handles->cluster, options.pool.c_str(), &handles->io);
    if (rc < 0) return Status::from_errno(-rc, "rados: opening pool " + quoted(options.pool) + " of " + where);
    out->reset(new RadosPool(std::move(handles), options.pool));
    return Status::ok();
}

Status RadosPool::write_full(const std::string& object, const void* data, std::size_t len) {
    int rc = handles_->api->write_full(handles_->io, object.c_str(), static_cast<const char*>(data), len);
    return rc < 0 ? error(rc, "write_full", object) : Status::ok();
}

Status RadosPool::write(const std::string& object, std::uint64_t offset, const void* data, std::size_t len) {
    int rc = handles_->api->write(handles_->io, object.c_str(), static_cast<const char*>(data), len, offset);
    return rc < 0 ? error(rc, "write", object) : Status::ok();
}

Status RadosPool::append(const std::string& object, const void* data, std::size_t len) {
    int rc = handles_->api->append(handles_->io, object.c_str(), static_cast<const char*>(data), len);
    return rc < 0 ? error(rc, "append", object) : Status::ok();
}

Status RadosPool::read(const std::string& object, std::vector<std::uint8_t>* out) {
    // One byte more than stat said: a read that fills it means the object
    // grew in between, and is tried again; one that does not is the whole
    // object as it was at that read.
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::uint64_t size = 0;
        HIODSFS_TRY(stat(object, &size));
        if (size >= kMaxRead) {
            return Status::error(EFBIG, "rados read of object " + quoted(object) + " in pool " +
                                            quoted(pool_) + ": " + std::to_string(size) +
                                            " bytes is more than one read takes");
        }
        HIODSFS_TRY(read(object, 0, size + 1, out));
        if (out->size() <= size) return Status::ok();
    }
    return Status::error(EAGAIN, "rados read of object " + quoted(object) + " in pool " +
                                     quoted(pool_) + ": it kept growing while being read");
}

Status RadosPool::read(const std::string& object, std::uint64_t offset, std::size_t len,
                       std::vector<std::uint8_t>* out) {
    if (len > kMaxRead) return error(-EINVAL, "read (too long)", object);
    out->resize(len);
    int rc = handles_->api->read(handles_->io, object.c_str(), reinterpret_cast<char*>(out->data()), len,
                        offset);
    if (rc < 0) {
        out->clear();
        return error(rc, "read", object);
    }
    out->resize(static_cast<std::size_t>(rc));
    return Status::ok();
}

Status RadosPool::stat(const std::string& object, std::uint64_t* size) {
    time_t mtime = 0;
    int rc = handles_->api->stat(handles_->io, object.c_str(), size, &mtime);
    return rc < 0 ? error(rc, "stat", object) : Status::ok();
}

Status RadosPool::remove(const std::string& object) {
    int rc = handles_->api->remove(handles_->io, object.c_str());
    return rc < 0 ? error(rc, "remove", object) : Status::ok();
}

Status RadosPool::list(const std::string& prefix, std::vector<std::string>* names) {
    names->clear();
    rados_list_ctx_t ctx = nullptr;
    int rc = handles_->api->nobjects_list_open(handles_->io, &ctx);
    if (rc < 0) return error(rc, "listing", prefix + "*");
    for (;;) {
        const char* entry = nullptr;
        std::size_t entry_size = 0;
        rc = handles_->api->nobjects_list_next2(ctx, &entry, nullptr, nullptr, &entry_size, nullptr, nullptr);
        if (rc == -ENOENT) break;  // the end
        if (rc < 0) {
            handles_->api->nobjects_list_close(ctx);
            names->clear();
            return error(rc, "listing", prefix + "*");
        }
        std::string name(entry, entry_size);
        if (name.compare(0, prefix.size(), prefix) == 0) names->push_back(std::move(name));
    }
    handles_->api->nobjects_list_close(ctx);
    std::sort(names->begin(), names->end());
    return Status::ok();
}

Status RadosPool::take_lock(const RadosLock& lock, std::chrono::seconds lease, bool renew) {
    timeval duration{};
    duration.tv_sec = lease.count();
    int rc = handles_->api->lock_exclusive(handles_->io, lock.object.c_str(), lock.name.c_str(),
                                  lock.cookie.c_str(), lock.description.c_str(), &duration,
                                  renew ? LIBRADOS_LOCK_FLAG_MUST_RENEW : 0);
    if (rc == 0) return Status::ok();
    const std::string what = "lock " + quoted(lock.name) + " on object " + quoted(lock.object) +
                             " in pool " + quoted(pool_);
    if (rc == -EBUSY) {
        std::vector<std::string> holders;
        std::string by = "another client";
        if (lock_holders(lock.object, lock.name, &holders).is_ok() && !holders.empty()) {
            by = holders.front();
        }
        return Status::error(EBUSY, what + " is held by " + by);
    }
    if (rc == -EEXIST) return Status::error(EEXIST, what + ": this client holds it already");
    if (renew && rc == -ENOENT) {
        return Status::error(ENOENT, what + ": not held by " + quoted(lock.cookie) +
                                         " any more (the lease lapsed and was lost)");
    }
    return Status::from_errno(-rc, what);
}

Status RadosPool::lock_exclusive(const RadosLock& lock, std::chrono::seconds lease) {
    return take_lock(lock, lease, false);
}

Status RadosPool::renew_lock(const RadosLock& lock, std::chrono::seconds lease) {
    return take_lock(lock, lease, true);
}

Status RadosPool::unlock(const RadosLock& lock) {
    int rc = handles_->api->unlock(handles_->io, lock.object.c_str(), lock.name.c_str(), lock.cookie.c_str());
    if (rc < 0) {
        return Status::from_errno(-rc, "unlocking " + quoted(lock.name) + " on object " +
                                           quoted(lock.object) + " in pool " + quoted(pool_) +
                                           " as " + quoted(lock.cookie));
    }
    return Status::ok();
}

Status RadosPool::lock_holders(const std::string& object, const std::string& name,
                               std::vector<std::string>* holders) {
    holders->clear();
    std::vector<RadosLocker> found;
    HIODSFS_TRY(lockers(object, name, &found));
    for (const RadosLocker& l : found) {
        std::string h = quoted(l.cookie) + " (" + l.client;
        if (!l.address.empty()) h += " at " + l.address;
        holders->push_back(h + ")");
    }
    return Status::ok();
}

Status RadosPool::break_lock(const std::string& object, const std::string& name, const RadosLocker& holder) {
    int rc = handles_->api->break_lock(handles_->io, object.c_str(), name.c_str(), holder.client.c_str(),
                              holder.cookie.c_str());
    if (rc < 0) {
        return Status::from_errno(-rc, "breaking " + quoted(name) + " on object " + quoted(object) +
                                           " in pool " + quoted(pool_) + " held by " + quoted(holder.cookie));
    }
    return Status::ok();
}

Status RadosPool::lockers(const std::string& object, const std::string& name, std::vector<RadosLocker>* out) {
    out->clear();
    std::size_t tag_len = 256, clients_len = 1024, cookies_len = 1024, addrs_len = 1024;
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::vector<char> tag(tag_len), clients(clients_len), cookies(cookies_len), addrs(addrs_len);
        int exclusive = 0;
        ssize_t n = handles_->api->list_lockers(handles_->io, object.c_str(), name.c_str(), &exclusive,
                                       tag.data(), &tag_len, clients.data(), &clients_len,
                                       cookies.data(), &cookies_len, addrs.data(), &addrs_len);
        if (n == -ERANGE) continue;  // the lengths now say what it needs
        if (n == -ENOENT) return Status::ok();  // no such object: no holder
        if (n < 0) return error(static_cast<int>(n), "listing the lockers", object);
        auto c = split_nul(clients, clients_len);
        auto k = split_nul(cookies, cookies_len);
        auto a = split_nul(addrs, addrs_len);
        for (std::size_t i = 0; i < static_cast<std::size_t>(n) && i < c.size(); ++i)
            out->push_back(RadosLocker{c[i], i < k.size() ? k[i] : "", i < a.size() ? a[i] : ""});
        return Status::ok();
    }
    return error(-ERANGE, "listing the lockers", object);
}

}  // namespace hiodsfs
