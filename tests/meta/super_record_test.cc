// The super record: its codec (field order, older layouts, refused sizes)
// and the bytes a store commits under kSuperKey.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <lmdb.h>

#include <string>
#include <vector>

#include "meta/meta_store.h"
#include "meta/records.h"
#include "meta/super_record.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;
using test::open_meta;

// The super record's bytes, read or replaced with LMDB itself (the store closed).
std::string super_record(const std::string& dir, const std::string* replace = nullptr) {
    MDB_env* env = nullptr;
    REQUIRE(mdb_env_create(&env) == 0);
    mdb_env_set_maxdbs(env, 16);
    REQUIRE(mdb_env_open(env, dir.c_str(), MDB_NOLOCK, 0600) == 0);
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
    MDB_dbi dbi = 0;
    REQUIRE(mdb_dbi_open(txn, "super", 0, &dbi) == 0);
    MDB_val k{5, const_cast<char*>("state")}, v{};
    if (replace != nullptr) {
        v = MDB_val{replace->size(), const_cast<char*>(replace->data())};
        REQUIRE(mdb_put(txn, dbi, &k, &v, 0) == 0);
    }
    REQUIRE(mdb_get(txn, dbi, &k, &v) == 0);
    std::string out(static_cast<const char*>(v.mv_data), v.mv_size);
    REQUIRE(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
    return out;
}

std::string super_record_le64s(const std::vector<std::uint64_t>& fields) {
    std::string out;
    for (std::uint64_t f : fields)
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(f >> (8 * i)));
    return out;
}

}  // namespace

TEST_CASE("the super record is little-endian fields in a fixed order, and older layouts still open", "[meta][super-record]") {
    TempDir dir;
    {
        auto m = open_meta(dir.meta());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        InodeRecord file;
        file.mode = S_IFREG | 0644;
        REQUIRE(t->put(Db::kInodes, key_u64(7), encode(file)).is_ok());
        SpaceCounters& c = t->super().counters;
        c.logical_bytes = 1;
        c.stored_bytes = 2;
        c.chunk_count = 3;
        c.dead_bytes = 4;
        c.inode_count = 5;
        c.dedup_hits = 6;
        c.cloned_bytes = 7;
        c.backlog_records = 8;
        c.backlog_bytes = 9;
        c.raw_bytes = 10;
        c.disk_bytes = 11;
        c.file_count = 12;
        c.content_bytes = 19;
        t->super().next_ino = 13;
        t->super().next_chunk = 14;
        t->super().next_dirty = 15;
        REQUIRE(t->commit().is_ok());
        t.reset();
        REQUIRE(m->commit_group([](SuperState* s) {
                     s->frontier_segment = 16;
                     s->frontier_offset = 1ull << 40;
                     return Status::ok();
                 }).is_ok());
    }
    // What the store holds does not depend on the struct's layout.
    // Format 5: the journal seq (0: none) and content_bytes follow.
    CHECK(super_record(dir.meta()) ==
          super_record_le64s({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1ull << 40, 0, 19}));

    SECTION("format 4: no chunk was compressed, so the content is what is stored") {
        const std::string old = super_record_le64s({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
        super_record(dir.meta(), &old);
        auto m = open_meta(dir.meta());
        const SuperState s = m->super_snapshot();
        CHECK(s.counters.content_bytes == 2);
        CHECK(s.frontier_offset == 17);
        CHECK(s.journal_seq == 0);
    }
    SECTION("before the frontier was recorded") {
        const std::string old = super_record_le64s({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
        super_record(dir.meta(), &old);
        auto m = open_meta(dir.meta());
        const SuperState s = m->super_snapshot();
        CHECK(s.counters.file_count == 12);
        CHECK(s.next_dirty == 15);
        CHECK(s.frontier_segment == 0);  // unknown
    }
    SECTION("before file_count: the files are counted") {
        const std::string old = super_record_le64s({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15});
        super_record(dir.meta(), &old);
        auto m = open_meta(dir.meta());
        const SuperState s = m->super_snapshot();
        CHECK(s.counters.raw_bytes == 10);
        CHECK(s.counters.disk_bytes == 11);
        CHECK(s.counters.file_count == 1);  // inode 7
        CHECK(s.next_ino == 13);
        CHECK(s.next_chunk == 14);
        CHECK(s.next_dirty == 15);
    }
    SECTION("a size no layout has is refused") {
        const std::string bad = super_record_le64s({1, 2, 3}) + "x";
        super_record(dir.meta(), &bad);
        std::unique_ptr<MetaStore> m;
        Status st = MetaStore::open(dir.meta(), 1ull << 30, false, &m);
        CHECK(st.err() == EUCLEAN);
    }
}

namespace {

// A state whose every field holds a value of its own (1, 2, 3, ... in the
// record's order).
SuperState numbered_state() {
    SuperState s;
    std::uint64_t n = 0;
    for (std::uint64_t* f :
         {&s.counters.logical_bytes, &s.counters.stored_bytes, &s.counters.chunk_count,
          &s.counters.dead_bytes, &s.counters.inode_count, &s.counters.dedup_hits,
          &s.counters.cloned_bytes, &s.counters.backlog_records, &s.counters.backlog_bytes,
          &s.counters.raw_bytes, &s.counters.disk_bytes, &s.counters.file_count, &s.next_ino,
          &s.next_chunk, &s.next_dirty, &s.frontier_segment, &s.frontier_offset, &s.journal_seq,
          &s.counters.content_bytes})
        *f = ++n;
    return s;
}

bool same_state(const SuperState& a, const SuperState& b) {
    return encode_super(a) == encode_super(b) && a.journal_seq == b.journal_seq;
}

}  // namespace

TEST_CASE("a super record decodes to the state it was encoded from", "[meta][super-record]") {
    SuperState s = numbered_state();
    const std::string all = encode_super(s);
    CHECK(all == super_record_le64s({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
    SuperState back;
    bool has_file_count = false;
    REQUIRE(decode_super(all, &back, &has_file_count));
    CHECK(has_file_count);
    CHECK(same_state(back, s));
    CHECK(back.journal_seq == 18);
    CHECK(back.counters.content_bytes == 19);
    // Format 4's journaled layout: the seq, no content_bytes.
    REQUIRE(decode_super(all.substr(0, 18 * 8), &back, &has_file_count));
    CHECK(back.journal_seq == 18);
    CHECK(back.counters.content_bytes == back.counters.stored_bytes);
}

TEST_CASE("decode_super reads every older layout and refuses any other size", "[meta][super-record]") {
    const std::string all = encode_super(numbered_state());
    SuperState s;
    bool has_file_count = true;
    // 14 fields: before file_count; the counters after it move up.
    REQUIRE(decode_super(all.substr(0, 14 * 8), &s, &has_file_count));
    CHECK_FALSE(has_file_count);
    CHECK(s.counters.disk_bytes == 11);
    CHECK(s.counters.file_count == 0);
    CHECK(s.next_ino == 12);
    CHECK(s.next_dirty == 14);
    // 15 fields: before the frontier.
    REQUIRE(decode_super(all.substr(0, 15 * 8), &s, &has_file_count));
    CHECK(has_file_count);
    CHECK(s.counters.file_count == 12);
    CHECK(s.next_dirty == 15);
    CHECK(s.frontier_segment == 0);
    CHECK(s.frontier_offset == 0);
    for (const std::size_t bytes : std::vector<std::size_t>{0, 8, 13 * 8, 16 * 8, 20 * 8, 17 * 8 - 1, 17 * 8 + 1}) {
        INFO(bytes << " bytes");
        const std::string v = (all + all).substr(0, bytes);
        CHECK_FALSE(decode_super(v, &s, &has_file_count));
    }
}
