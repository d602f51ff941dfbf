#include "meta/lmdb_support.h"

#include <cerrno>

#include "meta/lmdb_guard.h"
#include "meta/meta_store.h"

namespace hiodsfs {
namespace {

const char* const kDbNames[] = {"super",  "inodes", "dirents",  "extents", "chunks", "fingerprints",
                                "dirty",  "xattrs", "orphans",  "segments", "history"};
static_assert(sizeof(kDbNames) / sizeof(kDbNames[0]) == static_cast<int>(Db::kCount));

}  // namespace

Status lmdb_error(int rc, const std::string& what) {
    if (rc == MDB_MAP_FULL) return Status::error(ENOSPC, what + ": metadata map is full");
    if (rc > 0) return Status::from_errno(rc, what);  // LMDB passes errno values through
    // Pages that do not parse: damage, not a failing device.
    if (lmdb_damage(rc)) return Status::error(EUCLEAN, what + ": " + lmdb_damage_text(rc));
    return Status::error(EIO, what + ": " + mdb_strerror(rc));
}

const char* db_name(Db db) { return kDbNames[static_cast<int>(db)]; }

}  // namespace hiodsfs
