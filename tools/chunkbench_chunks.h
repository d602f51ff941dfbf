// The distinct chunks of a tree as hiodsfs-chunkbench --compression holds
// them, and its timing of runs of them (chunkbench_codec.cc and
// chunkbench_group.cc). Chunks are back to back in the order a store first
// meets them: files in path order, each file's new chunks in file order.
// Thread-safety: a Chunks is read by one thread at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/cpu_time.h"

namespace hiodsfs::bench {

struct Chunks {
    std::vector<char> bytes;
    std::vector<std::size_t> ends;       // chunk i is [begin(i), ends[i])
    std::vector<std::uint32_t> file_of;  // the file chunk i was first met in
    // Every chunk the files hold, duplicates included (all-zero ones and
    // those past --limit not), as indices of the distinct chunks, file
    // after file: file f's are [ref_ends[f - 1], ref_ends[f]).
    std::vector<std::uint32_t> refs;
    std::vector<std::size_t> ref_ends;
    std::uint64_t files = 0, file_bytes = 0, skipped = 0, cut = 0;
    std::size_t count() const { return ends.size(); }
    std::size_t begin(std::size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
    const char* data(std::size_t i) const { return bytes.data() + begin(i); }
    std::uint32_t len(std::size_t i) const {
        return static_cast<std::uint32_t>(ends[i] - begin(i));
    }
};

using Slices = std::vector<std::pair<std::size_t, std::size_t>>;

// Runs of items (chunk i or unit i is [ends[i - 1], ends[i]) of the bytes)
// of at least 16 MiB: each is timed on its own and counts with its best
// time over the repeats, so a slice that shared its core with a compiler
// once is measured again on the next repeat.
inline Slices slices_of(const std::vector<std::size_t>& ends) {
    constexpr std::size_t kSlice = std::size_t{16} << 20;
    Slices out;
    std::size_t first = 0, first_byte = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
        if (ends[i] - first_byte >= kSlice || i + 1 == ends.size()) {
            out.emplace_back(first, i + 1);
            first = i + 1;
            first_byte = ends[i];
        }
    }
    return out;
}

// Calls run(first, last) for every slice, `repeat` times over, and returns
// the sum of the slices' best thread CPU seconds. run(0, ...) starts a
// repeat.
template <class Run>
double best_cpu_seconds(const Slices& slices, int repeat, Run&& run) {
    std::vector<double> best(slices.size(), std::numeric_limits<double>::infinity());
    for (int rep = 0; rep < repeat; ++rep) {
        for (std::size_t s = 0; s < slices.size(); ++s) {
            const double t0 = thread_cpu_seconds();
            run(slices[s].first, slices[s].second);
            best[s] = std::min(best[s], thread_cpu_seconds() - t0);
        }
    }
    double sum = 0;
    for (const double b : best) sum += b;
    return sum;
}

}  // namespace hiodsfs::bench
