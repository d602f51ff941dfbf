#include "meta/txn.h"

#include <pthread.h>

#include <cerrno>
#include <memory>

#include "meta/journal.h"
#include "meta/lmdb_guard.h"
#include "meta/lmdb_support.h"

namespace hiodsfs {
namespace {

// How often (in metadata writes) the open group checks the mapped pages:
// 8192 let random lookups map 150 MiB past meta_resident between checks.
constexpr std::uint64_t kTrimEveryWrites = 1024;

}  // namespace

Txn::Txn(MetaStore* store, std::unique_lock<std::mutex> lock)
    : store_(store), lock_(std::move(lock)), saved_(store->super_) {}

Txn::Txn(MetaStore* store, MDB_txn* txn) : store_(store), txn_(txn), reading_(true), snapshot_(true) {}

Txn::~Txn() {
    if (snapshot_) {
        if (faulted_) mdb_txn_abort(txn_);  // a read transaction, freed whatever LMDB left half done
        else store_->give_back_reader(txn_);
        pthread_rwlock_unlock(&store_->snapshot_lock_);
        return;
    }
    if (reading_) {
        if (txn_ != nullptr && txn_ != store_->group_) mdb_txn_abort(txn_);
        return;
    }
    if (!done_ && direct_) {
        rollback();
        restore_saved();
    }
}

void Txn::restore_saved() {
    store_->super_ = saved_;
    store_->super_.counters.dead_bytes += dead_if_aborted_;
}

void Txn::rollback() {
    done_ = true;
    if (!broken_) {
        for (auto u = undo_.rbegin(); u != undo_.rend(); ++u) {
            MDB_val k = to_val(u->key), v = to_val(u->old);
            const MDB_dbi dbi = store_->dbi_[static_cast<int>(u->db)];
            const int rc = u->existed ? guarded_put(txn_, dbi, &k, &v, 0) : guarded_del(txn_, dbi, &k);
            if (rc != 0 && rc != MDB_NOTFOUND) {
                if (lmdb_damage(rc)) damaged(rc, "metadata undo");
                broken_ = true;
                broken_by_ = "metadata undo: " + lmdb_damage_text(rc);
                break;
            }
        }
    }
    undo_.clear();
    undo_keys_.clear();
    journal_.clear();
    if (broken_)
        store_->lose_group_locked("an operation could not be undone after a metadata error" +
                                  (broken_by_.empty() ? std::string() : " (" + broken_by_ + ")"));
    txn_ = nullptr;
}

Status Txn::change_failed(int rc, const std::string& what) {
    if (damage(rc)) return damaged(rc, what);
    // LMDB marks a transaction unusable after most errors (no memory, a
    // full map); it then refuses even to open a cursor.
    MDB_cursor* probe = nullptr;
    if (guarded_cursor_open(txn_, store_->dbi_[0], &probe) == 0) {
        mdb_cursor_close(probe);
    } else {
        broken_ = true;
        broken_by_ = what + ": " + lmdb_damage_text(rc);
    }
    return lmdb_error(rc, what);
}

Status Txn::damaged(int rc, const std::string& what) {
    if (in_group_) {
        broken_ = true;  // LMDB's transaction is in error, or half way through a call
        if (rc == kLmdbFault) store_->group_faulted_ = true;
    } else {
        faulted_ = true;
    }
    return store_->damaged(rc, what);
}

Status Txn::save_undo(Db db, MDB_val* key, bool* added, Undo** entry) {
    *added = false;
    std::string id(1, static_cast<char>(db));
    id.append(from_val(*key));
    // The first value is the one to put back; an operation that rewrites a
    // block of chunk records 16 times keeps it once.
    auto [at, inserted] = undo_keys_.try_emplace(std::move(id), undo_.size());
    if (!inserted) {
        *entry = &undo_[at->second];
        return Status::ok();
    }
    MDB_val old{};
    const int rc = guarded_get(txn_, store_->dbi_[static_cast<int>(db)], key, &old, store_->map_, !in_group_);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        undo_keys_.erase(at);
        return change_failed(rc, std::string("metadata read (") + db_name(db) + ")");
    }
    undo_.push_back(Undo{db, rc == 0, std::string(from_val(*key)), rc == 0 ? std::string(from_val(old)) : std::string(), {}});
    *added = true;
    *entry = &undo_.back();
    return Status::ok();
}

void Txn::drop_last_undo() {
    std::string id(1, static_cast<char>(undo_.back().db));
    id.append(undo_.back().key);
    undo_keys_.erase(id);
    undo_.pop_back();
}

Status Txn::get(Db db, std::string_view key, std::string_view* value, bool* found) {
    if (txn_ == nullptr) return store_->failed_.is_ok() ? Status::error(EINVAL, "metadata operation ended") : store_->failed_;
    if (snapshot_) {
        if (!overlay_kept(db))
            return Status::error(EINVAL, std::string("metadata ") + db_name(db) + " is read in operations only");
        const std::optional<std::string>* over = store_->overlay_find(db, key);
        if (over != nullptr) {
            *found = over->has_value();
            if (*found) *value = **over;
            return Status::ok();
        }
    }
    MDB_val k = to_val(key), v{};
    int rc = guarded_get(txn_, store_->dbi_[static_cast<int>(db)], &k, &v, store_->map_, !in_group_);
    if (rc == MDB_NOTFOUND) {
        *found = false;
        return Status::ok();
    }
    if (rc != 0) {
        const std::string what = std::string("metadata read (") + db_name(db) + ")";
        if (damage(rc)) return damaged(rc, what);
        return direct_ ? change_failed(rc, what) : lmdb_error(rc, what);
    }
    *found = true;
    *value = from_val(v);
    return Status::ok();
}

Status Txn::put(Db db, std::string_view key, std::string_view value) {
    if (store_->read_only_) return Status::error(EROFS, "store is open read-only");
    if (reading_) return Status::error(EINVAL, "metadata write in a read-only operation");
    if (txn_ == nullptr || done_) return Status::error(EINVAL, "metadata write after the operation ended");
    MDB_val k = to_val(key), v = to_val(value);
    bool added = false;
    Undo* undo = nullptr;
    HIODSFS_TRY(save_undo(db, &k, &added, &undo));
    int rc = guarded_put(txn_, store_->dbi_[static_cast<int>(db)], &k, &v, 0);
    if (rc != 0) {
        if (added) drop_last_undo();  // nothing changed
        return change_failed(rc, std::string("metadata write (") + db_name(db) + ")");
    }
    if (overlay_kept(db)) {
        if (!undo->now) undo->now.emplace();
        undo->now->assign(value);  // a block rewritten 16 times reuses the buffer
    }
    ++writes_;
    ++changes_[static_cast<int>(db)];
    store_->note_write(db, key);
    if (store_->capturing()) journal_put(&journal_, db, key, value);
    return Status::ok();
}

Status Txn::del(Db db, std::string_view key, bool* existed) {
    if (store_->read_only_) return Status::error(EROFS, "store is open read-only");
    if (reading_) return Status::error(EINVAL, "metadata delete in a read-only operation");
    if (txn_ == nullptr || done_) return Status::error(EINVAL, "metadata delete after the operation ended");
    MDB_val k = to_val(key);
    bool added = false;
    Undo* undo = nullptr;
    HIODSFS_TRY(save_undo(db, &k, &added, &undo));
    int rc = guarded_del(txn_, store_->dbi_[static_cast<int>(db)], &k);
    if (existed != nullptr) *existed = rc == 0;
    if (rc != 0) {
        if (added) drop_last_undo();  // nothing changed
        if (rc == MDB_NOTFOUND) return Status::ok();
        return change_failed(rc, std::string("metadata delete (") + db_name(db) + ")");
    }
    undo->now.reset();
    ++writes_;
    ++changes_[static_cast<int>(db)];
    store_->note_write(db, key);
    if (store_->capturing()) journal_del(&journal_, db, key);
    return Status::ok();
}

Cursor Txn::cursor(Db db) {
    MDB_cursor* c = nullptr;
    int rc = txn_ == nullptr ? EINVAL : guarded_cursor_open(txn_, store_->dbi_[static_cast<int>(db)], &c);
    if (snapshot_ && !overlay_kept(db)) {
        if (c != nullptr) mdb_cursor_close(c);
        Cursor refused(nullptr);
        refused.st_ = Status::error(EINVAL, std::string("metadata ") + db_name(db) + " is read in operations only");
        return refused;
    }
    Cursor cur(rc == 0 ? c : nullptr);
    cur.owner_ = this;
    const int i = static_cast<int>(db);
    if (snapshot_ && overlay_ordered(db) && !store_->overlay_[i].empty()) {
        cur.over_ = &store_->overlay_[i];
    } else if (snapshot_ && !store_->hashed_[i].empty()) {
        cur.owned_ = std::make_unique<Overlay>(store_->hashed_[i].begin(), store_->hashed_[i].end());
        cur.over_ = cur.owned_.get();
    }
    if (rc != 0) cur.st_ = damage(rc) ? damaged(rc, "metadata cursor open") : lmdb_error(rc, "metadata cursor open");
    if (rc == MDB_BAD_TXN && direct_) {
        broken_ = true;
        broken_by_ = "metadata cursor open: " + lmdb_damage_text(rc);
    }
    return cur;
}

Status Txn::commit() {
    if (done_) return Status::ok();
    if (reading_ || !direct_) {  // nothing to fold in
        done_ = true;
        return Status::ok();
    }
    if (broken_) {
        rollback();
        restore_saved();
        return store_->failed_;
    }
    publish();
    done_ = true;
    undo_.clear();
    undo_keys_.clear();
    ++store_->pending_ops_;
    store_->group_journal_.append(journal_);
    journal_.clear();
    const std::uint64_t before = store_->pending_writes_;
    store_->pending_writes_ += writes_;
    store_->maybe_group_full();
    // Within a group too: one group's lookups can map more of a large index
    // than the limit (the map is read-only, so unmapping is always safe).
    if (before / kTrimEveryWrites != store_->pending_writes_ / kTrimEveryWrites) store_->trim_resident_locked();
    return Status::ok();
}

namespace {

// What an overlay entry takes from the heap: the map's node, and the key's
// and value's buffers where they do not fit in the string itself.
std::uint64_t overlay_entry_bytes(const std::string& key, const std::optional<std::string>& value) {
    constexpr std::uint64_t kNode = 32 + sizeof(std::string) + sizeof(std::optional<std::string>) + 8;
    auto heap = [](std::size_t n) -> std::uint64_t { return n < 16 ? 0 : (n + 1 + 8 + 15) / 16 * 16; };
    return kNode + heap(key.size()) + (value ? heap(value->size()) : 0);
}

}  // namespace

// Every key the operation changed has an entry in undo_: its first value,
// and the one the group holds now. Moved in at once, so the snapshot lock
// is held exclusively only for the map inserts.
void Txn::publish() {
    if (undo_.empty()) return;
    if (store_->on_publish_) store_->on_publish_();
    std::uint64_t bytes = store_->overlay_bytes_;
    pthread_rwlock_wrlock(&store_->snapshot_lock_);
    auto put = [&bytes](auto& over, std::string&& key, std::optional<std::string>&& value) {
        auto [it, added] = over.try_emplace(std::move(key));
        if (!added) bytes -= overlay_entry_bytes(it->first, it->second);
        it->second = std::move(value);
        bytes += overlay_entry_bytes(it->first, it->second);
    };
    for (Undo& u : undo_) {
        const int db = static_cast<int>(u.db);
        if (!overlay_kept(u.db)) continue;
        if (overlay_ordered(u.db)) put(store_->overlay_[db], std::move(u.key), std::move(u.now));
        else put(store_->hashed_[db], std::move(u.key), std::move(u.now));
    }
    pthread_rwlock_unlock(&store_->snapshot_lock_);
    store_->overlay_bytes_ = bytes;
}

}  // namespace hiodsfs
