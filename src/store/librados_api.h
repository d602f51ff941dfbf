// LibradosApi: the librados functions RadosPool calls, found with dlopen
// when a rados:POOL/STORE store is first opened, not linked. So a local
// store never loads the Ceph client libraries (their start-up and exit cost
// every process) and the package needs librados2 only for RADOS stores.
// The pointers' types come from <rados/librados.h>, so the compiler checks
// each call as it would a direct one.
// Built only with librados's header (HIODSFS_HAVE_RADOS).
// Thread-safety: load_librados may be called from several threads at once;
// the table it gives is immutable and lives as long as the process.
#pragma once

#include <rados/librados.h>

#include "hiodsfs/status.h"

namespace hiodsfs {

struct LibradosApi {
    decltype(&rados_create2) create2;
    decltype(&rados_conf_read_file) conf_read_file;
    decltype(&rados_conf_set) conf_set;
    decltype(&rados_connect) connect;
    decltype(&rados_shutdown) shutdown;
    decltype(&rados_ioctx_create) ioctx_create;
    decltype(&rados_ioctx_destroy) ioctx_destroy;
    decltype(&rados_read) read;
    decltype(&rados_stat) stat;
    decltype(&rados_nobjects_list_open) nobjects_list_open;
    decltype(&rados_nobjects_list_next2) nobjects_list_next2;
    decltype(&rados_nobjects_list_close) nobjects_list_close;
    decltype(&rados_lock_exclusive) lock_exclusive;
    decltype(&rados_unlock) unlock;
    decltype(&rados_break_lock) break_lock;
    decltype(&rados_list_lockers) list_lockers;
    // Compound writes: a guard and a change the OSD applies together or not at all.
    decltype(&rados_create_write_op) create_write_op;
    decltype(&rados_release_write_op) release_write_op;
    decltype(&rados_write_op_write) write_op_write;
    decltype(&rados_write_op_write_full) write_op_write_full;
    decltype(&rados_write_op_append) write_op_append;
    decltype(&rados_write_op_remove) write_op_remove;
    decltype(&rados_write_op_exec) write_op_exec;
    decltype(&rados_write_op_operate) write_op_operate;
    // Fencing another client: the mons' blocklist, and the map that has it.
    decltype(&rados_mon_command) mon_command;
    decltype(&rados_buffer_free) buffer_free;
    decltype(&rados_wait_for_latest_osdmap) wait_for_latest_osdmap;
};

// The table of librados.so.2, loaded on the first call; later calls give
// the same table, or the same error (ENOPKG, one line that names the
// librados2 package, or the missing symbol).
Status load_librados(const LibradosApi** out);

// The same from the library named, on every call, into *out: what
// load_librados does once, for the tests of its errors.
Status load_librados_from(const char* library, LibradosApi* out);

}  // namespace hiodsfs
