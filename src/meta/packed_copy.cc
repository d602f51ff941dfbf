#include "meta/packed_copy.h"

#include "meta/lmdb_support.h"
#include "meta/meta_store.h"

namespace hiodsfs {

// Copies every record of env's databases, in key order, into a new
// environment in the file `path`, appending: LMDB then fills each page before
// it starts the next, where the random inserts of a running store leave
// pages part full. Commits every kBatch records so memory stays bounded.
// *damage: the LMDB code of a damaged page met in env (else 0).
Status copy_packed(MDB_env* env, const MDB_dbi* dbi, const LmdbMap& map, std::uint64_t map_bytes,
                   const std::string& path, int* damage) {
    *damage = 0;
    constexpr std::uint64_t kBatch = 65536;
    MDB_env* out = nullptr;
    int rc = mdb_env_create(&out);
    if (rc != 0) return lmdb_error(rc, "metadata copy environment");
    struct Closer {
        MDB_env* e;
        ~Closer() { mdb_env_close(e); }
    } closer{out};
    rc = mdb_env_set_maxdbs(out, static_cast<MDB_dbi>(Db::kCount));
    if (rc == 0) rc = mdb_env_set_mapsize(out, map_bytes);
    if (rc == 0) rc = mdb_env_open(out, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC, 0600);
    if (rc != 0) return lmdb_error(rc, "metadata copy " + path);
    MDB_txn* rd = nullptr;
    rc = guarded_txn_begin(env, MDB_RDONLY, &rd);
    if (rc != 0) return lmdb_error(rc, "metadata read for the copy");
    struct Aborter {
        MDB_txn*& t;
        ~Aborter() {
            if (t != nullptr) mdb_txn_abort(t);
        }
    } rd_abort{rd};
    MDB_txn* wr = nullptr;
    Aborter wr_abort{wr};
    rc = mdb_txn_begin(out, nullptr, 0, &wr);
    std::uint64_t in_batch = 0;
    for (int i = 0; rc == 0 && i < static_cast<int>(Db::kCount); ++i) {
        MDB_dbi to = 0;
        rc = mdb_dbi_open(wr, db_name(static_cast<Db>(i)), MDB_CREATE, &to);
        MDB_cursor* c = nullptr;
        if (rc == 0) rc = guarded_cursor_open(rd, dbi[i], &c);
        if (lmdb_damage(rc)) *damage = rc;
        MDB_val k{}, v{};
        int got = rc == 0 ? guarded_cursor_get(c, &k, &v, MDB_FIRST, map, true) : MDB_NOTFOUND;
        for (; rc == 0 && got == 0; got = guarded_cursor_get(c, &k, &v, MDB_NEXT, map, true)) {
            rc = mdb_put(wr, to, &k, &v, MDB_APPEND);
            if (rc == 0 && ++in_batch == kBatch) {
                in_batch = 0;
                rc = mdb_txn_commit(wr);
                wr = nullptr;
                if (rc == 0) rc = mdb_txn_begin(out, nullptr, 0, &wr);
            }
        }
        if (c != nullptr) mdb_cursor_close(c);
        if (rc == 0 && got != MDB_NOTFOUND) rc = got;
        if (lmdb_damage(got) || got == MDB_BAD_TXN) *damage = got;  // a read transaction in error: a bad page
    }
    if (rc == 0) {
        rc = mdb_txn_commit(wr);
        wr = nullptr;
    }
    if (rc == 0) rc = mdb_env_sync(out, 1);
    return rc == 0 ? Status::ok() : lmdb_error(rc, "metadata copy " + path);
}

}  // namespace hiodsfs
