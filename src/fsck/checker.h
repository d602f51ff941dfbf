// The checker of hiodsfs-fsck (fsck.h): loads the metadata into memory
// (about 100 bytes per inode, directory entry and chunk), checks it in an
// order where each stage can trust what the stages before it repaired, and
// writes repairs through one metadata operation that is committed at the
// end. After a repair the whole check runs again on the result; anything it
// still finds is left unrepaired.
//
// Stages: the namespace (missing inodes, entries, reachability, lost+found,
// link counts, directory parents), file maps (extents inside live chunks),
// chunks (reference counts, records rebuilt from segments, the fingerprint
// index, segment records, live bytes per segment), the dirty queue,
// extended attributes, the global counters, and the scrub.
// Thread-safety: one thread; the caller holds the store's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "chunk/codec.h"
#include "chunk/fingerprint.h"
#include "fsck/fsck.h"
#include "fsck/lost_segments.h"
#include "hiodsfs/env.h"
#include "hiodsfs/segment_store.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs::fsck {

inline std::string u(std::uint64_t v) { return std::to_string(v); }

struct InodeInfo {
    InodeRecord r;
    std::string target;
    bool orphan = false;   // in the orphans database
    bool reached = false;  // reachable from the root
    bool lost = false;     // reported as unreachable
    bool quiet_fix = false;  // made by this repair: its counts are set without a report
    std::uint64_t mapped = 0;   // sum of its extents
    std::uint64_t map_end = 0;  // end of its last extent
    bool has_extents = false;
};

struct Entry {
    InodeId parent = 0;
    std::string name;
    DirentValue v;
    bool live = true;
};

struct ChunkInfo {
    ChunkRecord r;
    std::uint64_t counted = 0;  // extents that refer to it
};

// One file range that refers to a chunk (for naming what a bad chunk hurts).
struct Use {
    InodeId ino;
    std::uint64_t start, length;
};

class Checker {
public:
    // env: the store's (StoreDir::env), for the segment a repair may make.
    // dicts: the store's compression dictionaries (meta/dictionaries.h);
    // cipher: an encrypted store's (null for a plain one).
    Checker(Txn& t, SegmentStore& segs, const DictionarySet* dicts, const ChunkCipher* cipher, Env* env,
            const FsckOptions& o, bool repair, bool scrub, FsckReport* report)
        : t_(t),
          segs_(segs),
          dicts_(dicts),
          cipher_(cipher),
          env_(env),
          o_(o),
          repair_(repair),
          scrub_(scrub),
          mark_(repair || (scrub && o.mark_bad_chunks)),
          rep_(*report) {}

    Status run();
    // Chunks this run flagged damaged (a scrub without repair writes only those).
    std::size_t flagged() const { return flagged_; }

private:
    // ---- reporting and names (checker.cc) ----
    void problem(std::string what, bool repaired);
    Status fix(std::string what, const std::function<Status()>& repair);
    void progress(std::string_view phase, std::uint64_t done, std::uint64_t total);
    std::string path_of(InodeId ino);
    void index_names();
    std::string range(const Use& use);
    std::string chunk_users(ChunkId id);

    // ---- stage 1: namespace, and extended attributes (namespace_check.cc) ----
    Status load_namespace();
    Status check_namespace();
    Status check_xattrs();
    // Writes (repair only).
    Status store_inode(InodeId ino, const InodeInfo& in);
    Status put_entry(const Entry& e);
    Status del_entry(Entry& e);
    static InodeRecord new_record(std::uint32_t mode, InodeId parent);
    // A new inode number (the counter was made sane before any repair).
    InodeId allocate_ino() { return t_.super().next_ino++; }
    Status lost_found(InodeId* out);
    Status link_lost(InodeId ino);

    // ---- stage 2: chunks and file maps (chunk_check.cc) ----
    Status load_chunks();
    Status check_extents();
    void users_of(ChunkId id, const Use& use);
    Status recover_chunks(std::map<ChunkId, std::vector<Use>>& missing);
    Status drop_chunk(ChunkId id);
    Status check_chunks();
    // The fingerprint index (index_check.cc).
    Status check_index();
    // The segments (segment_check.cc).
    Status check_tier_copies(const std::vector<std::pair<ChunkLocation, ChunkId>>& order);
    Status check_in_object(const ChunkLocation& loc, ChunkId id, std::uint64_t object_bytes);
    Status check_segments();
    Status check_read_write(const SegmentSizes& sizes, std::size_t gone);
    Status count_payload(const std::vector<std::pair<SegmentId, std::uint64_t>>& list);
    // Bad chunks flagged, and their files moved onto intact copies (heal.cc).
    Status heal(const std::map<ChunkId, std::string>& bad);
    Status intact_copy(ChunkId bad, const ChunkRecord& r, ChunkId* out);

    // ---- stage 3: dirty queue, counters (counters_check.cc) ----
    Status check_dirty();
    Status check_dead_bytes(const SpaceCounters& want);
    Status check_counters();

    Txn& t_;
    SegmentStore& segs_;
    // The store's compression dictionaries, to decode chunks stored with one.
    const DictionarySet* const dicts_;
    // An encrypted store's: opens its chunks, and its fingerprints are keyed.
    const ChunkCipher* const cipher_;
    Digest fingerprint(const std::vector<std::uint8_t>& bytes) const {
        return chunk_fingerprint(cipher_, bytes.data(), bytes.size());
    }
    Env* const env_;
    const FsckOptions& o_;
    const bool repair_, scrub_;
    const bool mark_;  // bad chunks are flagged damaged, repairing or not
    std::size_t flagged_ = 0;
    FsckReport& rep_;

    std::map<InodeId, InodeInfo> inodes_;
    std::vector<InodeId> damaged_inodes_;
    std::vector<std::pair<Db, std::string>> bad_keys_;
    std::vector<Entry> entries_;
    std::unordered_map<InodeId, std::size_t> name_of_;  // child -> one of its entries
    std::vector<InodeId> orphans_;
    std::unordered_map<InodeId, std::pair<std::uint64_t, std::uint64_t>> extent_sums_;
    InodeId lost_found_ = 0;
    std::unordered_map<ChunkId, ChunkInfo> chunks_;
    std::unordered_set<ChunkId> damaged_chunks_;
    std::set<ChunkId> gone_;     // their bytes are gone (a local segment missing or cut short)
    SegmentId newest_gone_ = 0;  // the highest segment such bytes were in
    std::unordered_map<ChunkId, std::vector<Use>> uses_;  // a few users per chunk
    ChunkId max_chunk_ = 0;
    std::uint64_t backlog_records_ = 0, backlog_bytes_ = 0;
    std::optional<std::map<SegmentId, std::uint64_t>> payload_;  // count_payload()
    std::set<SegmentId> known_segments_;  // with an entry or live chunks
    std::uint64_t progress_calls_ = 0;
};

}  // namespace hiodsfs::fsck
