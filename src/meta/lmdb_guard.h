// LMDB calls that survive a page gone bad under a running store.
//
// LMDB reads its pages through a map of data.mdb and trusts what it finds.
// The open checks the file first (meta/lmdb_file_check.h), but a page can go
// bad later, or lie beyond what the open read: LMDB then faults (SIGSEGV,
// SIGBUS past the file's end) or fails one of its assertions, which aborts.
// A guarded call turns those into an error code, kLmdbFault: the thread
// marks a jump point (sigsetjmp) before it enters LMDB, and the process's
// SIGSEGV and SIGBUS handler, and LMDB's assertion callback, jump back to
// it (siglongjmp) when they fire in a thread inside a guarded call.
// Anywhere else they do what they did before: the handler hands the signal
// to the handler installed before it (ASan's or TSan's in a sanitizer
// build), or lets the default action kill the process; the assertion
// aborts.
//
// What a guarded call may hold: LMDB calls and plain values only. The jump
// skips every frame between the fault and the jump point, so nothing in
// them may own a resource or a lock; the wrappers below are the only guarded
// code. What LMDB was doing is left half done: a read transaction can
// still be aborted, a write transaction cannot (LMDB may have left a cursor
// on its own stack in the transaction's list, which mdb_txn_abort would
// free), so the owner of a write transaction that faulted keeps it, and its
// environment, until the process ends (lmdb_park).
//
// The reads vet what LMDB hands back before the caller copies it: a key or
// value of a read transaction must lie inside the pages of the map the
// committed state uses (LmdbMap), and every page of it is touched inside
// the guard, so that a size or address from a damaged page is refused
// (kLmdbBadValue) instead of faulting in the caller. (A write transaction's
// values may lie in its own copies of pages, outside the map: those are
// only touched.)
//
// Thread-safety: any thread; the jump point is per thread. Each
// lmdb_guard_install() (each open of a store) puts the handler back on top
// if another was installed since, and passes to that one from then on.
#pragma once

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs {

// What a guarded call returns when LMDB faulted or failed an assertion, and
// when it handed back a key or value outside the map; below LMDB's own
// codes (MDB_KEYEXIST, -30799, and up).
constexpr int kLmdbFault = -30900;
constexpr int kLmdbBadValue = -30901;
// Whether rc says a page is damaged (LMDB's own MDB_CORRUPTED and
// MDB_PAGE_NOTFOUND, its internal errors MDB_PAGE_FULL and MDB_CURSOR_FULL,
// or the two above).
bool lmdb_damage(int rc);
// What the last fault of this thread was ("SIGBUS at 0x7f...", or LMDB's
// assertion text), or the text of an LMDB code.
std::string lmdb_damage_text(int rc);

// Installs the handler (see above) and env's assertion callback.
Status lmdb_guard_install(MDB_env* env);

// Where LMDB mapped data.mdb, and how much of it the committed state uses.
struct LmdbMap {
    const char* base = nullptr;  // null: not known, values are only touched
    std::size_t length = 0;      // of the mapping
    std::atomic<std::uint64_t> used{0};
    // Before mdb_env_open: the mappings of the file at `path` this process
    // has already (another environment of it, one kept by lmdb_park).
    void note_existing(const std::string& path);
    // After it: the mapping of env's file that note_existing did not see;
    // false if there is none (the map stays unknown).
    bool locate(MDB_env* env);
    // Sets `used` from env's last page in use.
    Status refresh(MDB_env* env);

private:
    std::vector<std::uintptr_t> existing_;
};

// The guarded wrappers; `read` says the transaction is a read transaction
// (its keys and values lie in the map).
int guarded_get(MDB_txn* txn, MDB_dbi dbi, MDB_val* key, MDB_val* value, const LmdbMap& map,
                bool read);
int guarded_cursor_get(MDB_cursor* c, MDB_val* key, MDB_val* value, MDB_cursor_op op,
                       const LmdbMap& map, bool read);
int guarded_put(MDB_txn* txn, MDB_dbi dbi, MDB_val* key, MDB_val* value, unsigned flags);
int guarded_del(MDB_txn* txn, MDB_dbi dbi, MDB_val* key);
int guarded_cursor_open(MDB_txn* txn, MDB_dbi dbi, MDB_cursor** out);
int guarded_txn_begin(MDB_env* env, unsigned flags, MDB_txn** out);
int guarded_txn_renew(MDB_txn* txn);
int guarded_txn_commit(MDB_txn* txn);
int guarded_dbi_open(MDB_txn* txn, const char* name, unsigned flags, MDB_dbi* out);
int guarded_stat(MDB_txn* txn, MDB_dbi dbi, MDB_stat* out);

// Keeps an LMDB object that cannot be freed safely (an environment whose
// write transaction faulted, a cursor of that transaction) reachable until
// the process ends, as a leak checker expects of memory kept on purpose.
void lmdb_park(void* object);

}  // namespace hiodsfs
