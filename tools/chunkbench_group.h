// hiodsfs-chunkbench --compression --group KiB[,KiB...]: what compressing
// several consecutive chunks of one file as one unit would save, against
// one chunk a payload (the store's format), and what it would cost reads
// and reclaim. The distinct chunks are taken in the order a store first
// meets them (files in path order, each file's new chunks in file order)
// and packed into units of up to G KiB of raw bytes: a unit never spans
// files, and a chunk larger than G, or one the entropy sample calls random
// (stored as it is), is a unit by itself. Each unit goes through the
// store's codec (ChunkEncoder: the 97 % rule, the prefix) at each method,
// zstd with and without the dictionary the caller trained.
//
// Per G, "per chunk" (G = 0) first: units, stored / raw (payloads; and with
// a 24-byte segment record header per unit); for a read of one chunk, the
// raw bytes decoded (its whole unit; a unit stored as it is: the chunk
// alone), the mean over chunks, the same if the decoder stopped at the
// chunk's end, and weighted by chunk size (a random 4 KiB read lands in a
// chunk in proportion to its size); the CPU of one chunk read (decode the
// unit, copy the chunk out), per chunk and per random 4 KiB read (as many
// as there are chunks, each reading the chunk it lands in); decompression
// MB/s per core (each unit once);
// compression CPU s per GiB. CPU is thread time, best of the repeats per
// 16 MiB slice, as in the rest of --compression.
//
// Then what grouping costs reclaim: a unit's space is free only once all
// its chunks are dead. A model of bench-space's second generation (seeded,
// the same on every run): 0.5 % of the files deleted and 4 % edited near
// the middle (the chunk at the middle of the file's chunk list replaced);
// once the first generation is deleted, the chunks only it held die. Per G:
// the dead bytes freed with whole units, those pinned in units that still
// hold a live chunk, and the live bytes compaction would have to decode
// and compress again to free them.
// Thread-safety: run on one thread.
#pragma once

#include <string>

#include "chunk/codec.h"
#include "chunkbench_chunks.h"
#include "chunkbench_codec.h"

namespace hiodsfs::bench {

// Prints the tables on stdout; false with *error if a unit does not come
// back as it was.
bool run_group_bench(const Chunks& c, const CodecBenchOptions& o, const DictionarySet& dicts,
                     std::string* error);

}  // namespace hiodsfs::bench
