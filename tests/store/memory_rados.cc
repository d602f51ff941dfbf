#include "memory_rados.h"

#include <rados/librados.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "store/librados_api.h"

namespace hiodsfs::test {
namespace memrados {

using Clock = std::chrono::steady_clock;

// One holder of a lock, keyed as cls_lock keys them: (client, cookie).
using LockerId = std::pair<std::string, std::string>;
struct Locker {
    std::string address;
    Clock::time_point expires = Clock::time_point::max();  // max: no lease
};
using Lockers = std::map<LockerId, Locker>;

struct Object {
    std::string data;
    std::map<std::string, Lockers> locks;  // by lock name (cls_lock keeps them in xattrs)
};

struct Cluster {
    std::string conf_path;  // what a client's conf_read_file names it by
    std::string pool = "hiodsfs";
    mutable std::mutex mu;
    // Everything below is under mu.
    std::map<std::string, Object> objects;
    std::uint64_t next_client = 4100;  // global ids, as the mons give them
    std::uint64_t map_epoch = 1;       // the mons' newest OSD map
    std::uint64_t osd_epoch = 1;       // the map the OSD has
    // Blocklisted addresses (without the "v1:" type), with the map that has each.
    std::vector<std::pair<std::string, std::uint64_t>> blocklist;
    std::vector<std::string> blocklist_as_given;
    int lock_fault = 0;
    std::uint64_t cut_off_below = 0;  // clients of a lower id cannot reach the cluster
    std::uint64_t renewals = 0;
    std::map<std::string, std::uint64_t> writes;  // landed, by client address
};

// A connection (rados_t). Its fields are set while one thread connects;
// map_epoch later under the cluster's mutex.
struct Client {
    std::shared_ptr<Cluster> cluster;  // once its conf is read
    bool connected = false;
    std::uint64_t id = 0;
    std::string name;     // "client.4101"
    std::string address;  // "v1:127.0.0.1:0/NONCE"
    std::uint64_t map_epoch = 0;
};

struct IoCtx {
    Client* client;
};

struct Step {
    enum Kind { kWrite, kWriteFull, kAppend, kRemove, kExec } kind;
    std::string data;
    std::uint64_t offset = 0;
    std::string cls, method;  // kExec; data is its input
    int* prval = nullptr;
};
struct WriteOp {
    std::vector<Step> steps;
};

struct ListCtx {
    std::vector<std::string> names;
    std::size_t next = 0;
};

// The clusters the conf paths name.
std::mutex registry_mu;
std::map<std::string, std::weak_ptr<Cluster>> registry;
std::uint64_t registered = 0;

std::string without_type(const std::string& address) {
    for (const char* type : {"v1:", "v2:", "any:"}) {
        const std::size_t n = std::strlen(type);
        if (address.compare(0, n, type) == 0) return address.substr(n);
    }
    return address;
}

// mu held. Whether the client's operation reaches the OSD and is served
// there; the OSD takes the client's map first if it is newer.
int admit(Cluster& c, const Client& client) {
    if (!client.connected) return -ENOTCONN;
    if (client.id < c.cut_off_below) return -ETIMEDOUT;
    c.osd_epoch = std::max(c.osd_epoch, client.map_epoch);
    const std::string address = without_type(client.address);
    for (const auto& [blocked, epoch] : c.blocklist)
        if (epoch <= c.osd_epoch && blocked == address) return -ESHUTDOWN;  // EBLOCKLISTED
    return 0;
}

void trim(Lockers& lockers) {
    const Clock::time_point now = Clock::now();
    std::erase_if(lockers, [&](const auto& entry) { return entry.second.expires < now; });
}

Client& client_of(rados_t cluster) { return *static_cast<Client*>(cluster); }
Client& client_of_io(rados_ioctx_t io) { return *static_cast<IoCtx*>(io)->client; }

// Runs fn(cluster, client) under the cluster's mutex if the OSD serves
// the client's operation; the refusal otherwise.
template <typename R = int, typename Fn>
R served(rados_ioctx_t io, Fn&& fn) {
    Client& client = client_of_io(io);
    Cluster& c = *client.cluster;
    std::lock_guard guard(c.mu);
    if (const int rc = admit(c, client); rc < 0) return rc;
    return fn(c, client);
}

// The same with the object named, which must exist (ENOENT).
template <typename R = int, typename Fn>
R on_object(rados_ioctx_t io, const char* oid, Fn&& fn) {
    return served<R>(io, [&](Cluster& c, Client& client) -> R {
        auto it = c.objects.find(oid);
        if (it == c.objects.end()) return -ENOENT;
        return fn(it->second, client);
    });
}

// cls_lock_assert_op as Ceph encodes it: version, compat, length, then the
// lock's name, its type, the cookie and the tag. False if cut short.
struct AssertInput {
    std::string name, cookie, tag;
    std::uint8_t type = 0;
};
bool decode_assert(const std::string& in, AssertInput* out) {
    std::size_t at = 0;
    auto u8 = [&](std::uint8_t* v) {
        if (at + 1 > in.size()) return false;
        *v = static_cast<std::uint8_t>(in[at++]);
        return true;
    };
    auto u32 = [&](std::uint32_t* v) {
        if (at + 4 > in.size()) return false;
        *v = 0;
        for (int i = 0; i < 4; ++i)
            *v |= std::uint32_t(static_cast<std::uint8_t>(in[at++])) << (8 * i);
        return true;
    };
    auto str = [&](std::string* s) {
        std::uint32_t n = 0;
        if (!u32(&n) || at + n > in.size()) return false;
        *s = in.substr(at, n);
        at += n;
        return true;
    };
    std::uint8_t version = 0, compat = 0;
    std::uint32_t length = 0;
    if (!u8(&version) || !u8(&compat) || !u32(&length) || compat > 1 || at + length != in.size())
        return false;
    return str(&out->name) && u8(&out->type) && str(&out->cookie) && str(&out->tag) &&
           at == in.size();
}

// cls_lock's assert_locked on `obj` (nullptr: no such object).
int assert_locked(Object* obj, const Client& client, const std::string& input) {
    constexpr std::uint8_t kExclusive = 1, kShared = 2;
    AssertInput op;
    if (!decode_assert(input, &op)) return -EINVAL;
    if ((op.type != kExclusive && op.type != kShared) || op.name.empty()) return -EINVAL;
    if (obj == nullptr) return -ENOENT;
    Lockers& lockers = obj->locks[op.name];
    trim(lockers);
    // Every lock here is exclusive, with an empty tag (rados_lock_exclusive's).
    if (lockers.empty() || op.type != kExclusive || !op.tag.empty()) return -EBUSY;
    return lockers.count(LockerId{client.name, op.cookie}) != 0 ? 0 : -EBUSY;
}

char* copy_out(const std::string& s, std::size_t* len) {
    // Freed by rados_buffer_free, as librados's are: malloc'd.
    char* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (p == nullptr) return nullptr;
    std::memcpy(p, s.c_str(), s.size() + 1);
    if (len != nullptr) *len = s.size();
    return p;
}

// ---- the librados functions

int mem_create2(rados_t* pcluster, const char* const, const char* const, uint64_t) {
    // The handle owns its client until rados_shutdown (the C API's contract).
    *pcluster = std::make_unique<Client>().release();
    return 0;
}

int mem_conf_read_file(rados_t cluster, const char* path) {
    std::lock_guard guard(registry_mu);
    auto it = registry.find(path != nullptr ? path : "");
    if (it == registry.end()) return -ENOENT;
    client_of(cluster).cluster = it->second.lock();
    return client_of(cluster).cluster != nullptr ? 0 : -ENOENT;
}

int mem_conf_set(rados_t, const char*, const char*) { return 0; }

int mem_connect(rados_t cluster) {
    Client& client = client_of(cluster);
    if (client.cluster == nullptr) return -ENOENT;  // no mon named
    Cluster& c = *client.cluster;
    std::lock_guard guard(c.mu);
    client.id = c.next_client++;
    client.name = "client." + std::to_string(client.id);
    client.address = "v1:127.0.0.1:0/" + std::to_string(3000000000u + client.id * 7919);
    client.map_epoch = c.map_epoch;
    client.connected = true;
    return 0;
}

void mem_shutdown(rados_t cluster) { std::unique_ptr<Client> gone(static_cast<Client*>(cluster)); }

int mem_ioctx_create(rados_t cluster, const char* pool_name, rados_ioctx_t* io) {
    Client& client = client_of(cluster);
    if (!client.connected) return -ENOTCONN;
    if (client.cluster->pool != pool_name) return -ENOENT;
    *io = std::make_unique<IoCtx>(IoCtx{&client}).release();
    return 0;
}

void mem_ioctx_destroy(rados_ioctx_t io) { std::unique_ptr<IoCtx> gone(static_cast<IoCtx*>(io)); }

int mem_read(rados_ioctx_t io, const char* oid, char* buf, size_t len, uint64_t off) {
    return on_object(io, oid, [&](Object& obj, Client&) {
        if (off >= obj.data.size()) return 0;
        const std::size_t n = std::min<std::size_t>(len, obj.data.size() - off);
        std::memcpy(buf, obj.data.data() + off, n);
        return static_cast<int>(n);
    });
}

int mem_stat(rados_ioctx_t io, const char* oid, uint64_t* psize, time_t* pmtime) {
    return on_object(io, oid, [&](Object& obj, Client&) {
        if (psize != nullptr) *psize = obj.data.size();
        if (pmtime != nullptr) *pmtime = 0;
        return 0;
    });
}

int mem_nobjects_list_open(rados_ioctx_t io, rados_list_ctx_t* ctx) {
    return served(io, [&](Cluster& c, Client&) {
        auto list = std::make_unique<ListCtx>();
        for (const auto& [name, obj] : c.objects) list->names.push_back(name);
        *ctx = list.release();
        return 0;
    });
}

int mem_nobjects_list_next2(rados_list_ctx_t ctx, const char** entry, const char** key,
                            const char** nspace, size_t* entry_size, size_t* key_size,
                            size_t* nspace_size) {
    ListCtx& list = *static_cast<ListCtx*>(ctx);
    if (list.next == list.names.size()) return -ENOENT;
    const std::string& name = list.names[list.next++];
    *entry = name.c_str();
    if (entry_size != nullptr) *entry_size = name.size();
    if (key != nullptr) *key = nullptr;
    if (key_size != nullptr) *key_size = 0;
    if (nspace != nullptr) *nspace = "";
    if (nspace_size != nullptr) *nspace_size = 0;
    return 0;
}

void mem_nobjects_list_close(rados_list_ctx_t ctx) {
    std::unique_ptr<ListCtx> gone(static_cast<ListCtx*>(ctx));
}

int mem_lock_exclusive(rados_ioctx_t io, const char* oid, const char* name, const char* cookie,
                       const char*, struct timeval* duration, uint8_t flags) {
    return served(io, [&](Cluster& c, Client& client) {
        if (c.lock_fault != 0) return -c.lock_fault;
        // As cls_lock's lock_obj: the holder's own entry first, then others.
        const bool may_renew = (flags & LIBRADOS_LOCK_FLAG_MAY_RENEW) != 0;
        const bool must_renew = (flags & LIBRADOS_LOCK_FLAG_MUST_RENEW) != 0;
        auto it = c.objects.find(oid);
        Lockers lockers;
        if (it != c.objects.end()) lockers = it->second.locks[name];
        trim(lockers);
        const LockerId id{client.name, cookie};
        if (lockers.count(id) != 0) {
            if (!may_renew && !must_renew) return -EEXIST;
            lockers.erase(id);
        } else if (must_renew) {
            return -ENOENT;
        }
        if (!lockers.empty()) return -EBUSY;
        Locker mine{client.address};
        if (duration != nullptr && (duration->tv_sec != 0 || duration->tv_usec != 0))
            mine.expires = Clock::now() + std::chrono::seconds(duration->tv_sec) +
                           std::chrono::microseconds(duration->tv_usec);
        lockers[id] = mine;
        c.objects[oid].locks[name] = std::move(lockers);  // a lock creates its object
        if (must_renew) ++c.renewals;
        return 0;
    });
}

// Removes (locker, cookie) from the lock: unlock and break_lock.
int remove_locker(rados_ioctx_t io, const char* oid, const char* name, const std::string& locker,
                  const char* cookie) {
    return on_object(io, oid, [&](Object& obj, Client&) {
        Lockers& lockers = obj.locks[name];
        trim(lockers);
        return lockers.erase(LockerId{locker, cookie}) != 0 ? 0 : -ENOENT;
    });
}

int mem_unlock(rados_ioctx_t io, const char* oid, const char* name, const char* cookie) {
    return remove_locker(io, oid, name, client_of_io(io).name, cookie);
}

int mem_break_lock(rados_ioctx_t io, const char* oid, const char* name, const char* locker,
                   const char* cookie) {
    return remove_locker(io, oid, name, locker, cookie);
}

ssize_t mem_list_lockers(rados_ioctx_t io, const char* oid, const char* name, int* exclusive,
                         char* tag, size_t* tag_len, char* clients, size_t* clients_len,
                         char* cookies, size_t* cookies_len, char* addrs, size_t* addrs_len) {
    return on_object<ssize_t>(io, oid, [&](Object& obj, Client&) -> ssize_t {
        Lockers& lockers = obj.locks[name];
        trim(lockers);
        // As librados's rados_list_lockers: every length says what it needs,
        // and ERANGE when one is short.
        std::size_t clients_total = 0, cookies_total = 0, addrs_total = 0;
        for (const auto& [id, locker] : lockers) {
            clients_total += id.first.size() + 1;
            cookies_total += id.second.size() + 1;
            addrs_total += locker.address.size() + 1;
        }
        const bool too_short = clients_total > *clients_len || cookies_total > *cookies_len ||
                               addrs_total > *addrs_len || *tag_len < 1;
        *clients_len = clients_total;
        *cookies_len = cookies_total;
        *addrs_len = addrs_total;
        *tag_len = 1;
        if (too_short) return -ERANGE;
        tag[0] = '\0';
        for (const auto& [id, locker] : lockers) {
            clients = std::copy(id.first.begin(), id.first.end(), clients);
            *clients++ = '\0';
            cookies = std::copy(id.second.begin(), id.second.end(), cookies);
            *cookies++ = '\0';
            addrs = std::copy(locker.address.begin(), locker.address.end(), addrs);
            *addrs++ = '\0';
        }
        *exclusive = 1;
        return static_cast<ssize_t>(lockers.size());
    });
}

rados_write_op_t mem_create_write_op() { return std::make_unique<WriteOp>().release(); }

void mem_release_write_op(rados_write_op_t op) {
    std::unique_ptr<WriteOp> gone(static_cast<WriteOp*>(op));
}

void add_step(rados_write_op_t op, Step step) {
    static_cast<WriteOp*>(op)->steps.push_back(std::move(step));
}

void mem_write_op_write(rados_write_op_t op, const char* buffer, size_t len, uint64_t offset) {
    add_step(op, Step{Step::kWrite, std::string(buffer, len), offset});
}
void mem_write_op_write_full(rados_write_op_t op, const char* buffer, size_t len) {
    add_step(op, Step{Step::kWriteFull, std::string(buffer, len)});
}
void mem_write_op_append(rados_write_op_t op, const char* buffer, size_t len) {
    add_step(op, Step{Step::kAppend, std::string(buffer, len)});
}
void mem_write_op_remove(rados_write_op_t op) { add_step(op, Step{Step::kRemove}); }
void mem_write_op_exec(rados_write_op_t op, const char* cls, const char* method, const char* in_buf,
                       size_t in_len, int* prval) {
    add_step(op, Step{Step::kExec, std::string(in_buf, in_len), 0, cls, method, prval});
}

// Applies a compound write's steps to obj (*exists: whether it exists,
// before and after); 0, or the first step's failure.
int apply(const WriteOp& op, const Client& client, Object* obj, bool* exists) {
    for (const Step& step : op.steps) {
        switch (step.kind) {
            case Step::kExec: {
                const int rc = step.cls == "lock" && step.method == "assert_locked"
                                   ? assert_locked(*exists ? obj : nullptr, client, step.data)
                                   : -EOPNOTSUPP;
                if (step.prval != nullptr) *step.prval = rc;
                if (rc < 0) return rc;
                break;
            }
            case Step::kWrite:
                if (obj->data.size() < step.offset + step.data.size())
                    obj->data.resize(step.offset + step.data.size());
                std::copy(step.data.begin(), step.data.end(),
                          obj->data.begin() + static_cast<std::ptrdiff_t>(step.offset));
                *exists = true;
                break;
            case Step::kWriteFull:
                obj->data = step.data;
                *exists = true;
                break;
            case Step::kAppend:
                obj->data += step.data;
                *exists = true;
                break;
            case Step::kRemove:
                if (!*exists) return -ENOENT;
                *obj = Object{};  // its locks go with it
                *exists = false;
                break;
        }
    }
    return 0;
}

int mem_write_op_operate(rados_write_op_t op, rados_ioctx_t io, const char* oid, time_t*, int) {
    return served(io, [&](Cluster& c, Client& client) {
        // Applied to a copy, which replaces the object only if every step worked.
        auto it = c.objects.find(oid);
        bool exists = it != c.objects.end();
        Object obj = exists ? it->second : Object{};
        if (const int rc = apply(*static_cast<WriteOp*>(op), client, &obj, &exists); rc < 0)
            return rc;
        if (exists)
            c.objects[oid] = std::move(obj);
        else
            c.objects.erase(oid);
        ++c.writes[client.address];
        return 0;
    });
}

int mem_mon_command(rados_t cluster, const char** cmd, size_t cmdlen, const char*, size_t,
                    char** outbuf, size_t* outbuflen, char** outs, size_t* outslen) {
    Client& client = client_of(cluster);
    if (!client.connected) return -ENOTCONN;
    Cluster& c = *client.cluster;
    std::string text;
    for (std::size_t i = 0; i < cmdlen; ++i) text += cmd[i];
    const nlohmann::json command = nlohmann::json::parse(text, nullptr, false);
    std::string said;
    int rc = 0;
    {
        std::lock_guard guard(c.mu);
        if (client.id < c.cut_off_below) return -ETIMEDOUT;
        const bool add = command.is_object() && command.value("prefix", "") == "osd blocklist" &&
                         command.value("blocklistop", "") == "add" && command.contains("addr") &&
                         command["addr"].is_string();
        if (add) {
            const std::string address = command["addr"];
            ++c.map_epoch;
            c.blocklist.emplace_back(without_type(address), c.map_epoch);
            c.blocklist_as_given.push_back(address);
            said = "blocklisting " + address;
        } else {
            said = "command not known to the memory cluster: " + text;
            rc = -EINVAL;
        }
    }
    if (outbuf != nullptr) *outbuf = copy_out("", outbuflen);
    if (outs != nullptr) *outs = copy_out(said, outslen);
    return rc;
}

void mem_buffer_free(char* buf) { std::free(buf); }

int mem_wait_for_latest_osdmap(rados_t cluster) {
    Client& client = client_of(cluster);
    if (!client.connected) return -ENOTCONN;
    Cluster& c = *client.cluster;
    std::lock_guard guard(c.mu);
    if (client.id < c.cut_off_below) return -ETIMEDOUT;
    client.map_epoch = c.map_epoch;
    return 0;
}

const LibradosApi api{
    .create2 = mem_create2,
    .conf_read_file = mem_conf_read_file,
    .conf_set = mem_conf_set,
    .connect = mem_connect,
    .shutdown = mem_shutdown,
    .ioctx_create = mem_ioctx_create,
    .ioctx_destroy = mem_ioctx_destroy,
    .read = mem_read,
    .stat = mem_stat,
    .nobjects_list_open = mem_nobjects_list_open,
    .nobjects_list_next2 = mem_nobjects_list_next2,
    .nobjects_list_close = mem_nobjects_list_close,
    .lock_exclusive = mem_lock_exclusive,
    .unlock = mem_unlock,
    .break_lock = mem_break_lock,
    .list_lockers = mem_list_lockers,
    .create_write_op = mem_create_write_op,
    .release_write_op = mem_release_write_op,
    .write_op_write = mem_write_op_write,
    .write_op_write_full = mem_write_op_write_full,
    .write_op_append = mem_write_op_append,
    .write_op_remove = mem_write_op_remove,
    .write_op_exec = mem_write_op_exec,
    .write_op_operate = mem_write_op_operate,
    .mon_command = mem_mon_command,
    .buffer_free = mem_buffer_free,
    .wait_for_latest_osdmap = mem_wait_for_latest_osdmap,
};

}  // namespace memrados

MemoryRados::MemoryRados() : cluster_(std::make_shared<memrados::Cluster>()) {
    std::lock_guard guard(memrados::registry_mu);
    cluster_->conf_path = "memory-rados:" + std::to_string(++memrados::registered);
    memrados::registry[cluster_->conf_path] = cluster_;
}

MemoryRados::~MemoryRados() {
    std::lock_guard guard(memrados::registry_mu);
    memrados::registry.erase(cluster_->conf_path);
}

RadosOptions MemoryRados::options(std::chrono::seconds timeout) const {
    RadosOptions o;
    o.conf_path = cluster_->conf_path;
    o.pool = cluster_->pool;
    o.timeout = timeout;
    o.librados = &memrados::api;
    return o;
}

void MemoryRados::fail_locks(int err) {
    std::lock_guard guard(cluster_->mu);
    cluster_->lock_fault = err;
}

void MemoryRados::cut_off_clients() {
    std::lock_guard guard(cluster_->mu);
    cluster_->cut_off_below = cluster_->next_client;
}

bool MemoryRados::object(const std::string& name, std::string* out) const {
    std::lock_guard guard(cluster_->mu);
    auto it = cluster_->objects.find(name);
    if (it == cluster_->objects.end()) return false;
    *out = it->second.data;
    return true;
}

std::vector<std::string> MemoryRados::objects(const std::string& prefix) const {
    std::lock_guard guard(cluster_->mu);
    std::vector<std::string> names;
    for (const auto& [name, obj] : cluster_->objects)
        if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
    return names;
}

std::vector<RadosLocker> MemoryRados::lockers(const std::string& object,
                                              const std::string& name) const {
    std::lock_guard guard(cluster_->mu);
    std::vector<RadosLocker> out;
    auto it = cluster_->objects.find(object);
    if (it == cluster_->objects.end()) return out;
    auto lock = it->second.locks.find(name);
    if (lock == it->second.locks.end()) return out;
    memrados::Lockers live = lock->second;
    memrados::trim(live);
    for (const auto& [id, locker] : live)
        out.push_back(RadosLocker{id.first, id.second, locker.address});
    return out;
}

std::vector<std::string> MemoryRados::blocklist() const {
    std::lock_guard guard(cluster_->mu);
    return cluster_->blocklist_as_given;
}

std::uint64_t MemoryRados::renewals() const {
    std::lock_guard guard(cluster_->mu);
    return cluster_->renewals;
}

std::uint64_t MemoryRados::writes_from(const std::string& address) const {
    std::lock_guard guard(cluster_->mu);
    auto it = cluster_->writes.find(address);
    return it != cluster_->writes.end() ? it->second : 0;
}

}  // namespace hiodsfs::test
