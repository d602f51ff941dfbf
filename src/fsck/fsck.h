// hiodsfs-fsck as a library: checks every invariant of a store that no
// other process has open (docs/fsck.md lists them), repairs what can be
// repaired without losing data, and with scrub re-reads every chunk and
// names the files a bad chunk affects. The tool (tools/hiodsfs-fsck.cc) and
// the crash tests call run_fsck().
// Thread-safety: run_fsck() takes the store's lock; call it from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hiodsfs/chunker.h"
#include "hiodsfs/segment_tier.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

class StoreKey;    // src/chunk/cipher.h
class Passphrase;  // src/chunk/key_wrap.h

struct FsckOptions {
    // The store directory; with a tier, its cache_dir (made, and the
    // metadata recovered from the tier, when it is missing or empty).
    std::string store;
    // Where a store whose FORMAT names a tier keeps its sealed segments and
    // its metadata journal (not owned); the caller holds the store's lock
    // there. Null: a store with a tier is refused.
    SegmentTier* tier = nullptr;
    // Fix what can be fixed without losing data (takes the store's lock
    // exclusively and opens the metadata read-write).
    bool repair = false;
    // Re-read every chunk: payload CRC-32C, and SHA-256 of indexed chunks.
    bool scrub = false;
    // With scrub, and without repair too: flag each chunk that fails it
    // damaged (out of the fingerprint index), as a read that fails in the
    // daemon does, so no write shares it again before the files are written
    // anew. The store is then opened as for repair (its lock exclusively,
    // the fsync log applied) and only those flags are written. The tool
    // sets it unless -n.
    bool mark_bad_chunks = false;
    // Called now and then during long phases (the tool draws a progress
    // line with it); may be empty.
    std::function<void(std::string_view phase, std::uint64_t done, std::uint64_t total)> progress;
    // The chunking a store was made with, for --repair to write its FORMAT
    // record again when both the file and the metadata's copy are lost.
    ChunkingParams chunking;
    bool chunking_given = false;
    // Check a store directory that another user owns or that group or
    // others may write (--unsafe-store-dir; store/store_dir.h refuses one).
    bool any_store_owner = false;
    // An encrypted store's key (--key-file): its chunks are opened and its
    // keyed fingerprints checked with it. Null: no key; an encrypted store
    // is then refused.
    std::shared_ptr<const StoreKey> key;
    // Or its passphrase (--key ask), which opens the key from the store's
    // key slot.
    std::shared_ptr<const Passphrase> passphrase;
};

struct FsckProblem {
    std::string what;  // one line, naming the inode/path/chunk
    bool repaired = false;
    // Found by a check only: --repair has a repair for it.
    bool repairable = false;
};

struct FsckReport {
    // What was checked.
    std::uint64_t inodes = 0, dirents = 0, extents = 0, chunks = 0, fingerprints = 0, dirty = 0,
                  orphans = 0, xattrs = 0, segments = 0;
    std::uint64_t scrubbed_chunks = 0, scrubbed_bytes = 0;
    std::vector<FsckProblem> problems;
    // Worth knowing, not errors (e.g. stale dirty records the background
    // pass will skip, inodes waiting to be freed at the next mount).
    std::vector<std::string> notes;

    std::size_t unrepaired() const;
    // Unrepaired problems that --repair would fix.
    std::size_t repairable() const;
    // As e2fsck: 0 clean, 1 errors found and all repaired, 4 errors left.
    int exit_code() const;
};

// The last line of the tool's report: clean, all repaired, or what is left
// and where it leads (--repair for what it can fix; a backup for the rest).
std::string fsck_verdict(const FsckOptions& options, const FsckReport& report);

// A non-ok Status is an operational error (exit 8): the store is missing,
// is not a hiodsfs store, has a newer format, or is in use (mounted); with
// a tier, a cache_dir that is not the tier's copy of the store.
Status run_fsck(const FsckOptions& options, FsckReport* report);

}  // namespace hiodsfs
