#include "meta/fingerprint_index.h"

#include <algorithm>

#include "meta/keys.h"

namespace hiodsfs {

namespace {

// A bucket left with this few entries by a delete merges into the one
// before it when both fit in half a full one (so the next insert does not
// split it again).
constexpr std::size_t kMergeBelow = 4;

bool entry_less(const FingerprintEntry& a, const FingerprintEntry& b) {
    return a.prefix != b.prefix ? a.prefix < b.prefix : a.id < b.id;
}

// The bucket prefix falls into: the last key <= prefix. *found false if
// every bucket starts above it (or there is none).
using Bucket = FingerprintSlot;

// A key that is not 8 bytes was put there by no format-4 writer: lookups
// pass over it (the entries around it have buckets of their own) and
// hiodsfs-fsck removes it.
bool bucket_key(const Cursor& c) { return c.key().size() == 8; }

Status find_bucket(Txn& t, std::uint64_t prefix, Bucket* out) {
    out->found = out->damaged = false;
    out->lower = 0;
    out->entries.clear();  // keeps its capacity: lookups reuse one per thread
    Cursor c = t.cursor(Db::kFingerprints);
    const std::string want = be64(prefix);
    bool ok = c.seek(want) ? c.key() == want || c.prev() : c.status().is_ok() && c.last();
    while (ok && !bucket_key(c)) ok = c.prev();
    HIODSFS_TRY(c.status());
    if (!ok) return Status::ok();
    out->found = true;
    out->lower = get_be64(c.key());
    out->damaged = !decode_fingerprint_bucket(out->lower, c.value(), &out->entries);
    if (out->damaged) out->entries.clear();
    return Status::ok();
}

Status put_bucket(Txn& t, std::uint64_t lower, const std::vector<FingerprintEntry>& entries) {
    return t.put(Db::kFingerprints, be64(lower), encode_fingerprint_bucket(entries.data(), entries.size()));
}

// Where a full bucket splits: the middle, moved so that one prefix never
// spans two buckets (lookups read one bucket). 0 if it cannot split.
std::size_t split_point(const std::vector<FingerprintEntry>& e) {
    const std::size_t mid = e.size() / 2;
    for (std::size_t m = mid; m < e.size(); ++m)
        if (e[m - 1].prefix != e[m].prefix) return m;
    for (std::size_t m = mid; m > 0; --m)
        if (e[m - 1].prefix != e[m].prefix) return m;
    return 0;
}

}  // namespace

std::uint64_t fingerprint_prefix(const Digest& digest) {
    return get_be64(std::string_view(reinterpret_cast<const char*>(digest.bytes.data()), 8));
}

std::string encode_fingerprint_bucket(const FingerprintEntry* entries, std::size_t n) {
    std::string out;
    out.reserve(n * 12);
    for (std::size_t i = 0; i < n; ++i) {
        put_be64(&out, entries[i].prefix);
        put_varint(&out, entries[i].id);
    }
    return out;
}

bool decode_fingerprint_bucket(std::uint64_t lower, std::string_view in, std::vector<FingerprintEntry>* out) {
    if (in.empty()) return false;
    const std::size_t first = out->size();
    std::size_t pos = 0;
    while (pos < in.size()) {
        FingerprintEntry e;
        if (in.size() - pos < 8) break;
        e.prefix = get_be64(in, pos);
        pos += 8;
        if (!get_varint(in, &pos, &e.id) || e.id == 0 || e.prefix < lower ||
            (out->size() > first && !entry_less(out->back(), e)))
            break;
        out->push_back(e);
        if (pos == in.size()) return true;
    }
    out->resize(first);
    return false;
}

Status fingerprint_ids(Txn& t, std::uint64_t prefix, std::vector<ChunkId>* out, FingerprintSlot* slot) {
    out->clear();
    // Every write's lookup: no allocation once a thread has looked once.
    thread_local Bucket mine;
    Bucket& b = slot != nullptr ? *slot : mine;
    b.txn = nullptr;
    HIODSFS_TRY(find_bucket(t, prefix, &b));
    b.txn = &t;
    b.changes = t.changes(Db::kFingerprints);
    b.prefix = prefix;
    auto it = std::lower_bound(b.entries.begin(), b.entries.end(), FingerprintEntry{prefix, 0}, entry_less);
    for (; it != b.entries.end() && it->prefix == prefix; ++it) out->push_back(it->id);
    return Status::ok();
}

Status add_fingerprint(Txn& t, std::uint64_t prefix, ChunkId id, FingerprintSlot* slot) {
    if (id == 0) return Status::error(EINVAL, "fingerprint index: chunk id 0");
    const bool current = slot != nullptr && slot->txn == &t &&
                         slot->changes == t.changes(Db::kFingerprints) && slot->prefix == prefix;
    Bucket found;
    if (!current) HIODSFS_TRY(find_bucket(t, prefix, &found));
    Bucket& b = current ? *slot : found;  // the slot's vector keeps its capacity
    if (slot != nullptr) slot->txn = nullptr;  // spent: the insert changes the bucket
    const FingerprintEntry e{prefix, id};
    if (!b.found) {
        // Below every bucket: the first one takes the entry and its key
        // moves down to it (no bucket of one entry at the bottom).
        Cursor c = t.cursor(Db::kFingerprints);
        bool any = c.first();
        while (any && !bucket_key(c)) any = c.next();
        HIODSFS_TRY(c.status());
        if (any) {
            const std::uint64_t old = get_be64(c.key());
            std::vector<FingerprintEntry> entries;
            if (decode_fingerprint_bucket(old, c.value(), &entries) && entries.size() < kFingerprintBucketMax) {
                entries.insert(entries.begin(), e);
                HIODSFS_TRY(t.del(Db::kFingerprints, be64(old)));
                return put_bucket(t, prefix, entries);
            }
        }
        return put_bucket(t, prefix, {e});
    }
    auto at = std::lower_bound(b.entries.begin(), b.entries.end(), e, entry_less);
    if (at != b.entries.end() && *at == e) return Status::ok();
    b.entries.insert(at, e);
    if (b.entries.size() > kFingerprintBucketMax) {
        if (const std::size_t m = split_point(b.entries); m != 0) {
            const std::vector<FingerprintEntry> upper(b.entries.begin() + static_cast<std::ptrdiff_t>(m),
                                                      b.entries.end());
            b.entries.resize(m);
            HIODSFS_TRY(put_bucket(t, upper.front().prefix, upper));
        }
    }
    return put_bucket(t, b.lower, b.entries);
}

Status remove_fingerprint(Txn& t, std::uint64_t prefix, ChunkId id, bool* listed) {
    if (listed != nullptr) *listed = false;
    Bucket b;
    HIODSFS_TRY(find_bucket(t, prefix, &b));
    auto at = std::lower_bound(b.entries.begin(), b.entries.end(), FingerprintEntry{prefix, id}, entry_less);
    if (!b.found || b.damaged || at == b.entries.end() || !(*at == FingerprintEntry{prefix, id}))
        return Status::ok();
    if (listed != nullptr) *listed = true;
    b.entries.erase(at);
    if (b.entries.empty()) return t.del(Db::kFingerprints, be64(b.lower));
    if (b.entries.size() < kMergeBelow && b.lower != 0) {
        Bucket before;
        HIODSFS_TRY(find_bucket(t, b.lower - 1, &before));
        if (before.found && !before.damaged &&
            before.entries.size() + b.entries.size() <= kFingerprintBucketMax / 2) {
            before.entries.insert(before.entries.end(), b.entries.begin(), b.entries.end());
            HIODSFS_TRY(t.del(Db::kFingerprints, be64(b.lower)));
            return put_bucket(t, before.lower, before.entries);
        }
    }
    return put_bucket(t, b.lower, b.entries);
}

Status for_each_fingerprint_bucket(Txn& t, const std::function<Status(const StoredFingerprintBucket&)>& fn) {
    Cursor c = t.cursor(Db::kFingerprints);
    StoredFingerprintBucket b;
    for (bool ok = c.first(); ok; ok = c.next()) {
        b.key = c.key();
        b.entries.clear();
        b.key_ok = b.key.size() == 8;
        b.lower = b.key_ok ? get_be64(b.key) : 0;
        b.value_ok = b.key_ok && decode_fingerprint_bucket(b.lower, c.value(), &b.entries);
        HIODSFS_TRY(fn(b));
    }
    return c.status();
}

}  // namespace hiodsfs
