// Helpers shared by the segment store's tests: records appended and read
// back (any success must return exactly the bytes appended), the promise
// after a crash (synced records read back exactly, the others exactly or
// not at all), and a fixed workload of appends and syncs for fault tests.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hiodsfs/segment_store.h"
#include "store/fault_env.h"
#include "store_test_util.h"

namespace hiodsfs::test {

struct Rec {
    ChunkId id = 0;
    ChunkLocation loc;
    std::vector<char> data;
};

inline SegmentStoreOptions small_options(std::uint64_t max_segment, std::size_t buffer) {
    SegmentStoreOptions o;
    o.max_segment_bytes = max_segment;
    o.write_buffer_bytes = buffer;
    return o;
}

inline Status append(SegmentStore& s, ChunkId id, const std::vector<char>& data, Rec* out) {
    out->id = id;
    out->data = data;
    return s.append(id, data.data(), static_cast<std::uint32_t>(data.size()), &out->loc);
}

// Reads a record back; any success must return exactly the bytes appended.
inline Status read_back(SegmentStore& s, const Rec& r) {
    std::vector<char> got(r.loc.length, '\x5a');
    Status st = s.read(r.loc, r.id, got.data());
    if (st) {
        INFO("chunk " << r.id);
        REQUIRE(got == r.data);
    }
    return st;
}

inline void require_all(SegmentStore& s, const std::vector<Rec>& recs) {
    for (const Rec& r : recs) {
        INFO("chunk " << r.id << " segment " << r.loc.segment << " offset " << r.loc.offset);
        REQUIRE_OK(read_back(s, r));
    }
}

// Either the exact bytes or EIO; never anything else.
inline void require_intact_or_absent(SegmentStore& s, const Rec& r) {
    Status st = read_back(s, r);
    INFO("chunk " << r.id << ": " << st.to_string());
    REQUIRE((st.is_ok() || st.err() == EIO));
}

// After a crash: records[0, promised) read back exactly, the rest exactly or
// not at all.
inline void check_promises(SegmentStore& s, const std::vector<Rec>& records, std::size_t promised) {
    for (std::size_t i = 0; i < records.size(); ++i) {
        if (i < promised) {
            INFO("record " << i << " of " << promised << " promised");
            REQUIRE_OK(read_back(s, records[i]));
        } else {
            require_intact_or_absent(s, records[i]);
        }
    }
}

inline void flip_byte(const std::string& path, std::uint64_t offset) {
    auto bytes = slurp(path);
    REQUIRE(offset < bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x40);
    spit(path, bytes);
}

inline std::uint64_t header_offset(const Rec& r) {
    return r.loc.offset - SegmentStore::kHeaderBytes;
}

// A fixed workload: appends of varied sizes with a sync every few records.
// Tracks which records were appended before a successful sync.
struct Workload {
    std::vector<Rec> appended;  // append returned ok
    std::size_t durable = 0;    // appended[0, durable) are promised durable
    std::vector<Status> errors;

    void run(SegmentStore& s, ChunkId first_id, int count, std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        for (int i = 0; i < count; ++i) {
            Rec r;
            const std::size_t len = 100 + rng() % 3000;
            Status st = append(s, first_id + static_cast<ChunkId>(i), random_bytes(rng, len), &r);
            if (st) {
                appended.push_back(std::move(r));
            } else {
                errors.push_back(st);
            }
            if (i % 5 == 4 || i == count - 1) sync(s);
        }
    }
    void sync(SegmentStore& s) {
        Status st = s.sync();
        if (st) {
            durable = appended.size();
        } else {
            errors.push_back(st);
        }
    }
};

inline constexpr int kWorkloadRecords = 60;

inline SegmentStoreOptions fault_options() { return small_options(32 << 10, 8192); }

// Reopens after a power loss and checks the promise: durable records read
// back exactly, the others exactly or not at all. Then the store must work.
inline void check_after_crash(FaultInjectionEnv& env, const std::string& dir, const Workload& w) {
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(&env, dir, fault_options(), &s));
    check_promises(*s, w.appended, w.durable);
    Rec r;
    REQUIRE_OK(append(*s, 9999, std::vector<char>(100, 'z'), &r));
    REQUIRE_OK(s->sync());
    REQUIRE_OK(read_back(*s, r));
    for (std::size_t i = 0; i < w.durable; ++i) REQUIRE_OK(read_back(*s, w.appended[i]));
}

}  // namespace hiodsfs::test
