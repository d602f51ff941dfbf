// Command line of the hiodsfs daemon (src/fuse), which hiodsfs-stat
// --estimate parses too for its chunking options:
//   hiodsfs STORE MOUNTPOINT [-o opt,...] [-f] [-d] [-s] [--help] [--version]
// hiodsfs's own options are accepted both as long flags (--chunking=cdc,
// --chunk-size=64K) and inside -o (as mount.fuse3 and fstab pass them);
// they are taken out of the -o list, options that fstab/mount add for
// themselves are dropped, and the rest goes to libfuse.
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hiodsfs/chunker.h"
#include "hiodsfs/compression.h"
#include "hiodsfs/control.h"
#include "hiodsfs/engine.h"
#include "store/rados_source.h"

namespace hiodsfs::cli {

struct DaemonOptions {
    std::string store;
    std::string mountpoint;
    bool foreground = false;
    bool debug = false;
    bool single_thread = false;
    bool show_help = false;
    bool show_version = false;

    ChunkingParams chunking;  // meaningful only if chunking_given
    bool chunking_given = false;
    // hybrid is the design's default; without a goal it stays inline.
    DedupMode mode = DedupMode::kHybrid;
    ControlConfig control;  // target_ops, target_bytes, control_interval
    std::string policy;     // "" = the engine's default
    // How the write path and the background pass (and compaction) store
    // new chunks (docs/benchmarks.md "Compression methods" has the figures
    // the defaults come from).
    Compression compression{CompressionMethod::kLz4, 0};
    Compression compression_background{CompressionMethod::kZstd, 6};
    // A zstd dictionary is trained once the store holds this much chunk
    // content (0: never; docs/architecture.md, "Compression").
    std::uint64_t dictionary_min_bytes = EngineOptions{}.dictionary_min_bytes;
    unsigned background_threads = 2;
    int background_nice = EngineOptions{}.background_nice;
    // The backlog's limit: a size, or a percentage of the space it could
    // take (EngineOptions::backlog_max_*).
    std::uint64_t backlog_max_bytes = EngineOptions{}.backlog_max_bytes;
    unsigned backlog_max_percent = EngineOptions{}.backlog_max_percent;
    // Compact segments with less than this percentage live (0: only delete dead ones).
    unsigned compact_threshold = 50;
    std::uint32_t commit_interval_ms = 1000;
    std::uint64_t commit_writes = EngineOptions{}.commit_writes;
    std::uint64_t meta_resident_bytes = EngineOptions{}.meta_resident_bytes;
    std::uint64_t meta_dirty_bytes = EngineOptions{}.meta_dirty_bytes;
    std::uint64_t meta_compact_max_bytes = EngineOptions{}.meta_compact_max_bytes;
    std::uint64_t meta_map_bytes = EngineOptions{}.lmdb_map_bytes;
    bool writeback_cache = true;
    std::uint32_t max_write = 1u << 20;
    unsigned threads = 10;
    // Microseconds the request thread that reads next polls /dev/fuse
    // before it sleeps; with it only one thread waits for a request at a
    // time (fuse/reader_gate.h). 0: off, every idle thread waits in read.
    // Off by default: rsync's three processes need the CPU the polling
    // takes on a 2-core machine (docs/benchmarks.md, "tree ingest").
    unsigned request_poll_us = 0;
    // Seconds the kernel may trust a name or attributes it was told. A day:
    // the store is this daemon's alone (its lock, or the RADOS lease), so
    // every change passes through this mount's kernel, which updates or
    // drops what it cached; the one change the daemon makes itself (an
    // acknowledged write it could not apply) drops the kernel's copy
    // (EngineOptions::attrs_changed). docs/architecture.md, "Kernel caches".
    double entry_timeout = 86400;
    double attr_timeout = 86400;
    bool read_only = false;
    // Mount over a directory that has entries (hidden while mounted).
    bool nonempty = false;
    // Accept a store directory that another user owns or that group or
    // others may write (store/store_dir.h refuses one).
    bool unsafe_store_dir = false;

    // A store given as rados:POOL/STORE keeps its sealed segments as objects
    // of that pool; the store directory (metadata, the active segment, the
    // segments cached) is cache_dir, which `store` then names.
    bool rados = false;
    std::string rados_source;  // "rados:POOL/STORE" as given (the mount's source)
    std::string rados_pool, rados_store;
    std::string ceph_conf = kDefaultCephConf;
    std::string ceph_id = kDefaultCephId;
    std::string cache_dir;
    // -o key_file=FILE: the key that encrypts a new store or opens an
    // encrypted one (store/key_file.h says what FILE must be).
    std::string key_file;
    // -o key=ask: a passphrase (cli/passphrase.h) opens the store's key from
    // its key slot, or makes a new store with a random key and a slot.
    bool key_ask = false;
    std::uint64_t cache_size = 1ull << 30;
    unsigned rados_timeout = kDefaultRadosTimeoutSeconds;  // seconds; bounds connecting and each operation
    // Seconds the store's lock outlives a daemon that stopped renewing it.
    unsigned rados_lease = kDefaultRadosLeaseSeconds;

    // Accepted but probably not meant (one line each, no program name): the
    // daemon prints them at start-up.
    std::vector<std::string> warnings;

    // For libfuse, in -o form ("allow_other", "fsname=..."), escaped as
    // fuse_opt expects (a literal ',' or '\' preceded by '\').
    std::vector<std::string> fuse_options;
};

// Parses argv. Returns false with a one-line *error (no program name, no
// newline) on any invalid option or value. A STORE of rados:POOL/STORE
// needs cache_dir, and sets `store` to it.
bool parse_command_line(int argc, const char* const* argv, DaemonOptions* out, std::string* error);

// The --help text.
std::string usage_text();

// The names of hiodsfs's own options (-o name[=value], --name[=value]), in
// --help's order: the one table the parser, the long flags and --help use.
std::vector<std::string> option_keys();

// Splits an -o list at unescaped commas; items keep their escapes.
std::vector<std::string> split_option_list(const std::string& list);

// The -o argument for libfuse: the pass-through options plus
// default_permissions, fsname=STORE and subtype=hiodsfs unless given.
std::string fuse_option_string(const DaemonOptions& options);

}  // namespace hiodsfs::cli
