// Txn: one metadata operation. A Txn of begin() changes the open group
// directly and keeps an undo log of what each change overwrote, so that an
// operation that fails half-way is put back alone; commit() folds it into
// the group and publishes what it changed to the overlay reads see. A Txn
// of begin_read() only reads (see meta/meta_store.h).
// Thread-safety: used by the thread that began it, which holds one Txn at
// a time; it must not outlive its scope.
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/overlay_cursor.h"
#include "meta/super_record.h"

namespace hiodsfs {

class Txn {
public:
    Txn(Txn&&) = delete;
    Txn(const Txn&) = delete;
    ~Txn();  // aborts unless commit() was called

    // found=false and ok when the key is absent. The view is valid until the
    // next change in this Txn.
    Status get(Db db, std::string_view key, std::string_view* value, bool* found);
    Status put(Db db, std::string_view key, std::string_view value);
    // Ok whether or not the key existed; *existed tells which if given.
    Status del(Db db, std::string_view key, bool* existed = nullptr);
    Cursor cursor(Db db);
    // How many puts and deletes this operation has made in db so far.
    std::uint64_t changes(Db db) const { return changes_[static_cast<int>(db)]; }

    SuperState& super();
    // Segment payload this operation appended for chunks it would create:
    // if it aborts, nothing will ever refer to those bytes, and they are
    // added to the dead-bytes counter of the group instead.
    void dead_if_aborted(std::uint64_t bytes) { dead_if_aborted_ += bytes; }
    // Folds this operation into the open group; it becomes durable with the
    // next commit_group().
    Status commit();

private:
    friend class MetaStore;
    friend class Cursor;
    Txn(MetaStore* store, std::unique_lock<std::mutex> lock);
    // A read of the committed state and the overlay: holds the store's
    // snapshot lock shared and `txn`, a read transaction of the pool.
    Txn(MetaStore* store, MDB_txn* txn);
    // Moves what this operation changed, as the group now holds it, into
    // the overlay; in commit(), under the store's mutex.
    void publish();
    // What a change overwrote, to put back if the operation aborts, and
    // (for the overlay_kept() databases) what the key holds now.
    struct Undo {
        Db db;
        bool existed;
        std::string key, old;
        std::optional<std::string> now;  // none: deleted
    };
    // Saves what key holds unless this operation changed it already;
    // *added says whether it did now. *entry is the key's entry.
    Status save_undo(Db db, MDB_val* key, bool* added, Undo** entry);
    void drop_last_undo();  // the entry save_undo just added: its change failed
    // An LMDB error of a change: the group may be unusable now (see rollback()).
    Status change_failed(int rc, const std::string& what);
    // Whether rc says a page is damaged: lmdb_damage(rc), or a read
    // transaction in error (LMDB marks one so when a page it read for a
    // cursor's set-up did not parse, and says so only at the next call).
    bool damage(int rc) const { return lmdb_damage(rc) || (rc == MDB_BAD_TXN && !in_group_); }
    // A damaged page met: the store stops (MetaStore::damaged).
    Status damaged(int rc, const std::string& what);
    // Puts back what the operation changed, newest first. If LMDB cannot
    // (the group is in error), the group is lost and the store stops.
    void rollback();
    MetaStore* store_;
    std::unique_lock<std::mutex> lock_;
    MDB_txn* txn_ = nullptr;
    bool reading_ = false;  // begun by begin_read(): txn_ is the group's, or its own read-only one
    bool snapshot_ = false;  // reading_ through the overlay: txn_ is of the store's pool
    bool direct_ = false;  // a change of the group itself, undone by undo_ if it aborts
    bool broken_ = false;  // an LMDB error left the group unusable: commit() refuses
    std::string broken_by_;  // that error, for the reason the store stops
    bool in_group_ = false;  // txn_ is the group's write transaction
    bool faulted_ = false;  // a read transaction that met damage: not used again
    std::vector<Undo> undo_;
    std::unordered_map<std::string, std::size_t> undo_keys_;  // db byte + key -> its entry in undo_
    std::uint64_t writes_ = 0;  // puts and deletes, added to the group's at commit
    std::uint64_t changes_[static_cast<int>(Db::kCount)] = {};  // the same, per database
    std::string journal_;  // this operation's changes, with a journal (meta/journal.h)
    SuperState saved_;  // restored if the operation aborts
    std::uint64_t dead_if_aborted_ = 0;
    void restore_saved();  // saved_, plus dead_if_aborted_
    bool done_ = false;
};

inline SuperState& Txn::super() { return store_->super_; }

}  // namespace hiodsfs
