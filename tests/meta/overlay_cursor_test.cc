// Cursor: walks of one database in key order, by LMDB alone inside an
// operation, and merged with the open group's overlay in a read that does
// not wait (meta/overlay_cursor.h).
#include "meta/overlay_cursor.h"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

KeyValues cursor_walk(Cursor& c, bool forward) {
    KeyValues out;
    for (bool ok = forward ? c.first() : c.last(); ok; ok = forward ? c.next() : c.prev())
        out.emplace_back(std::string(c.key()), std::string(c.value()));
    REQUIRE(c.status().is_ok());
    return out;
}

}  // namespace

TEST_CASE("cursors walk a key range in order", "[meta][cursor]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    for (std::uint64_t off : {4096u, 0u, 8192u}) REQUIRE(t->put(Db::kExtents, key_u64_u64(3, off), "x").is_ok());
    REQUIRE(t->put(Db::kExtents, key_u64_u64(4, 0), "y").is_ok());
    Cursor c = t->cursor(Db::kExtents);
    std::vector<std::uint64_t> offs;
    std::uint64_t ino = 0, off = 0;
    for (bool ok = c.seek(key_u64_u64(3, 1)); ok && parse_key_u64_u64(c.key(), &ino, &off) && ino == 3;
         ok = c.next())
        offs.push_back(off);
    CHECK(offs == std::vector<std::uint64_t>{4096, 8192});
    REQUIRE(c.last());
    REQUIRE(parse_key_u64_u64(c.key(), &ino, &off));
    CHECK(ino == 4);
}

TEST_CASE("a read's cursor merges the open group over the committed state: the group's value wins, its deletes are skipped",
          "[meta][cursor]") {
    TempDir dir;
    auto m = open_meta(dir.meta());
    // An ordered overlay, and a hashed one whose cursor walks a sorted copy.
    const Db db = GENERATE(Db::kDirents, Db::kInodes);
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    for (const char* k : {"a", "c", "e", "g"}) REQUIRE(t->put(db, k, std::string("old ") + k).is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->commit_group(nullptr).is_ok());
    // Folded into the open group, not committed: the overlay. The first and
    // last committed keys are deleted, one is rewritten, two are new.
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->del(db, "a").is_ok());
    REQUIRE(t->put(db, "c", "new c").is_ok());
    REQUIRE(t->put(db, "d", "new d").is_ok());
    REQUIRE(t->del(db, "g").is_ok());
    REQUIRE(t->put(db, "h", "new h").is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();

    REQUIRE(m->begin_read(&t).is_ok());
    const KeyValues merged{{"c", "new c"}, {"d", "new d"}, {"e", "old e"}, {"h", "new h"}};
    Cursor forward = t->cursor(db);
    CHECK(cursor_walk(forward, true) == merged);
    Cursor backward = t->cursor(db);
    CHECK(cursor_walk(backward, false) == KeyValues(merged.rbegin(), merged.rend()));

    Cursor c = t->cursor(db);
    REQUIRE(c.seek("a"));  // deleted: the next key the group left
    CHECK(c.key() == "c");
    CHECK(c.value() == "new c");
    REQUIRE(c.seek("f"));
    CHECK(c.key() == "h");  // past the deleted g
    CHECK_FALSE(c.next());
    REQUIRE(c.seek("e"));
    REQUIRE(c.prev());
    CHECK(c.key() == "d");
    REQUIRE(c.prev());
    CHECK(c.key() == "c");
    CHECK_FALSE(c.prev());  // a is deleted
    CHECK_FALSE(c.seek("i"));
    CHECK(c.status().is_ok());
}
