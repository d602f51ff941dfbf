// WriteBehind: deferred writes' metadata held in memory and applied in
// batches (docs/architecture.md, "Write-behind").
//
// A deferred write appends its bytes to the segment store and holds its
// metadata (the raw chunk records, the extents, the range for the pass, the
// inode's size and times) here: the request needs neither the metadata
// lock nor a transaction. MetaStore applies what is held (apply(), as the
// store's HeldBack), many writes in one operation, before any other
// operation begins and before each group commit, so every reader sees the
// writes and a commit, fsync's included, carries each acknowledged one.
// Thread-safety: every method may be called from any thread; apply() runs
// under the metadata lock (MetaStore calls it). Lock order: raw_ids_mu_,
// then the metadata lock (reserving ids may take it), then held_mu_ or
// PendingDirty::mu.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/pending_dirty.h"
#include "chunk/codec.h"
#include "engine/write_errors.h"
#include "hiodsfs/segment_store.h"
#include "meta/meta_store.h"

namespace hiodsfs {

// A deferred write's metadata while it is held back: one raw piece of it,
// already appended to the segment store.
struct HeldWrite {
    InodeId ino;
    std::uint64_t off;        // file offset of the piece
    ChunkId chunk;
    ChunkLocation loc;        // of its record (sealed, in an encrypted store: longer than the piece)
    std::uint32_t length;     // the piece's bytes
    std::uint64_t end;        // the request's end: the file is at least this long
    bool touch;               // the write sets mtime and ctime to time
    struct timespec time;
};

// What WriteBehind works with, all owned by the engine and outliving it.
struct WriteBehindParts {
    MetaStore* meta = nullptr;
    SegmentStore* segs = nullptr;
    PendingDirty* pending = nullptr;  // records queued and not yet taken by the pass
    WriteErrors* errors = nullptr;    // held writes lost, told to the files open then
    std::function<void(const std::string&)> log;  // may be empty
    std::function<void(InodeId)> attrs_changed;   // a file's writes were lost; may be empty
    std::function<int(InodeId)> held_write_fault;  // a test's injected failure; may be empty
    std::function<void()> wake_pass;              // something is held for the pass
    const ChunkCipher* cipher = nullptr;          // an encrypted store's: pieces are sealed
};

class WriteBehind final : public HeldBack {
public:
    explicit WriteBehind(WriteBehindParts parts) : p_(std::move(parts)) {}

    // Appends [off, off + len) of ino as raw pieces of at most piece bytes
    // and holds their metadata; touched (if given) is the time the write
    // sets. On a failure nothing of the request is held.
    Status hold(InodeId ino, std::uint64_t off, const std::uint8_t* data, std::size_t len, std::size_t piece,
                const struct timespec* touched);
    // Applies what is held once a batch is full. Never under a Stream lock:
    // a writer applying a batch must not keep its file's other writers out.
    Status apply_if_full();

    // ---- HeldBack ----
    // Held, being appended by a hold under way, or taken by an apply that
    // has not finished: an operation must wait for all three (MetaStore's
    // begin applies them first). A hold's pieces are in the segment store
    // before it returns, and an operation that began without them would
    // find their segment emptier than it is: compaction sealed and deleted
    // such a segment under the writes.
    bool holding() const override {
        return held_count_.load(std::memory_order_acquire) != 0 ||
               holds_under_way_.load(std::memory_order_acquire) != 0 ||
               held_in_apply_.load(std::memory_order_acquire) != 0;
    }
    void apply(MetaStore& store, bool for_commit) override;

    // Where the segment store's appends stood when the group about to
    // commit took the last held writes: all the group refers to lies before
    // it (the commit's frontier). Read under the metadata lock, after the
    // apply for the commit.
    SegmentPosition drained_at() const { return drained_at_; }

    // For status.json.
    std::uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
    std::uint64_t applied() const { return applied_.load(std::memory_order_relaxed); }
    std::uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }
    // Runs of writes whose range a record still queued already covered.
    std::uint64_t covered() const { return covered_.load(std::memory_order_relaxed); }

private:
    Status next_raw_chunk_id(ChunkId* out);
    // One transaction for n held writes, sorted by inode.
    Status apply_held(MetaStore& store, const HeldWrite* w, std::size_t n);

    const WriteBehindParts p_;
    std::mutex raw_ids_mu_;
    ChunkId raw_ids_next_ = 0, raw_ids_end_ = 0;  // reserved (MetaStore::take_chunk_ids)
    // held_ is in append order.
    std::mutex held_mu_;
    std::vector<HeldWrite> held_, held_spare_;
    // Bytes appended for requests that then failed: dead, counted by the
    // next apply (under held_mu_, like held_).
    std::uint64_t held_dead_ = 0;
    std::atomic<std::size_t> held_count_{0};
    std::atomic<std::size_t> holds_under_way_{0};  // holds past their ids, not yet returned
    std::atomic<std::size_t> held_in_apply_{0};  // taken from held_, not yet applied (under the metadata lock)
    std::atomic<bool> held_applying_{false};  // a writer is applying a full batch
    SegmentPosition drained_at_;
    std::atomic<std::uint64_t> batches_{0}, applied_{0}, lost_{0}, covered_{0};
};

}  // namespace hiodsfs
