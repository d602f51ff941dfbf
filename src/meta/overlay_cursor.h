// Cursor: a read/write cursor over one database of a metadata operation
// (Txn), and the overlay a read that does not wait walks together with
// LMDB (see meta/meta_store.h): the open group's committed operations over
// one database, merged key by key with the last committed state.
// Thread-safety: a Cursor belongs to the thread of its Txn; the overlay it
// walks does not change while the read runs (the store's snapshot lock).
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hiodsfs/status.h"

namespace hiodsfs {

class Txn;

// The open group's committed operations over one database, as reads see
// them: key -> value, or nullopt for a key they deleted. Ordered for the
// databases reads walk with cursors; hashed for the others (chunk records
// and inodes: most of a group's keys, random ones, which reads only look
// up), whose cursors (at open, fsck) walk a sorted copy.
using Overlay = std::map<std::string, std::optional<std::string>, std::less<>>;
struct OverlayHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using HashedOverlay = std::unordered_map<std::string, std::optional<std::string>, OverlayHash, std::equal_to<>>;

// A read/write cursor over one database of a Txn; destroy it before the Txn
// ends (LMDB closes a write transaction's cursors when it commits). A read
// of begin_read() with an overlay for its database walks both together.
class Cursor {
public:
    Cursor(Cursor&& other) noexcept
        : c_(other.c_), owner_(other.owner_), k_(other.k_), v_(other.v_), st_(std::move(other.st_)),
          over_(other.over_), owned_(std::move(other.owned_)), at_(std::move(other.at_)) {
        other.c_ = nullptr;
    }
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;
    ~Cursor();

    // Positions at the first key >= key. False if there is none.
    bool seek(std::string_view key);
    bool first();
    bool last();
    bool next();
    bool prev();
    std::string_view key() const;
    std::string_view value() const;
    const Status& status() const { return st_; }

private:
    friend class Txn;
    explicit Cursor(MDB_cursor* c, const Overlay* over = nullptr) : c_(c), over_(over) {}
    bool move(MDB_cursor_op op, std::string_view* key = nullptr);
    int get(MDB_val* key, MDB_val* value, MDB_cursor_op op);  // guarded (meta/lmdb_guard.h)
    void failed(int rc);  // sets st_; a damaged page stops the store
    // With an overlay: the first entry at or after `key` (after it if
    // strict; from the start with no key), or the last at or before it
    // (from the end with no key), skipping the keys the overlay deleted.
    bool merged_forward(std::optional<std::string> key, bool strict);
    bool merged_backward(std::optional<std::string> key, bool strict);
    enum class Pick { kNone, kFound, kDeleted };
    Pick pick(int rc, const MDB_val& lk, const MDB_val& lv, const Overlay::value_type* o, bool forward);
    MDB_cursor* c_;
    Txn* owner_ = nullptr;  // the Txn it reads (c_ is null without one)
    MDB_val k_{}, v_{};
    Status st_;
    const Overlay* over_ = nullptr;  // null: LMDB alone
    std::unique_ptr<Overlay> owned_;  // a hashed overlay's sorted copy (over_)
    std::string at_;  // the merged position's key
};

}  // namespace hiodsfs
