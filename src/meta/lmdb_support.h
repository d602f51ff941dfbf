// Small helpers every part of MetaStore that calls LMDB shares: an LMDB
// return code as a Status, string views as MDB_vals and back, and the
// names of the databases (Db) in the environment.
// Thread-safety: plain functions over values.
#pragma once

#include <lmdb.h>

#include <string>
#include <string_view>

#include "hiodsfs/status.h"

namespace hiodsfs {

enum class Db : int;

// ENOSPC for a full map, errno values as they are, EUCLEAN for a damaged
// page (lmdb_damage), EIO for anything else; each with `what` and LMDB's word.
Status lmdb_error(int rc, const std::string& what);

// The name of db's LMDB database ("super", "inodes", ...).
const char* db_name(Db db);

inline MDB_val to_val(std::string_view s) {
    MDB_val v;
    v.mv_size = s.size();
    v.mv_data = const_cast<char*>(s.data());
    return v;
}

inline std::string_view from_val(const MDB_val& v) {
    return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

}  // namespace hiodsfs
