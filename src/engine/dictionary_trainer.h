// DictionaryTrainer: trains the store's zstd dictionaries (chunk/codec.h)
// from a sample of its own chunks (docs/architecture.md, "Compression").
// A store is due one once it holds policy.min_bytes of chunk content and no
// dictionary, or `growth` times the content it held when its newest one was
// trained: a handful over a store's life. A round reads live chunks picked
// at random (decoded; those that look incompressible are no sample), up to
// sample_bytes, trains with zstd's ZDICT, stores the dictionary in the
// metadata in one operation (meta/dictionaries.h) and only then adds it to
// the engine's DictionarySet: every chunk that names it is stored by a later
// operation of the same or a later group, so no commit, fsync log record or
// crash keeps such a chunk without it.
// Samples that train none (too few, or zstd refuses them) are no error of
// the store: logged once, and tried again once the content has doubled or
// an hour has passed.
// The daemon runs step() on a PacedWorker ("dict-train"): bounded steps,
// paced by the throttle like the background pass. A read-only store has no
// trainer.
// Thread-safety: step() and train_now() may be called from any thread; one
// runs at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "chunk/codec.h"
#include "hiodsfs/status.h"
#include "meta/dictionaries.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

struct DictionaryPolicy {
    std::uint64_t min_bytes = 0;  // 0: never
    std::uint64_t growth = 8;
    // zstd's default dictionary size, and samples of 100 times it (as
    // ZDICT's documentation advises; docs/benchmarks.md has the figures).
    std::size_t dictionary_bytes = 110 * 1024;
    std::size_t sample_bytes = 100 * 110 * 1024;
};

class DictionaryTrainer {
public:
    // Reads chunk id (its record rec) decoded into out (rec.length bytes);
    // ok with *skip set when it cannot be a sample (freed meanwhile, damaged).
    using ReadChunk =
        std::function<Status(ChunkId id, const ChunkRecord& rec, std::uint8_t* out, bool* skip)>;
    using Log = std::function<void(const std::string&)>;

    // stored: what the metadata held at open (the dictionaries are in dicts).
    // seal_with: an encrypted store's cipher, which seals what it stores.
    DictionaryTrainer(MetaStore& meta, DictionarySet& dicts, const StoredDictionaries& stored,
                      const DictionaryPolicy& policy, ReadChunk read, Log log,
                      const ChunkCipher* seal_with = nullptr);

    // One bounded piece of a round: starts one if the store is due (and no
    // failure asks to wait), reads a few samples, or trains and stores.
    // *did_work is false when there was nothing to do.
    Status step(bool* did_work);
    // A whole round now if the store is due, whatever an earlier failure
    // says; *trained says whether a dictionary was stored.
    Status train_now(bool* trained);
    // Whether a round is under way (from any thread): status.json's
    // dictionary_pending, so a caller waiting for the store to settle
    // waits for the dictionary and the recompression it brings.
    bool sampling() const { return sampling_now_.load(std::memory_order_relaxed); }

private:
    // Under mu_.
    bool due(std::uint64_t content, bool waiting_allowed) const;
    // A round under way, or one begun now if the store is due; false if none.
    bool start_if_due(bool waiting_allowed);
    void begin_round(std::uint64_t content, std::uint64_t chunk_count);
    // A step's picks and reads; *done once the round has its samples. A
    // failure ends the round.
    Status sample_some(bool* done);
    Status read_samples(bool* done);
    Status finish(bool* trained);
    void failed(const std::string& why);
    void end_round();

    MetaStore& meta_;
    DictionarySet& dicts_;
    const ChunkCipher* seal_with_;  // an encrypted store's: dictionaries are stored sealed
    const DictionaryPolicy policy_;
    const ReadChunk read_;
    const Log log_;

    std::mutex mu_;  // one step at a time; guards what follows
    std::uint32_t next_id_ = 1;
    std::uint64_t newest_trained_at_ = 0;
    std::mt19937_64 rng_;
    // The round under way.
    bool sampling_ = false;
    std::atomic<bool> sampling_now_{false};  // sampling_, for sampling()
    std::uint64_t round_content_ = 0;  // the content bytes when it began
    std::uint64_t round_target_ = 0;   // sample bytes it reads at most
    std::uint64_t picks_left_ = 0;
    std::uint64_t chunks_read_ = 0;  // this round's
    std::unordered_set<ChunkId> picked_;
    std::string samples_;
    std::vector<std::size_t> sizes_;
    // The last round that trained none.
    bool failure_logged_ = false;
    bool waiting_ = false;
    std::uint64_t failed_content_ = 0;
    std::chrono::steady_clock::time_point failed_time_{};
};

}  // namespace hiodsfs
