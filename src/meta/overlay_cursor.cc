#include "meta/overlay_cursor.h"

#include "meta/lmdb_guard.h"
#include "meta/lmdb_support.h"
#include "meta/meta_store.h"

namespace hiodsfs {

Cursor::~Cursor() {
    if (c_ == nullptr) return;
    // A cursor of a write transaction that faulted stays with it (lmdb_guard.h).
    if (owner_ != nullptr && owner_->in_group_ && owner_->store_->group_faulted_) lmdb_park(c_);
    else mdb_cursor_close(c_);
}

int Cursor::get(MDB_val* key, MDB_val* value, MDB_cursor_op op) {
    return guarded_cursor_get(c_, key, value, op, owner_->store_->map_, !owner_->in_group_);
}

void Cursor::failed(int rc) {
    st_ = owner_->damage(rc) ? owner_->damaged(rc, "metadata cursor") : lmdb_error(rc, "metadata cursor");
}

bool Cursor::move(MDB_cursor_op op, std::string_view* key) {
    if (c_ == nullptr) return false;
    MDB_val k{};
    if (key != nullptr) k = to_val(*key);
    int rc = get(key != nullptr ? &k : &k_, &v_, op);
    if (rc == MDB_NOTFOUND) return false;
    if (rc != 0) {
        failed(rc);
        return false;
    }
    if (key != nullptr) k_ = k;
    return true;
}

bool Cursor::seek(std::string_view key) {
    return over_ != nullptr ? merged_forward(std::string(key), false) : move(MDB_SET_RANGE, &key);
}
bool Cursor::first() { return over_ != nullptr ? merged_forward(std::nullopt, false) : move(MDB_FIRST); }
bool Cursor::last() { return over_ != nullptr ? merged_backward(std::nullopt, false) : move(MDB_LAST); }
bool Cursor::next() { return over_ != nullptr ? merged_forward(at_, true) : move(MDB_NEXT); }
bool Cursor::prev() { return over_ != nullptr ? merged_backward(at_, true) : move(MDB_PREV); }

// Each step places both sides afresh from the key it starts at (LMDB finds
// a key on the page it stands on without a descent), and the overlay wins
// a tie: it is newer. Views stay valid: the LMDB side is a read
// transaction's, and the overlay does not change while a read runs.
bool Cursor::merged_forward(std::optional<std::string> key, bool strict) {
    if (c_ == nullptr) return false;
    for (;;) {
        MDB_val lk{}, lv{};
        int rc = 0;
        if (!key) {
            rc = get(&lk, &lv, MDB_FIRST);
        } else {
            lk = to_val(*key);
            rc = get(&lk, &lv, MDB_SET_RANGE);
            if (rc == 0 && strict && from_val(lk) == *key) rc = get(&lk, &lv, MDB_NEXT);
        }
        auto o = !key ? over_->begin() : strict ? over_->upper_bound(*key) : over_->lower_bound(*key);
        const Pick p = pick(rc, lk, lv, o != over_->end() ? &*o : nullptr, true);
        if (p != Pick::kDeleted) return p == Pick::kFound;
        key = o->first;
        strict = true;
    }
}

bool Cursor::merged_backward(std::optional<std::string> key, bool strict) {
    if (c_ == nullptr) return false;
    for (;;) {
        MDB_val lk{}, lv{};
        int rc = 0;
        if (!key) {
            rc = get(&lk, &lv, MDB_LAST);
        } else {
            lk = to_val(*key);
            rc = get(&lk, &lv, MDB_SET_RANGE);  // the first at or after key
            if (rc == 0 && (strict || from_val(lk) != *key)) rc = get(&lk, &lv, MDB_PREV);
            else if (rc == MDB_NOTFOUND) rc = get(&lk, &lv, MDB_LAST);  // all are before it
        }
        auto o = !key ? over_->end() : strict ? over_->lower_bound(*key) : over_->upper_bound(*key);
        const bool in_over = o != over_->begin();
        if (in_over) --o;
        const Pick p = pick(rc, lk, lv, in_over ? &*o : nullptr, false);
        if (p != Pick::kDeleted) return p == Pick::kFound;
        key = o->first;
        strict = true;
    }
}

// The nearer of the LMDB side's entry (rc == 0) and the overlay's in the
// walk's direction, the overlay's on a tie.
Cursor::Pick Cursor::pick(int rc, const MDB_val& lk, const MDB_val& lv, const Overlay::value_type* o,
                          bool forward) {
    if (rc != 0 && rc != MDB_NOTFOUND) {
        failed(rc);
        return Pick::kNone;
    }
    const bool in_lmdb = rc == 0;
    if (!in_lmdb && o == nullptr) return Pick::kNone;
    const bool take_over = o != nullptr && (!in_lmdb || (forward ? std::string_view(o->first) <= from_val(lk)
                                                                   : std::string_view(o->first) >= from_val(lk)));
    if (take_over) {
        if (!o->second) return Pick::kDeleted;  // deleted by the group: the walk goes on past it
        k_ = to_val(o->first);
        v_ = to_val(*o->second);
    } else {
        k_ = lk;
        v_ = lv;
    }
    at_.assign(from_val(k_));
    return Pick::kFound;
}

std::string_view Cursor::key() const { return from_val(k_); }
std::string_view Cursor::value() const { return from_val(v_); }

}  // namespace hiodsfs
