#include "store/librados_api.h"

#include <dlfcn.h>

#include <cerrno>
#include <string>

namespace hiodsfs {

namespace {

constexpr const char* kLibrados = "librados.so.2";

std::string dl_error() {
    const char* e = dlerror();
    return e != nullptr ? e : "no reason given";
}

Status unusable(const char* library, const std::string& why) {
    return Status::error(ENOPKG, std::string("rados: cannot load ") + library + " (" + why +
                                     "); a rados:POOL/STORE store needs the librados2 package");
}

// Sets *fn to the symbol name of the library, or says which is missing.
template <typename Fn>
Status find(void* lib, const char* library, const char* name, Fn* fn) {
    dlerror();
    void* sym = dlsym(lib, name);
    if (sym == nullptr) return unusable(library, std::string("it has no ") + name);
    *fn = reinterpret_cast<Fn>(sym);
    return Status::ok();
}

}  // namespace

Status load_librados_from(const char* library, LibradosApi* out) {
    // RTLD_LOCAL: only this table sees Ceph's symbols. Never dlclose'd:
    // Ceph's libraries leave threads and atexit handlers behind.
    void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return unusable(library, dl_error());
    LibradosApi api{};
#define HIODSFS_FIND(field) HIODSFS_TRY(find(lib, library, "rados_" #field, &api.field))
    HIODSFS_FIND(create2);
    HIODSFS_FIND(conf_read_file);
    HIODSFS_FIND(conf_set);
    HIODSFS_FIND(connect);
    HIODSFS_FIND(shutdown);
    HIODSFS_FIND(ioctx_create);
    HIODSFS_FIND(ioctx_destroy);
    HIODSFS_FIND(read);
    HIODSFS_FIND(stat);
    HIODSFS_FIND(nobjects_list_open);
    HIODSFS_FIND(nobjects_list_next2);
    HIODSFS_FIND(nobjects_list_close);
    HIODSFS_FIND(lock_exclusive);
    HIODSFS_FIND(unlock);
    HIODSFS_FIND(break_lock);
    HIODSFS_FIND(list_lockers);
    HIODSFS_FIND(create_write_op);
    HIODSFS_FIND(release_write_op);
    HIODSFS_FIND(write_op_write);
    HIODSFS_FIND(write_op_write_full);
    HIODSFS_FIND(write_op_append);
    HIODSFS_FIND(write_op_remove);
    HIODSFS_FIND(write_op_exec);
    HIODSFS_FIND(write_op_operate);
    HIODSFS_FIND(mon_command);
    HIODSFS_FIND(buffer_free);
    HIODSFS_FIND(wait_for_latest_osdmap);
#undef HIODSFS_FIND
    *out = api;
    return Status::ok();
}

Status load_librados(const LibradosApi** out) {
    struct Loaded {
        LibradosApi api{};
        Status status;
    };
    // A function-local static: loaded once, thread-safely, on first use.
    static const Loaded loaded = [] {
        Loaded l;
        l.status = load_librados_from(kLibrados, &l.api);
        return l;
    }();
    if (!loaded.status) return loaded.status;
    *out = &loaded.api;
    return Status::ok();
}

}  // namespace hiodsfs
