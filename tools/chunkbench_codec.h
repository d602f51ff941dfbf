// hiodsfs-chunkbench --compression: single-threaded speed and ratio of the
// chunk codec (chunk/codec.h) on the distinct chunks of a tree, cut as the
// daemon cuts them, and on random bytes, where the entropy sample should
// make compression nearly free (the same methods without the sample, called
// straight through liblz4 and libzstd, show what it saves). With a
// dictionary size, zstd is measured with a trained dictionary too; with
// group sizes, units of several chunks as well (chunkbench_group.h).
// Thread-safety: run on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chunk/codec.h"
#include "hiodsfs/chunker.h"

namespace hiodsfs::bench {

struct CodecBenchOptions {
    std::vector<std::string> roots;  // trees whose chunks are measured
    ChunkingParams chunking;         // the daemon's default CDC
    std::vector<Compression> methods;
    int repeat = 3;                // each slice of chunks counts with its best CPU time
    std::size_t random_mib = 256;  // random bytes measured after the tree (0: none)
    std::size_t limit_mib = 0;     // at most this many MiB of distinct chunks (0: all)
    // zstd also with a dictionary of this size trained on 1 % of the
    // distinct chunks (0: not).
    std::size_t dictionary_kib = 0;
    // Also each tree's chunks grouped into compression units of up to
    // these many KiB of one file's consecutive chunks (chunkbench_group.h).
    std::vector<std::size_t> group_kib;
};

// lz4 and zstd at levels 1, 3, 6, 9 and 19.
std::vector<Compression> default_bench_methods();

// Prints the tables on stdout; 1 with one line on stderr if a root cannot
// be walked or the codec does not give back what it was given.
int run_codec_bench(const CodecBenchOptions& options);

// n bytes of SplitMix64 output: the same data on every run.
std::vector<std::uint8_t> make_random_data(std::size_t n);

}  // namespace hiodsfs::bench
