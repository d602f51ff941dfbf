// The store's compression dictionaries in the metadata (meta/dictionaries.h):
// keys that sort by id and refuse anything else, values whose damage is
// found by their checksum, one record per id, and a load that adds every
// whole dictionary and names each damaged record.
#include "meta/dictionaries.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <memory>
#include <random>
#include <string>

#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

// Bytes zstd takes as a raw-content dictionary (no dictionary magic).
std::string content_dictionary(unsigned seed, std::size_t n = 4096) {
    std::mt19937 rng(seed);
    std::string s;
    while (s.size() < n) s += "word" + std::to_string(rng() % 100) + " ";
    return s.substr(0, n);
}

}  // namespace

TEST_CASE("dictionary keys: by id in order, and nothing else parses as one", "[meta][dictionary]") {
    std::uint32_t id = 0;
    REQUIRE(parse_dictionary_key(dictionary_key(1), &id));
    CHECK(id == 1);
    REQUIRE(parse_dictionary_key(dictionary_key(0xfffffffe), &id));
    CHECK(id == 0xfffffffe);
    CHECK(dictionary_key(2) < dictionary_key(256));
    CHECK(dictionary_key(255) < dictionary_key(256));
    CHECK_FALSE(parse_dictionary_key(dictionary_key(0), &id));  // 0 means "no dictionary"
    CHECK_FALSE(parse_dictionary_key("dict", &id));
    CHECK_FALSE(parse_dictionary_key(dictionary_key(7) + "x", &id));
    CHECK_FALSE(parse_dictionary_key("format", &id));
    CHECK_FALSE(parse_dictionary_key("state", &id));
    CHECK_FALSE(parse_dictionary_key("dicx" + dictionary_key(7).substr(4), &id));
}

TEST_CASE("dictionary records: a round trip, and damage is refused", "[meta][dictionary]") {
    const std::string dict = content_dictionary(1);
    const std::string v = encode_dictionary_record(123456789012ull, dict);
    DictionaryRecord r;
    REQUIRE(decode_dictionary_record(v, &r));
    CHECK(r.trained_at == 123456789012ull);
    CHECK(r.bytes == dict);
    for (std::size_t at :
         {std::size_t{8}, std::size_t{11}, std::size_t{12}, v.size() / 2, v.size() - 1}) {
        std::string bad = v;
        bad[at] = static_cast<char>(bad[at] ^ 0x10);
        INFO("byte " << at);
        CHECK_FALSE(decode_dictionary_record(bad, &r));
    }
    CHECK_FALSE(decode_dictionary_record(v.substr(0, v.size() - 1), &r));
    CHECK_FALSE(decode_dictionary_record(v.substr(0, 12), &r));  // no dictionary
    CHECK_FALSE(decode_dictionary_record("", &r));
}

TEST_CASE("dictionaries: stored once per id, loaded whole, damaged records named",
          "[meta][dictionary]") {
    test::MetaTempDir d;
    std::unique_ptr<MetaStore> meta = test::open_meta(d.meta());
    {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t));
        REQUIRE(put_dictionary(*t, 1, 1000, content_dictionary(1)));
        REQUIRE(put_dictionary(*t, 2, 8000, content_dictionary(2)));
        // Never replaced: a chunk of the first would decode wrongly.
        const Status again = put_dictionary(*t, 2, 9000, content_dictionary(3));
        CHECK(again.err() == EEXIST);
        REQUIRE(t->put(Db::kSuper, "format", "kept apart"));
        REQUIRE(t->commit());
    }
    REQUIRE(meta->commit_group(nullptr));
    {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin_read(&t));
        DictionarySet set;
        StoredDictionaries found;
        REQUIRE(load_dictionaries(*t, &set, &found));
        CHECK(set.ids() == std::vector<std::uint32_t>{1, 2});
        CHECK(set.find(2)->bytes() == content_dictionary(2));
        CHECK(found.highest_id == 2);
        CHECK(found.newest_trained_at == 8000);
        CHECK(found.damaged.empty());
    }
    // The newest record damaged, a key cut short, and one zstd refuses (its
    // magic, then nothing a dictionary needs).
    {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t));
        std::string v = encode_dictionary_record(8000, content_dictionary(2));
        v[40] = static_cast<char>(v[40] ^ 1);
        REQUIRE(t->put(Db::kSuper, dictionary_key(2), v));
        REQUIRE(t->put(Db::kSuper, "dict\x01", "x"));
        const std::string refused =
            std::string("\x37\xa4\x30\xec\x01\x02\x03\x04", 8) + std::string(200, '\xff');
        REQUIRE(t->put(Db::kSuper, dictionary_key(5), encode_dictionary_record(9000, refused)));
        REQUIRE(t->commit());
    }
    std::unique_ptr<Txn> t;
    REQUIRE(meta->begin(&t));
    DictionarySet set;
    StoredDictionaries found;
    REQUIRE(load_dictionaries(*t, &set, &found));
    CHECK(set.ids() == std::vector<std::uint32_t>{1});
    CHECK(found.highest_id == 5);  // the next one is 6, whatever 2 and 5 held
    CHECK(found.newest_trained_at == 1000);
    REQUIRE(found.damaged.size() == 3);
    std::string all;
    for (const std::string& line : found.damaged) all += line + "\n";
    INFO(all);
    CHECK(all.find("compression dictionary 2's record is damaged") != std::string::npos);
    CHECK(all.find("compression dictionary 5's record is damaged") != std::string::npos);
    CHECK(all.find("damaged key") != std::string::npos);
}
