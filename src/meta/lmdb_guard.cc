#include "meta/lmdb_guard.h"

#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace hiodsfs {
namespace {

// A guarded call's jump point, on its own stack frame; the handler fills
// in what hit it.
struct GuardPoint {
    sigjmp_buf jump;
    GuardPoint* outer = nullptr;
    volatile int signal = 0;  // 0: an LMDB assertion
    void* volatile address = nullptr;
};

// Read in the signal handler: initial-exec, so reading them allocates nothing.
thread_local GuardPoint* t_point __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local char t_text[320] __attribute__((tls_model("initial-exec")));

// The handlers that were there before ours (SIGSEGV, SIGBUS).
struct sigaction g_previous[2];

// The largest key or value a write transaction may hand back from its own
// copy of a page (outside the map): far above any record hiodsfs writes
// (extended attributes, at most 64 KiB, are the largest).
constexpr std::size_t kMaxUnmappedValue = 64u << 20;

void on_fault(int sig, siginfo_t* info, void* context) {
    if (GuardPoint* point = t_point; point != nullptr) {
        point->signal = sig;
        point->address = info->si_addr;
        // The jump keeps the handler's mask, which a wrapper of ours (TSan's
        // blocks every signal) may have widened: back to the faulting code's
        // mask, or the next fault of a blocked kind would kill the process.
        pthread_sigmask(SIG_SETMASK, &static_cast<ucontext_t*>(context)->uc_sigmask, nullptr);
        siglongjmp(point->jump, 1);
    }
    const struct sigaction& previous = g_previous[sig == SIGBUS ? 1 : 0];
    if ((previous.sa_flags & SA_SIGINFO) != 0) {
        previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    } else {
        // The default action: a fault happens again as this returns; a
        // signal sent with kill() is sent again.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, nullptr);
        if (info->si_code <= 0) raise(sig);
    }
}

void on_assert(MDB_env*, const char* message) {
    GuardPoint* point = t_point;
    if (point == nullptr) return;  // LMDB prints the message and aborts
    std::snprintf(t_text, sizeof t_text, "LMDB: %s", message);
    point->signal = 0;
    siglongjmp(point->jump, 1);
}

int run_guarded(int (*calls)(void*), void* context) {
    GuardPoint point;
    point.outer = t_point;
    if (sigsetjmp(point.jump, 0) != 0) {
        t_point = point.outer;
        if (point.signal != 0)
            std::snprintf(t_text, sizeof t_text, "%s at address %p in LMDB",
                          point.signal == SIGBUS ? "SIGBUS" : "SIGSEGV", point.address);
        return kLmdbFault;
    }
    t_point = &point;
    const int rc = calls(context);
    t_point = point.outer;
    return rc;
}

// Runs `calls` (LMDB calls and plain values only: see the header) guarded.
template <class Calls>
int guarded(Calls&& calls) {
    return run_guarded([](void* c) { return (*static_cast<std::remove_reference_t<Calls>*>(c))(); },
                       &calls);
}

// Touches every page of [p, p + n) and its last byte: a fault here is
// caught by the guard. Not instrumented: the bytes may be anything, and
// the point is to read them before the caller does.
__attribute__((no_sanitize("address", "thread"))) void touch(const char* p, std::size_t n) {
    const volatile char* v = p;
    for (std::size_t i = 0; i < n; i += 4096) (void)v[i];
    (void)v[n - 1];
}

int vet(const MDB_val& val, const LmdbMap& map, bool read) {
    if (val.mv_size == 0) return 0;
    const auto at = reinterpret_cast<std::uintptr_t>(val.mv_data);
    const auto base = reinterpret_cast<std::uintptr_t>(map.base);
    const bool in_map = map.base != nullptr && at >= base && at - base < map.length;
    if (read && map.base != nullptr) {
        const std::uint64_t used = map.used.load(std::memory_order_relaxed);
        if (!in_map || at - base > used || val.mv_size > used - (at - base)) return kLmdbBadValue;
    } else if (!in_map && val.mv_size > kMaxUnmappedValue) {
        return kLmdbBadValue;
    }
    touch(static_cast<const char*>(val.mv_data), val.mv_size);
    return 0;
}

// Puts ours on top, unless it is there: whatever handler is there now (one
// installed since, such as a test framework's) becomes the one passed to.
Status install_handlers() {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    struct sigaction ours {};
    ours.sa_sigaction = on_fault;
    // On an alternate stack if the thread has one (ASan's, for stack
    // overflows); not deferred, so a fault in the handler is not masked.
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&ours.sa_mask);
    for (int i = 0; i < 2; ++i) {
        const int sig = i == 0 ? SIGSEGV : SIGBUS;
        struct sigaction now {};
        if (sigaction(sig, nullptr, &now) != 0)
            return Status::from_errno(errno, "read the fault handler");
        if ((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == on_fault) continue;
        g_previous[i] = now;
        if (sigaction(sig, &ours, nullptr) != 0)
            return Status::from_errno(errno, "install the metadata fault handler");
    }
    return Status::ok();
}

}  // namespace

bool lmdb_damage(int rc) {
    // LMDB's "internal errors" of a full page or a cursor stack too deep
    // come of a tree no valid file holds: pages overwritten by other bytes.
    return rc == kLmdbFault || rc == kLmdbBadValue || rc == MDB_CORRUPTED ||
           rc == MDB_PAGE_NOTFOUND || rc == MDB_PAGE_FULL || rc == MDB_CURSOR_FULL;
}

std::string lmdb_damage_text(int rc) {
    if (rc == kLmdbFault) return t_text;
    if (rc == kLmdbBadValue)
        return "LMDB handed back a key or value outside the metadata file's pages in use";
    return mdb_strerror(rc);
}

Status lmdb_guard_install(MDB_env* env) {
    HIODSFS_TRY(install_handlers());
    const int rc = mdb_env_set_assert(env, on_assert);
    return rc == 0
               ? Status::ok()
               : Status::error(rc, std::string("metadata assertion callback: ") + mdb_strerror(rc));
}

namespace {

// Calls fn(start, end) for each mapping of this process of the file with
// st's device and inode, from its first byte (/proc/self/maps: mdb_env_info's
// address is only set for MDB_FIXEDMAP).
template <class Fn>
void for_each_mapping(const struct stat& st, Fn&& fn) {
    std::FILE* f = std::fopen("/proc/self/maps", "re");
    if (f == nullptr) return;
    char line[4096];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        unsigned long start = 0, end = 0, offset = 0, inode = 0;
        unsigned major = 0, minor = 0;
        char perms[8] = {};
        if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &offset, &major,
                        &minor, &inode) != 7)
            continue;
        if (inode == st.st_ino && major == ::major(st.st_dev) && minor == ::minor(st.st_dev) &&
            offset == 0)
            fn(start, end);
    }
    std::fclose(f);
}

}  // namespace

void LmdbMap::note_existing(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return;
    for_each_mapping(st,
                     [this](std::uintptr_t start, std::uintptr_t) { existing_.push_back(start); });
}

bool LmdbMap::locate(MDB_env* env) {
    int fd = -1;
    struct stat st {};
    if (mdb_env_get_fd(env, &fd) != 0 || ::fstat(fd, &st) != 0) return false;
    for_each_mapping(st, [this](std::uintptr_t start, std::uintptr_t end) {
        if (base != nullptr ||
            std::find(existing_.begin(), existing_.end(), start) != existing_.end())
            return;
        base = reinterpret_cast<const char*>(start);
        length = end - start;
    });
    return base != nullptr;
}

Status LmdbMap::refresh(MDB_env* env) {
    MDB_envinfo info{};
    MDB_stat st{};
    int rc = mdb_env_info(env, &info);
    if (rc == 0) rc = mdb_env_stat(env, &st);
    if (rc != 0) return Status::error(EIO, std::string("metadata map size: ") + mdb_strerror(rc));
    used.store((static_cast<std::uint64_t>(info.me_last_pgno) + 1) * st.ms_psize,
               std::memory_order_relaxed);
    return Status::ok();
}

int guarded_get(MDB_txn* txn, MDB_dbi dbi, MDB_val* key, MDB_val* value, const LmdbMap& map,
                bool read) {
    return guarded([&] {
        const int rc = mdb_get(txn, dbi, key, value);
        return rc != 0 ? rc : vet(*value, map, read);
    });
}

int guarded_cursor_get(MDB_cursor* c, MDB_val* key, MDB_val* value, MDB_cursor_op op,
                       const LmdbMap& map, bool read) {
    return guarded([&] {
        int rc = mdb_cursor_get(c, key, value, op);
        if (rc == 0) rc = vet(*key, map, read);
        return rc != 0 ? rc : vet(*value, map, read);
    });
}

int guarded_put(MDB_txn* txn, MDB_dbi dbi, MDB_val* key, MDB_val* value, unsigned flags) {
    return guarded([&] { return mdb_put(txn, dbi, key, value, flags); });
}

int guarded_del(MDB_txn* txn, MDB_dbi dbi, MDB_val* key) {
    return guarded([&] { return mdb_del(txn, dbi, key, nullptr); });
}

int guarded_cursor_open(MDB_txn* txn, MDB_dbi dbi, MDB_cursor** out) {
    return guarded([&] {
        // mdb_cursor_open reads the database's record (in a new transaction)
        // after it allocated the cursor: a fault there would lose it.
        // mdb_stat reads it first, with a cursor on its stack.
        MDB_stat st;
        (void)mdb_stat(txn, dbi, &st);
        return mdb_cursor_open(txn, dbi, out);
    });
}

int guarded_txn_begin(MDB_env* env, unsigned flags, MDB_txn** out) {
    return guarded([&] { return mdb_txn_begin(env, nullptr, flags, out); });
}

int guarded_txn_renew(MDB_txn* txn) {
    return guarded([&] { return mdb_txn_renew(txn); });
}

int guarded_txn_commit(MDB_txn* txn) {
    return guarded([&] { return mdb_txn_commit(txn); });
}

int guarded_dbi_open(MDB_txn* txn, const char* name, unsigned flags, MDB_dbi* out) {
    return guarded([&] { return mdb_dbi_open(txn, name, flags, out); });
}

int guarded_stat(MDB_txn* txn, MDB_dbi dbi, MDB_stat* out) {
    return guarded([&] { return mdb_stat(txn, dbi, out); });
}

void lmdb_park(void* object) {
    static std::mutex mu;
    // Never destroyed: a leak checker runs after static destructors, and
    // must find what is parked here still reachable.
    static std::vector<void*>& parked = *std::make_unique<std::vector<void*>>().release();
    std::lock_guard<std::mutex> lock(mu);
    parked.push_back(object);
}

}  // namespace hiodsfs
