// The fingerprint index in buckets (format 4) against a model: random adds
// and removes, prefixes shared by several chunks, buckets that split and
// merge, always list exactly the model's ids under each prefix; a bucket
// costs about 11 bytes an entry; a damaged bucket is refused, reads as
// empty, and is replaced by the next add into it.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>

#include "meta/fingerprint_index.h"
#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta_temp_dir.h"

using namespace hiodsfs;

namespace {

using TempDir = test::MetaTempDir;

std::vector<ChunkId> ids_of(Txn& t, std::uint64_t prefix) {
    std::vector<ChunkId> ids;
    REQUIRE(fingerprint_ids(t, prefix, &ids).is_ok());
    return ids;
}

// Every bucket decodes, holds at most the maximum (a run of one prefix
// aside), its entries below the next bucket's start; returns the entries.
std::set<std::pair<std::uint64_t, ChunkId>> walk(Txn& t, std::size_t* buckets) {
    std::set<std::pair<std::uint64_t, ChunkId>> seen;
    std::vector<FingerprintEntry> previous;
    *buckets = 0;
    REQUIRE(for_each_fingerprint_bucket(t, [&](const StoredFingerprintBucket& b) {
                REQUIRE(b.key_ok);
                REQUIRE(b.value_ok);
                CHECK(b.entries.size() <= kFingerprintBucketMax);
                for (const FingerprintEntry& e : previous) CHECK(e.prefix < b.lower);
                for (const FingerprintEntry& e : b.entries) CHECK(seen.emplace(e.prefix, e.id).second);
                previous = b.entries;
                ++*buckets;
                return Status::ok();
            }).is_ok());
    return seen;
}

}  // namespace

TEST_CASE("a fingerprint bucket round-trips, costs about 11 bytes an entry and refuses damage",
          "[meta][fingerprints]") {
    std::mt19937_64 rng(5);
    std::vector<FingerprintEntry> e;
    for (int i = 0; i < 32; ++i) e.push_back({rng() | 1, static_cast<ChunkId>(100000 + rng() % 900000)});
    std::sort(e.begin(), e.end(), [](auto& a, auto& b) { return a.prefix < b.prefix; });
    const std::string v = encode_fingerprint_bucket(e.data(), e.size());
    // 8 prefix bytes and a chunk id of 3 varint bytes; format 3 spent an
    // 11-byte key, an 8-byte node header and a 2-byte slot on each.
    CHECK(v.size() == 32 * 11);
    std::vector<FingerprintEntry> back;
    REQUIRE(decode_fingerprint_bucket(e.front().prefix, v, &back));
    CHECK(back == e);
    // Every prefix of the value, a byte more, a lower bound above an entry,
    // entries out of order or repeated, chunk id 0, an empty value: refused.
    for (std::size_t n = 0; n < v.size(); ++n) {
        INFO("length " << n);
        if (n % 11 == 0 && n > 0) continue;  // whole entries: a shorter bucket
        back.clear();
        CHECK_FALSE(decode_fingerprint_bucket(0, std::string_view(v).substr(0, n), &back));
        CHECK(back.empty());
    }
    CHECK_FALSE(decode_fingerprint_bucket(0, v + '\x01', &back));
    CHECK_FALSE(decode_fingerprint_bucket(e.front().prefix + 1, v, &back));
    std::vector<FingerprintEntry> bad = {e[1], e[0]};
    CHECK_FALSE(decode_fingerprint_bucket(0, encode_fingerprint_bucket(bad.data(), 2), &back));
    bad = {e[0], e[0]};
    CHECK_FALSE(decode_fingerprint_bucket(0, encode_fingerprint_bucket(bad.data(), 2), &back));
    bad = {{e[0].prefix, 0}};
    CHECK_FALSE(decode_fingerprint_bucket(0, encode_fingerprint_bucket(bad.data(), 1), &back));
    CHECK_FALSE(decode_fingerprint_bucket(0, "", &back));
    // One prefix, two chunks (a shared prefix): in id order.
    bad = {{7, 2}, {7, 9}};
    CHECK(decode_fingerprint_bucket(7, encode_fingerprint_bucket(bad.data(), 2), &back));
}

TEST_CASE("the fingerprint index follows a model through adds and removes", "[meta][fingerprints]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    std::mt19937_64 rng(9);
    std::multimap<std::uint64_t, ChunkId> model;
    std::vector<std::uint64_t> prefixes;  // some reused: prefixes shared by several chunks
    ChunkId next_id = 1;
    auto check_all = [&](Txn& t) {
        std::size_t buckets = 0;
        const auto seen = walk(t, &buckets);
        CHECK(seen.size() == model.size());
        for (const auto& [p, id] : model) CHECK(seen.count({p, id}) == 1);
        // Lookups: every modelled prefix, and prefixes next to them.
        for (std::size_t i = 0; i < prefixes.size(); i += 7) {
            for (std::uint64_t p : {prefixes[i], prefixes[i] + 1, prefixes[i] - 1}) {
                std::vector<ChunkId> want;
                for (auto [a, b] = model.equal_range(p); a != b; ++a) want.push_back(a->second);
                std::sort(want.begin(), want.end());
                INFO("prefix " << p);
                CHECK(ids_of(t, p) == want);
            }
        }
        return buckets;
    };
    for (int round = 0; round < 12; ++round) {
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        // Grow for 8 rounds, then shrink: splits first, then merges and removals.
        const bool grow = round < 8;
        for (int op = 0; op < 600; ++op) {
            if (grow ? rng() % 4 != 0 : rng() % 5 == 0) {
                std::uint64_t p = rng();
                if (!prefixes.empty() && rng() % 10 == 0) p = prefixes[rng() % prefixes.size()];
                if (rng() % 50 == 0) p = rng() % 3;  // the bottom of the key space
                prefixes.push_back(p);
                const ChunkId id = next_id++;
                REQUIRE(add_fingerprint(*t, p, id).is_ok());
                REQUIRE(add_fingerprint(*t, p, id).is_ok());  // listed once
                model.emplace(p, id);
            } else if (!model.empty()) {
                auto it = model.begin();
                std::advance(it, static_cast<long>(rng() % model.size()));
                bool listed = false;
                REQUIRE(remove_fingerprint(*t, it->first, it->second, &listed).is_ok());
                CHECK(listed);
                REQUIRE(remove_fingerprint(*t, it->first, it->second, &listed).is_ok());
                CHECK_FALSE(listed);
                model.erase(it);
            }
        }
        REQUIRE(t->commit().is_ok());
        t.reset();  // a group commits with no transaction open
        REQUIRE(m->commit_group(nullptr).is_ok());
        REQUIRE(m->begin_read(&t, MetaStore::ReadFrom::kGroup).is_ok());  // the index is read in operations
        const std::size_t buckets = check_all(*t);
        INFO("round " << round << ": " << model.size() << " entries in " << buckets << " buckets");
        // Splits keep buckets at least about half full while the index grows.
        if (grow && model.size() > 1000) CHECK(model.size() >= buckets * kFingerprintBucketMax / 2 - buckets);
    }
}

TEST_CASE("a damaged fingerprint bucket reads as empty and the next add replaces it", "[meta][fingerprints]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(add_fingerprint(*t, 1000, 1).is_ok());
    REQUIRE(add_fingerprint(*t, 2000, 2).is_ok());
    REQUIRE(t->put(Db::kFingerprints, be64(1000), std::string_view("\x01", 1)).is_ok());
    CHECK(ids_of(*t, 1000).empty());
    CHECK(ids_of(*t, 2000).empty());  // same bucket
    bool listed = true;
    REQUIRE(remove_fingerprint(*t, 2000, 2, &listed).is_ok());
    CHECK_FALSE(listed);
    // A key that is not a bucket's is passed over by lookups and adds.
    REQUIRE(t->put(Db::kFingerprints, std::string(5, 'x'), "").is_ok());
    REQUIRE(add_fingerprint(*t, 1500, 3).is_ok());
    CHECK(ids_of(*t, 1500) == std::vector<ChunkId>{3});
    CHECK(ids_of(*t, 2000).empty());  // lost with the damaged bucket, until fsck adds it again
    // Below every bucket: the first bucket's key moves down.
    REQUIRE(add_fingerprint(*t, 10, 4).is_ok());
    CHECK(ids_of(*t, 10) == std::vector<ChunkId>{4});
    CHECK(ids_of(*t, 1500) == std::vector<ChunkId>{3});
    CHECK(add_fingerprint(*t, 10, 0).err() == EINVAL);
}

TEST_CASE("an insert uses the bucket its lookup found, unless the index changed in between",
          "[meta][fingerprints]") {
    TempDir dir;
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(dir.meta(), 1ull << 30, false, &m).is_ok());
    std::mt19937_64 rng(21);
    std::multimap<std::uint64_t, ChunkId> model;
    ChunkId next_id = 1;
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    int reused = 0, stale = 0;
    for (int op = 0; op < 3000; ++op) {
        const std::uint64_t p = rng() % 5 == 0 && !model.empty() ? std::next(model.begin(), static_cast<long>(rng() % model.size()))->first
                                                                : rng();
        FingerprintSlot slot;
        std::vector<ChunkId> ids;
        REQUIRE(fingerprint_ids(*t, p, &ids, &slot).is_ok());
        if (rng() % 3 == 0) {
            // A neighbour listed in between: the slot's copy of the bucket
            // lacks it, so using the slot now would drop it.
            const ChunkId other = next_id++;
            REQUIRE(add_fingerprint(*t, p + 1, other).is_ok());
            model.emplace(p + 1, other);
            ++stale;
        } else {
            ++reused;
        }
        const ChunkId id = next_id++;
        REQUIRE(add_fingerprint(*t, p, id, &slot).is_ok());
        CHECK(slot.txn == nullptr);  // spent
        model.emplace(p, id);
    }
    CHECK(reused > 1000);
    CHECK(stale > 500);
    std::size_t buckets = 0;
    const auto seen = walk(*t, &buckets);
    CHECK(seen.size() == model.size());
    for (const auto& [p, id] : model) CHECK(seen.count({p, id}) == 1);
    for (const auto& [p, id] : model) {
        const std::vector<ChunkId> got = ids_of(*t, p);
        CHECK(std::find(got.begin(), got.end(), id) != got.end());
    }
    REQUIRE(t->commit().is_ok());
}
