// Helpers of the compression tests (compression_test.cc,
// compression_dict_test.cc): compressible bytes, a parsed method, and what
// the segment records of a closed store hold (their prefixes' methods,
// levels and dictionaries).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chunk/codec.h"
#include "engine_test_util.h"
#include "store/segment_format.h"

namespace hiodsfs::test {

inline void require_ok(const Status& st) {
    INFO(st.to_string());
    REQUIRE(st.is_ok());
}

// Text-like bytes that compress about 3:1 and share no chunk between seeds.
inline std::vector<std::uint8_t> text_bytes(std::size_t n, unsigned seed) {
    static const char* words[] = {"alpha ", "beta ",  "gamma ", "delta\n", "epsilon ", "zeta; ",
                                  "eta ",   "theta(", ") ",     "iota, ",  "kappa ",   "lambda "};
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> v;
    v.reserve(n);
    while (v.size() < n) {
        const std::string w = std::string(words[rng() % 12]) + std::to_string(rng() % 1000);
        v.insert(v.end(), w.begin(), w.end());
    }
    v.resize(n);
    return v;
}

// A number of the engine's status.json.
inline std::uint64_t status_field(Engine& e, const char* key) {
    return nlohmann::json::parse(e.status_json()).at(key).get<std::uint64_t>();
}

inline Compression parsed(const char* text) {
    Compression c;
    require_ok(parse_compression(text, &c));
    return c;
}

// A store written inline with lz4 whose compaction stores what it moves
// with `background`; run_reclaim() runs at full speed, as an idle store's
// reclaimer.
inline EngineOptions lz4_recompressed_to(const std::string& store, const char* background) {
    EngineOptions o = options_for(store, kCdc);
    o.compression = parsed("lz4");
    o.compression_background = parsed(background);
    o.reclaim = ReclaimMode::kManual;
    return o;
}

struct RecordKinds {
    std::size_t encoded = 0, as_is = 0;
    std::map<int, std::size_t> by_level;  // encoded records by their prefix's method * 100 + level
    std::map<std::uint32_t, std::size_t>
        by_dictionary;  // zstd records by their prefix's dictionary (0: none)
};

// What the segment records of a closed store hold.
inline RecordKinds record_kinds(const std::string& store) {
    RecordKinds k;
    std::unique_ptr<SegmentStore> segs;
    SegmentStoreOptions so;
    so.read_only = true;
    require_ok(SegmentStore::open(Env::posix(), store + "/segments", so, &segs));
    for_each_segment_record(store, true, [&](const SegmentRecord& r) {
        CHECK(r.payload_ok);
        if (!r.location.encoded) {
            ++k.as_is;
            return;
        }
        ++k.encoded;
        std::vector<char> payload(r.location.length);
        require_ok(segs->read(r.location, r.chunk, payload.data()));
        CodecPrefix p;
        REQUIRE(read_codec_prefix(payload.data(), r.location.length, &p));
        ++k.by_level[static_cast<int>(p.method) * 100 + p.level];
        if (p.method == CompressionMethod::kZstd) ++k.by_dictionary[p.dictionary];
    });
    return k;
}

}  // namespace hiodsfs::test
