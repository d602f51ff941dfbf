// hiodsfs-stat --estimate: what hiodsfs would store for existing trees.
// Every regular file is chunked and fingerprinted exactly as the engine's
// inline path does (the same Chunker, SHA-256, all-zero chunks become holes,
// hard links counted once), and the distinct chunks are added up, for one or
// several chunkings in one pass over the data. The walk follows no symlink
// and stays on each root's file system. The distinct chunks of the first
// chunking are also encoded with each compression method asked for
// (stat/compression_estimate.h).
//
// A cache remembers each file's chunk fingerprints (a 16-byte prefix of the
// SHA-256 and the length) keyed by path, device, inode, size, mtime and
// ctime, so a re-run reads only files that changed, and the stored size of
// each distinct chunk under the compression methods of the last run that
// had any. It is one file written to a temporary name and renamed over the
// old one, so an interrupted run (Ctrl-C, kill) leaves either the old or the
// new cache, never a torn one.
// Thread-safety: one Estimator per thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chunk/codec.h"
#include "common/parallel_loop.h"
#include "hiodsfs/chunker.h"
#include "hiodsfs/status.h"
#include "stat/compression_estimate.h"

namespace hiodsfs::stat {

struct EstimateResult {
    ChunkingParams chunking;
    std::uint64_t logical_bytes = 0;  // bytes hiodsfs would map (all-zero chunks excluded)
    std::uint64_t stored_bytes = 0;   // distinct chunk bytes
    std::uint64_t chunks = 0;         // chunks (all-zero ones excluded)
    std::uint64_t unique_chunks = 0;
    double ratio() const {
        return stored_bytes ? static_cast<double>(logical_bytes) / static_cast<double>(stored_bytes) : 1.0;
    }
};

struct EstimateProgress {
    std::uint64_t files_done = 0, files_total = 0;
    std::uint64_t bytes_done = 0, bytes_total = 0;  // bytes of all files (cached ones count at once)
    std::uint64_t bytes_read = 0, bytes_to_read = 0;  // file data actually read
    double elapsed_s = 0;
};

struct EstimateOptions {
    std::vector<std::string> roots;
    std::vector<ChunkingParams> chunkings;  // at least one
    // Methods to estimate for the first chunking (none: no compression figures).
    std::vector<Compression> compressions;
    unsigned helpers = ParallelLoop::default_helpers();  // threads encoding beside the reader
    std::string cache_path;                 // "" = no cache
    // Set from a signal handler to stop; the cache is still saved.
    const std::atomic<bool>* interrupt = nullptr;
    std::function<void(const EstimateProgress&)> progress;
    double progress_interval_s = 0.2;  // least time between progress calls (0: every read)
};

struct EstimateReport {
    std::vector<EstimateResult> results;  // one per chunking, in order
    std::vector<CompressionFigures> compression;  // of results[0], one per method, in order
    std::uint64_t files = 0;              // regular files (hard links once)
    std::uint64_t apparent_bytes = 0;     // their sizes
    std::uint64_t files_read = 0, files_cached = 0, bytes_read = 0;
    std::uint64_t skipped = 0;  // unreadable files (reported on stderr)
    double elapsed_s = 0;
    bool interrupted = false;
    bool cache_loaded = false;
    std::string cache_note;  // e.g. why an existing cache was ignored
};

Status run_estimate(const EstimateOptions& options, EstimateReport* out);

// What --compression estimates unless told: the write path's fast method
// and two strong levels for the background pass.
std::vector<Compression> default_estimate_compressions();
// "lz4,zstd:3" (a comma-separated list, each method once; "none" alone:
// no compression figures); one line naming what is wrong otherwise.
Status parse_compression_list(const std::string& text, std::vector<Compression>* out);

// The comparison set for --compare: fixed 4, 8, 16, 32 KiB and CDC at 4,
// 8, 16 and 32 KiB average (min avg/4, max avg*4).
std::vector<ChunkingParams> comparison_chunkings();
// Default cache file: $XDG_CACHE_HOME or ~/.cache, then hiodsfs/estimate.cache.
std::string default_cache_path();

std::string format_estimate_text(const EstimateReport& r);
std::string format_estimate_json(const EstimateReport& r);

}  // namespace hiodsfs::stat
