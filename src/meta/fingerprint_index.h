// The fingerprint index, stored in buckets (format 4). An entry is the
// first 8 bytes of a chunk's SHA-256 (its prefix, a big-endian number) and
// the chunk id; the full digest is in the chunk record, where a lookup
// checks it (engine/chunk_index.h). Entries are kept in buckets of up to
// kFingerprintBucketMax, sorted by prefix: a bucket's key is the lower
// bound of the prefixes it holds (8 big-endian bytes), and an entry lives in
// the bucket with the greatest key not above its prefix. Value: per entry
// the 8 prefix bytes and the id as a varint. One LMDB node, key and slot per
// bucket instead of per chunk: about 12 bytes an entry against 22 in
// format 3. Digests are uniform, so buckets split in the middle when full
// and stay 16-32 entries; one emptied by deletes is removed, and a small
// one merges into the bucket before it.
// Thread-safety: as the Txn the caller holds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

struct FingerprintEntry {
    std::uint64_t prefix = 0;
    ChunkId id = 0;
    bool operator==(const FingerprintEntry&) const = default;
};

// A digest's first 8 bytes as a big-endian number (the index's order).
std::uint64_t fingerprint_prefix(const Digest& digest);

// A bucket's value (entries sorted by prefix, then id; not empty).
std::string encode_fingerprint_bucket(const FingerprintEntry* entries, std::size_t n);
// Appends the entries of the bucket whose key is `lower`; false if the value
// is not one (empty, truncated, out of order or repeated, a prefix below
// lower, chunk id 0).
bool decode_fingerprint_bucket(std::uint64_t lower, std::string_view value, std::vector<FingerprintEntry>* out);

// The bucket a lookup found, kept so that listing a new chunk under the
// same prefix in the same operation (a write's miss, then its insert) need
// not find and decode it again. Used only while the operation has changed
// no bucket since.
struct FingerprintSlot {
    const Txn* txn = nullptr;
    std::uint64_t changes = 0;  // t.changes(Db::kFingerprints) when found
    std::uint64_t prefix = 0;
    bool found = false;  // a bucket holds prefix's range
    bool damaged = false;
    std::uint64_t lower = 0;
    std::vector<FingerprintEntry> entries;
};

// The chunk ids listed under prefix (none if its bucket is damaged:
// hiodsfs-fsck rebuilds it; until then those chunks are not shared onto).
// slot (if given): keeps the bucket for add_fingerprint.
Status fingerprint_ids(Txn& t, std::uint64_t prefix, std::vector<ChunkId>* out, FingerprintSlot* slot = nullptr);
// Lists id under prefix (nothing if it is listed). A damaged bucket it
// falls into is replaced, its entries lost until fsck adds them again.
// slot: what fingerprint_ids found for prefix, used if still current.
Status add_fingerprint(Txn& t, std::uint64_t prefix, ChunkId id, FingerprintSlot* slot = nullptr);
// Takes id off prefix's list (ok if it was not on it; a damaged bucket is
// left for fsck). *listed, if given, says whether it was.
Status remove_fingerprint(Txn& t, std::uint64_t prefix, ChunkId id, bool* listed = nullptr);

// One stored bucket, as hiodsfs-fsck walks them.
struct StoredFingerprintBucket {
    std::string_view key;
    bool key_ok = false;  // lower is valid only then
    std::uint64_t lower = 0;
    bool value_ok = false;  // entries holds the bucket only then
    std::vector<FingerprintEntry> entries;
};
// Calls fn for every bucket in key order; stops at the first error fn
// returns. fn must not change t; the key view is valid during the call only.
Status for_each_fingerprint_bucket(Txn& t, const std::function<Status(const StoredFingerprintBucket&)>& fn);

}  // namespace hiodsfs
