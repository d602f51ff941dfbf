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

void put_le32(std::string* out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_string(std::string* out, const std::string& s) {
    put_le32(out, static_cast<std::uint32_t>(s.size()));
    out->append(s);
}

constexpr std::uint8_t kClsLockExclusive = 1;  // ClsLockType::EXCLUSIVE

}  // namespace

std::string cls_lock_assert_input(const RadosLock& lock) {
    std::string body;
    put_string(&body, lock.name);
    body.push_back(static_cast<char>(kClsLockExclusive));
    put_string(&body, lock.cookie);
    put_string(&body, "");  // the tag
    std::string out;
    out.push_back(1);  // ENCODE_START(1, 1, ...): struct version, oldest compatible one
    out.push_back(1);
    put_le32(&out, static_cast<std::uint32_t>(body.size()));
    return out + body;
}

// One compound write, released when done.
class RadosPool::WriteOp {
public:
    explicit WriteOp(const LibradosApi* api) : api_(api), op_(api->create_write_op()) {}
    ~WriteOp() {
        if (op_ != nullptr) api_->release_write_op(op_);
    }
    WriteOp(const WriteOp&) = delete;
    WriteOp& operator=(const WriteOp&) = delete;
    rados_write_op_t get() const { return op_; }
    // The lock must be held by this client on the operation's object.
    void assert_held(const RadosLock& lock) {
        input_ = cls_lock_assert_input(lock);
        api_->write_op_exec(op_, "lock", "assert_locked", input_.data(), input_.size(),
                            &assert_rc_);
    }

private:
    const LibradosApi* api_;
    rados_write_op_t op_;
    std::string input_;  // kept until the operation is sent
    int assert_rc_ = 0;
};

RadosPool::RadosPool(std::unique_ptr<Handles> handles, std::string pool)
    : handles_(std::move(handles)), pool_(std::move(pool)) {}

RadosPool::~RadosPool() = default;

Status RadosPool::error(int rc, const char* what, const std::string& object) const {
    return Status::from_errno(-rc, std::string("rados ") + what + " of object " + quoted(object) +
                                       " in pool " + quoted(pool_));
}

Status RadosPool::connect(const RadosOptions& options, std::unique_ptr<RadosPool>* out) {
    auto handles = std::make_unique<Handles>();
    handles->api = options.librados;
    if (handles->api == nullptr) HIODSFS_TRY(load_librados(&handles->api));
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

Status RadosPool::operate(WriteOp& op, const char* what, const std::string& object) {
    if (op.get() == nullptr) return error(-ENOMEM, what, object);
    const int rc =
        handles_->api->write_op_operate(op.get(), handles_->io, object.c_str(), nullptr, 0);
    return rc < 0 ? error(rc, what, object) : Status::ok();
}

Status RadosPool::write_full(const std::string& object, const void* data, std::size_t len,
                             const RadosLock* held) {
    WriteOp op(handles_->api);
    if (held != nullptr) op.assert_held(*held);
    handles_->api->write_op_write_full(op.get(), static_cast<const char*>(data), len);
    return operate(op, held != nullptr ? "write_full (as the lock's holder)" : "write_full",
                   object);
}

Status RadosPool::write(const std::string& object, std::uint64_t offset, const void* data, std::size_t len) {
    WriteOp op(handles_->api);
    handles_->api->write_op_write(op.get(), static_cast<const char*>(data), len, offset);
    return operate(op, "write", object);
}

Status RadosPool::append(const std::string& object, const void* data, std::size_t len) {
    WriteOp op(handles_->api);
    handles_->api->write_op_append(op.get(), static_cast<const char*>(data), len);
    return operate(op, "append", object);
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
    WriteOp op(handles_->api);
    handles_->api->write_op_remove(op.get());
    return operate(op, "remove", object);
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

Status RadosPool::blocklist(const std::string& address) {
    // An address is "v1:IP:PORT/NONCE" or "IP:PORT/NONCE": nothing a JSON
    // string would have to escape; anything else is refused here.
    for (char c : address) {
        const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                        (c >= 'A' && c <= 'F') || c == ':' || c == '.' || c == '/' || c == '[' ||
                        c == ']' || c == 'v' || c == ',';
        if (!ok) return Status::error(EINVAL, "rados: not a client address: " + quoted(address));
    }
    const std::string command =
        R"({"prefix":"osd blocklist","blocklistop":"add","addr":")" + address + R"("})";
    const char* argv[] = {command.c_str()};
    char* out = nullptr;
    char* outs = nullptr;
    std::size_t out_len = 0, outs_len = 0;
    const int rc = handles_->api->mon_command(handles_->cluster, argv, 1, "", 0, &out, &out_len,
                                              &outs, &outs_len);
    const std::string said = outs != nullptr ? std::string(outs, outs_len) : "";
    if (out != nullptr) handles_->api->buffer_free(out);
    if (outs != nullptr) handles_->api->buffer_free(outs);
    if (rc < 0) {
        return Status::from_errno(-rc, "rados: blocklisting client " + quoted(address) +
                                           " (ceph osd blocklist add)" +
                                           (said.empty() ? "" : ": " + said));
    }
    return Status::ok();
}

Status RadosPool::wait_for_latest_map() {
    const int rc = handles_->api->wait_for_latest_osdmap(handles_->cluster);
    return rc < 0 ? Status::from_errno(-rc, "rados: fetching the cluster's newest OSD map")
                  : Status::ok();
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
