// The helpers MetaStore's parts share over LMDB: its codes as a Status, views
// as MDB_vals, the databases' names.
#include "meta/lmdb_support.h"

#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

#include "meta/lmdb_guard.h"
#include "meta/meta_store.h"

using namespace hiodsfs;

TEST_CASE("an LMDB code becomes the errno a caller can act on, with what failed", "[meta][lmdb-support]") {
    Status full = lmdb_error(MDB_MAP_FULL, "metadata write (chunks)");
    CHECK(full.err() == ENOSPC);
    CHECK(full.message().find("metadata write (chunks)") != std::string::npos);
    CHECK(full.message().find("map is full") != std::string::npos);
    CHECK(lmdb_error(ENOMEM, "metadata transaction").err() == ENOMEM);  // errno passes through
    CHECK(lmdb_error(MDB_CORRUPTED, "metadata read").err() == EUCLEAN);  // a page that does not parse
    CHECK(lmdb_error(kLmdbFault, "metadata read").err() == EUCLEAN);
    Status other = lmdb_error(MDB_TXN_FULL, "metadata write");
    CHECK(other.err() == EIO);
    CHECK(other.message().find(mdb_strerror(MDB_TXN_FULL)) != std::string::npos);
}

TEST_CASE("a view and its MDB_val are the same bytes", "[meta][lmdb-support]") {
    const std::string s("key\0with a nul", 14);
    const MDB_val v = to_val(s);
    CHECK(v.mv_size == 14);
    CHECK(v.mv_data == s.data());
    CHECK(from_val(v) == s);
    CHECK(from_val(to_val(std::string_view())).empty());
}

TEST_CASE("every database has the name the environment holds it under", "[meta][lmdb-support]") {
    CHECK(std::string(db_name(Db::kSuper)) == "super");
    CHECK(std::string(db_name(Db::kFingerprints)) == "fingerprints");
    CHECK(std::string(db_name(Db::kHistory)) == "history");
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
        for (int j = 0; j < i; ++j) CHECK(std::string(db_name(Db(i))) != db_name(Db(j)));
    }
}
