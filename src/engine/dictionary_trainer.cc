#include "engine/dictionary_trainer.h"

#include <algorithm>
#include <cstdio>

#include "common/units.h"
#include "meta/chunk_table.h"
#include "meta/keys.h"

namespace hiodsfs {
namespace {

// Chunks picked and read per step: a few MiB at most, so a step stays short
// and the throttle gets a say between steps.
constexpr std::size_t kPicksPerStep = 32;
// Picks per round at most (a store of random bytes offers no sample).
constexpr std::uint64_t kMostPicks = 8192;
// A round that has read this many chunks and found fewer than one in
// kFewestSampleShare worth a sample ends there: a store of random or
// compressed data would otherwise be read kMostPicks chunks at a time,
// every time it is tried again.
constexpr std::uint64_t kEnoughReadsToJudge = 256;
constexpr std::uint64_t kFewestSampleShare = 16;
// Less than this is too little to learn from.
constexpr std::size_t kFewestSamples = 16;
constexpr std::size_t kFewestSampleBytesPerDictionaryByte = 4;
// After a round that trained none: again once the content has doubled, or
// after this long (a store taking random data in would otherwise be
// sampled at every quarter of its growth, in vain).
constexpr auto kRetryAfter = std::chrono::hours(1);

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", s);
    return buf;
}

}  // namespace

DictionaryTrainer::DictionaryTrainer(MetaStore& meta, DictionarySet& dicts,
                                     const StoredDictionaries& stored,
                                     const DictionaryPolicy& policy, ReadChunk read, Log log,
                                     const ChunkCipher* seal_with)
    : meta_(meta),
      dicts_(dicts),
      seal_with_(seal_with),
      policy_(policy),
      read_(std::move(read)),
      log_(std::move(log)),
      next_id_(stored.highest_id + 1),
      newest_trained_at_(stored.newest_trained_at),
      rng_(std::random_device{}()) {}

bool DictionaryTrainer::due(std::uint64_t content, bool waiting_allowed) const {
    if (policy_.min_bytes == 0 || content < policy_.min_bytes || next_id_ == 0) return false;
    // A store whose every dictionary is damaged counts as one without.
    if (dicts_.size() > 0 && content / policy_.growth < newest_trained_at_) return false;
    if (waiting_allowed && waiting_ && content < 2 * failed_content_ &&
        std::chrono::steady_clock::now() - failed_time_ < kRetryAfter)
        return false;
    return true;
}

void DictionaryTrainer::begin_round(std::uint64_t content, std::uint64_t chunk_count) {
    sampling_ = true;
    sampling_now_ = true;
    round_content_ = content;
    round_target_ = std::min<std::uint64_t>(policy_.sample_bytes, content);
    // Every live chunk of a small store, if it takes that; never unbounded.
    picks_left_ = std::min<std::uint64_t>(kMostPicks, 4 * chunk_count + 256);
    chunks_read_ = 0;
    picked_.clear();
    samples_.clear();
    sizes_.clear();
    samples_.reserve(static_cast<std::size_t>(round_target_));
}

void DictionaryTrainer::end_round() {
    // The samples' memory goes back (11 MiB, a handful of times in a
    // store's life), not just their contents.
    sampling_ = false;
    sampling_now_ = false;
    std::unordered_set<ChunkId>().swap(picked_);
    std::string().swap(samples_);
    std::vector<std::size_t>().swap(sizes_);
}

bool DictionaryTrainer::start_if_due(bool waiting_allowed) {
    if (sampling_) return true;
    // A store that stopped takes no change: a round would train for nothing.
    if (!meta_.failure().is_ok()) return false;
    const SpaceCounters c = meta_.super_snapshot().counters;
    if (!due(c.content_bytes, waiting_allowed)) return false;
    begin_round(c.content_bytes, c.chunk_count);
    return true;
}

Status DictionaryTrainer::sample_some(bool* done) {
    Status st = read_samples(done);
    if (!st) end_round();  // begun again from the start
    return st;
}

Status DictionaryTrainer::read_samples(bool* done) {
    std::vector<StoredChunk> picks;
    {
        // Before the Txn: the snapshot takes the store's lock, which a
        // read of the group holds.
        const ChunkId end = meta_.super_snapshot().next_chunk;
        // In the group's own view: a cursor of an overlay read would copy
        // the group's chunk records first.
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_.begin_read(&t, MetaStore::ReadFrom::kGroup));
        Cursor c = t->cursor(Db::kChunks);
        std::vector<StoredChunk> block;
        for (std::size_t i = 0; i < kPicksPerStep && picks_left_ > 0 && end > 1;
             ++i, --picks_left_) {
            // A random id, and a random chunk of the block at or after it
            // (ids freed leave gaps).
            if (!c.seek(chunk_block_key(1 + rng_() % (end - 1))) && !c.first()) break;
            std::uint64_t b = 0;
            block.clear();
            if (!parse_key_u64(c.key(), &b) || !decode_chunk_block(b, c.value(), &block) ||
                block.empty())
                continue;
            const StoredChunk& pick = block[rng_() % block.size()];
            const ChunkRecord& r = pick.second;
            if ((r.flags & ChunkRecord::kDamaged) || r.lost() || r.length == 0 ||
                !picked_.insert(pick.first).second)
                continue;
            picks.push_back(pick);
        }
        HIODSFS_TRY(c.status());
        if (end <= 1) picks_left_ = 0;
    }
    std::vector<std::uint8_t> buf;
    for (const auto& [id, r] : picks) {
        if (samples_.size() >= round_target_) break;
        buf.resize(r.length);
        bool skip = false;
        HIODSFS_TRY(read_(id, r, buf.data(), &skip));
        ++chunks_read_;
        // Random or compressed bytes teach a dictionary nothing, and are
        // stored raw anyway.
        if (skip || looks_incompressible(reinterpret_cast<const char*>(buf.data()), r.length))
            continue;
        samples_.append(reinterpret_cast<const char*>(buf.data()), buf.size());
        sizes_.push_back(buf.size());
    }
    if (chunks_read_ >= kEnoughReadsToJudge && sizes_.size() * kFewestSampleShare < chunks_read_) picks_left_ = 0;
    *done = picks_left_ == 0 || samples_.size() >= round_target_;
    return Status::ok();
}

void DictionaryTrainer::failed(const std::string& why) {
    waiting_ = true;
    failed_content_ = round_content_;
    failed_time_ = std::chrono::steady_clock::now();
    if (!failure_logged_ && log_)
        log_("hiodsfs: no compression dictionary trained yet: " + why +
             "; new zstd chunks are compressed without one, and training is tried again as the "
             "store grows");
    failure_logged_ = true;
}

Status DictionaryTrainer::finish(bool* trained) {
    *trained = false;
    const std::size_t fewest_bytes = kFewestSampleBytesPerDictionaryByte * policy_.dictionary_bytes;
    if (sizes_.size() < kFewestSamples || samples_.size() < fewest_bytes) {
        failed("the store offered " + std::to_string(sizes_.size()) +
               " chunks worth compressing (" + human_bytes(static_cast<double>(samples_.size())) +
               ") of " + std::to_string(chunks_read_) + " read, and one needs at least " +
               std::to_string(kFewestSamples) + " and " + human_bytes(static_cast<double>(fewest_bytes)));
        end_round();
        return Status::ok();
    }
    std::string bytes;
    std::shared_ptr<const Dictionary> d;
    const auto began = std::chrono::steady_clock::now();
    Status st = train_dictionary(samples_, sizes_, policy_.dictionary_bytes, &bytes);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (st) st = Dictionary::make(next_id_, bytes, &d);
    if (!st) {
        failed(st.message());
        end_round();
        return Status::ok();
    }
    const std::size_t samples = sizes_.size(), sample_bytes = samples_.size();
    end_round();
    {
        // One operation: the dictionary is in the metadata whole, or not at all.
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_.begin(&t));
        HIODSFS_TRY(put_dictionary(*t, d->id(), round_content_, bytes, seal_with_));
        HIODSFS_TRY(t->commit());
    }
    // Only now may a chunk name it: its operation comes after this one.
    dicts_.add(d);
    newest_trained_at_ = round_content_;
    next_id_ += 1;
    waiting_ = false;
    failure_logged_ = false;
    *trained = true;
    if (log_)
        log_("hiodsfs: compression dictionary " + std::to_string(d->id()) + " trained (" +
             human_bytes(static_cast<double>(bytes.size())) + ", from " + std::to_string(samples) +
             " chunks, " + human_bytes(static_cast<double>(sample_bytes)) + " in " +
             seconds_text(took) + "): new zstd chunks are compressed with it");
    return Status::ok();
}

Status DictionaryTrainer::step(bool* did_work) {
    std::lock_guard<std::mutex> l(mu_);
    *did_work = start_if_due(true);
    if (!*did_work) return Status::ok();
    bool done = false;
    HIODSFS_TRY(sample_some(&done));
    if (!done) return Status::ok();
    bool trained = false;
    return finish(&trained);
}

Status DictionaryTrainer::train_now(bool* trained) {
    std::lock_guard<std::mutex> l(mu_);
    *trained = false;
    if (!start_if_due(false)) return Status::ok();
    for (bool done = false; !done;) HIODSFS_TRY(sample_some(&done));
    return finish(trained);
}

}  // namespace hiodsfs
