// A packed copy of the metadata environment, which MetaStore::compact()
// puts in place of data.mdb and MetaStore::snapshot() hands to the
// journal's tier: every record of every database (Db), in key order,
// appended into a new environment in one file, so LMDB fills each page
// before it starts the next.
// Thread-safety: reads env in a read transaction of its own; the caller
// keeps commits out while it runs (the store's lock).
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <string>

#include "hiodsfs/status.h"
#include "meta/lmdb_guard.h"

namespace hiodsfs {

// Copies env's databases (dbi: one handle per Db) into the file `path`, an
// environment of map_bytes; map: where env's data.mdb is mapped, for the
// guarded reads. *damage: the LMDB code of a damaged page met in env (else 0).
Status copy_packed(MDB_env* env, const MDB_dbi* dbi, const LmdbMap& map, std::uint64_t map_bytes,
                   const std::string& path, int* damage);

}  // namespace hiodsfs
