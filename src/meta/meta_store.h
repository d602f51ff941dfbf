// MetaStore: the LMDB environment under STORE/meta and its named databases.
//
// Group commit: one LMDB write transaction stays open and collects the
// changes of many operations; commit_group() makes them durable together.
// Each operation (Txn) changes the group directly and logs what each change
// overwrote, so it is atomic: a failure half-way puts that operation's
// changes back, and only its. Operations that change the store are
// serialized by the MetaStore mutex, which a Txn from begin() holds for its
// lifetime, and read through the same write transaction.
//
// Reads do not wait for them (begin_read() on a writable store): as an
// operation commits, what it changed is copied into the group's overlay,
// a map per database (see Overlay), and a read looks there first and then
// in an LMDB read transaction of the last committed state. A read so sees
// whole operations only, and never waits for a group commit's I/O; the
// overlay empties when its group has committed.
//
// The environment is opened with MDB_NOLOCK: exactly one process may have
// a store open (the engine holds STORE/lock), and within it the store keeps
// LMDB's rule itself: a read transaction is never older than the last
// commit when the next write transaction begins (see commit_group).
// Thread-safety: begin() and begin_read() may be called from any thread; a
// Txn is used by the thread that began it and must not outlive its scope,
// and a thread holds one Txn at a time.
#pragma once

#include <lmdb.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hiodsfs/space_counters.h"
#include "hiodsfs/types.h"
#include "hiodsfs/status.h"
#include "meta/db.h"
#include "meta/keys.h"
#include "meta/lmdb_guard.h"
#include "meta/overlay_cursor.h"
#include "meta/random_pages.h"
#include "meta/super_record.h"

namespace hiodsfs {

struct JournalRecord;

// Where a journaled store's group commits go before they commit locally
// (engine/meta_tier.h: objects in the segment tier).
class MetaJournal {
public:
    virtual ~MetaJournal() = default;
    // Makes the record of group `seq` durable; a failure fails the commit.
    virtual Status write(std::uint64_t seq, std::string_view record) = 0;
};

struct MetaStoreOptions {
    std::uint64_t map_bytes = 1ull << 40;
    bool read_only = false;
    // Make the environment if it does not exist. Off for a store that
    // already has its FORMAT record: its metadata must be there, and
    // making it anew would disown every segment.
    bool create = true;
    // How much of data.mdb's trees the open reads to check them before LMDB
    // maps the file (meta/lmdb_file_check.h: the trees whose pages together
    // fit in this many bytes, smallest first, are read whole, the others on
    // the paths to their first and last records); a file that fails is
    // refused with EUCLEAN and nothing touched. hiodsfs-fsck reads it all.
    static constexpr std::uint64_t kCheckBytes = 1ull << 30;
    std::uint64_t check_bytes = kCheckBytes;
    // Tests: called before each group commit; a non-zero errno makes that
    // commit fail as a failed mdb_txn_commit would (the group is gone).
    std::function<int()> commit_fault;
    // Tests: called as an operation that changed something becomes visible
    // to reads (begin_read), under the store's lock.
    std::function<void()> on_publish;
    // LMDB holds a group's dirty pages in memory until it commits, and with
    // random keys (fingerprints) each write dirties a page of its own: once
    // the open group holds this many writes (puts and deletes; 0: no limit)
    // on_group_full is called, once per group, under the store's lock, so
    // the caller can commit it early.
    std::uint64_t group_writes = 0;
    // ... or once it has dirtied about this many bytes of pages of the two
    // databases written at random places: fingerprints (hash keys) and
    // chunk records (a duplicate updates an old chunk's count); 0: no
    // limit. A page count LMDB does not tell, so it is estimated (see
    // meta/random_pages.h). Bounds the group's memory when the
    // index is large, where a bound on writes alone lets it grow with it.
    std::uint64_t group_dirty_bytes = 0;
    std::function<void()> on_group_full;
    // LMDB reads through a map of data.mdb, and every page the daemon has
    // touched stays mapped (RssFile) until the kernel needs the memory: a
    // large store's whole index, in the daemon's RSS. trim_resident() drops
    // the mappings (not the page cache) once more than this many bytes of
    // file pages are mapped; 0: never.
    std::uint64_t resident_bytes = 0;
};

class MetaStore;
class Txn;

// A record MetaStore::prepare_log() made, for logged() once it is in the
// segment stream.
struct LogMark {
    std::uint64_t seq = 0;
    std::size_t upto = 0;    // how much of the group's captured changes it holds
    std::uint64_t group = 0;  // which group it belongs to
};

// Metadata changes held back in memory by the store's user (the engine's
// write-behind of deferred writes) instead of being applied one operation
// at a time. The store applies them, under its lock, before any other
// operation begins and before a group commits, so every reader sees them
// and a commit includes everything acknowledged before it.
class HeldBack {
public:
    virtual ~HeldBack() = default;
    // Whether anything is held; read without the store's lock, often.
    virtual bool holding() const = 0;
    // Applies what is held, in transactions begun with
    // MetaStore::begin_held(). for_commit: a group commit follows at once.
    // Failures are the holder's to report (the operations were already
    // acknowledged); the store goes on either way.
    virtual void apply(MetaStore& store, bool for_commit) = 0;
};

// The fingerprint index is read by operations only (a write's lookup of a
// duplicate, fsck): it has no overlay, and begin_read() refuses it. It is
// about a third of what a write changes, in the largest records.
constexpr bool overlay_kept(Db db) { return db != Db::kFingerprints; }
constexpr bool overlay_ordered(Db db) {
    return db == Db::kDirents || db == Db::kExtents || db == Db::kDirty || db == Db::kXattrs ||
           db == Db::kHistory;
}

class MetaStore {
public:
    static Status open(const std::string& dir, const MetaStoreOptions& options,
                       std::unique_ptr<MetaStore>* out);
    // Creates the environment if it is missing (unless read_only).
    static Status open(const std::string& dir, std::uint64_t map_bytes, bool read_only,
                       std::unique_ptr<MetaStore>* out);
    // Aborts the open group: whatever was not committed is lost, as in a crash.
    ~MetaStore();

    // Starts an operation: takes the store's mutex; its changes go straight
    // into the open group, each remembering what it overwrote, so an
    // operation that fails half-way is undone alone (a nested LMDB
    // transaction would do the same at the cost of megabytes of page lists
    // set up per operation). A read-only store reads the group directly.
    Status begin(std::unique_ptr<Txn>* out);
    // Starts an operation that only reads. On a writable store it does not
    // take the mutex: it reads the last committed state with the open
    // group's committed operations over it (see the top of this file), so
    // it sees every operation committed before it began, whole, and none
    // that commits while it runs. A read-only store reads its snapshot.
    // Its put() and del() fail with EINVAL; commit() only ends it.
    // ReadFrom::kGroup reads as an operation does instead, under the mutex:
    // for the write path's own reads (an overwrite's look at the old bytes),
    // which wait for writers anyway and would pay the overlay's merge.
    enum class ReadFrom { kSnapshot, kGroup };
    Status begin_read(std::unique_ptr<Txn>* out, ReadFrom from = ReadFrom::kSnapshot);

    // From now on every change is captured and each group commit writes
    // its record to `journal` before it commits locally; a failed write
    // fails the commit (the store stops). Null (the default): nothing is
    // captured. Set before the store is shared between threads.
    void set_journal(MetaJournal* journal) { journal_ = journal; }
    // Applies a journal record (its changes and super record) in one
    // transaction of its own; only with no group open and no journal set
    // (recovery). The record's seq must follow the state's.
    Status replay(const JournalRecord& record);
    // The journal seq of the committed state.
    std::uint64_t committed_journal_seq();
    // Writes a packed copy of the committed state to `path` (a single
    // file, an LMDB environment of its own) and its journal seq to *seq.
    // Holds the store's lock while it copies: operations wait for it.
    Status snapshot(const std::string& path, std::uint64_t* seq);

    // The fsync log of a store without a journal (docs/architecture.md,
    // "The fsync log"): a group's changes are captured, as a journaled
    // store's are, and prepare_log() makes a journal record (meta/journal.h)
    // of the open group's changes since the last record logged, for the
    // caller to append to the segment stream and sync instead of committing
    // the group. Its seq is the last one logged (or committed) + 1, its
    // state has the frontier `before` sets; replay() applies such records
    // in order, and a commit records the last seq it includes. The caller
    // prepares and appends one record at a time, so the stream holds them
    // in seq order. (A record whose append failed is never logged: the next
    // one takes its seq. Stores of 0.4.0's first builds may hold a record
    // made again under the same seq, holding more: replay() applies both.)
    // Capture costs every change a copy, so only groups that follow an
    // fsync capture (and the first after open): an fsync in a group that
    // does not is told to commit instead, and the groups after it capture
    // until one passes without an fsync. Set before the store is shared
    // between threads, and not together with a journal.
    void set_logging(bool on) { logging_ = on; }
    bool logging() const { return logging_; }
    // The next group to open captures (the first after open, whatever the
    // open's own commits left).
    void capture_next_group();
    // Applies what is held back first. *record is empty when nothing
    // changed since the last record or commit; *commit_instead says that
    // the open group was not captured, so only a commit makes it durable.
    Status prepare_log(const std::function<Status(SuperState*)>& before, std::string* record, LogMark* mark,
                       bool* commit_instead);
    // The record of `mark` is in the segment stream (appended, not yet
    // synced): the next one continues after it. A mark of a group that has
    // committed since is ignored.
    void logged(const LogMark& mark);

    // What begin(), begin_read() and commit_group() apply first (see
    // HeldBack); set before the store is shared between threads.
    void set_held_back(HeldBack* held) { held_ = held; }
    // Applies what the HeldBack holds now.
    Status apply_held_back();
    // Within HeldBack::apply only (the store's lock is held): an operation
    // of the open group, as begin() makes, opening one if needed.
    Status begin_held(std::unique_ptr<Txn>* out);
    // Reserves n consecutive chunk ids for appends made outside any
    // operation (write-behind), without a transaction; returns the first.
    // Ids reserved and never used are gaps, which nothing minds.
    Status take_chunk_ids(std::uint64_t n, ChunkId* first);

    // Commits the open group. `before` runs first, under the lock, so the
    // caller can make the data the group refers to durable (and record how
    // far it is in the state being committed).
    // A failed commit loses the group's operations, which callers were told
    // had succeeded, so the store stops: from then on begin() and
    // commit_group() fail with EIO until it is opened again.
    // *reached_limit (if given) says whether the group it committed had
    // reached group_writes or group_dirty_bytes.
    Status commit_group(const std::function<Status(SuperState*)>& before, bool* reached_limit = nullptr);
    // Operations folded in since the last commit_group(), and their writes.
    std::uint64_t pending_ops();
    std::uint64_t pending_writes();
    // Pages of the random-key databases the open group has dirtied, as
    // estimated for group_dirty_bytes (0 when that is off or no group is open).
    std::uint64_t dirty_pages_estimate();
    // Heap bytes the open group's overlay takes (estimated), which count
    // toward group_dirty_bytes too.
    std::uint64_t overlay_bytes();
    bool read_only() const { return read_only_; }
    // The failure that stopped the store (ok while it runs).
    Status failure();
    // Stops the store as a failed commit does (EIO from then on, the open
    // group never committed), for a reason found outside it; a store
    // already stopped keeps its first reason.
    void stop(const std::string& why);
    // Unmaps the metadata pages if more than resident_bytes of file pages
    // are mapped (see MetaStoreOptions); a later read faults them back from
    // the page cache. True if it did.
    bool trim_resident();
    // Rewrites data.mdb as a packed copy (every record appended in key
    // order: full B-tree pages, no free ones) if it is at most keep_ratio of the file,
    // then closes the store: only the destructor may follow. Call it with
    // nothing uncommitted. The copy is synced before it is renamed over the
    // file, so a crash leaves one or the other (and open() removes a stray
    // copy). *before and *after get the file's sizes.
    static constexpr const char* kCompactCopyName = "data.mdb.compact";
    Status compact(double keep_ratio, std::uint64_t* before, std::uint64_t* after);
    // A copy of the in-memory state (counters), without a transaction.
    SuperState super_snapshot();
    // Whether the super record was there when the store was opened (a store
    // whose FORMAT exists but whose super record does not lost its metadata).
    bool had_super() const { return had_super_; }

private:
    friend class Txn;
    friend class Cursor;
    MetaStore();
    // A damaged page met (lmdb_damage(rc)) in `what`: EUCLEAN while the
    // store opens; once it runs, the store stops as after a failed commit
    // (EIO from then on, saying why) and the EIO is returned. Any thread,
    // with or without mu_ or the snapshot lock.
    Status damaged(int rc, const std::string& what);
    // Moves a stop damaged() recorded into failed_; damage found after a
    // lost group (often its cause, met by another thread) is named first.
    void take_damage_locked();  // caller holds mu_
    Status ensure_group();  // caller holds mu_
    bool trim_resident_locked();  // caller holds mu_
    Status check_running();  // caller holds mu_
    void apply_held_locked(bool for_commit);  // caller holds mu_
    // An operation of the open group (which it only reads when read-only).
    Status begin_op(std::unique_lock<std::mutex> lock, std::unique_ptr<Txn>* out);  // caller holds mu_
    // Aborts the open group (if any is left) after a failed commit or an
    // LMDB error that left it unusable, and stops the store: EIO from then on,
    // saying why and that the last interval's operations are lost.
    void lose_group_locked(const std::string& why);  // caller holds mu_
    void note_write(Db db, std::string_view key);  // caller holds mu_
    std::uint64_t dirty_pages_locked() const;
    void maybe_group_full();  // caller holds mu_

    // Reads through the overlay (begin_read on a writable store).
    // Called under mu_ once a write transaction has committed: every read
    // transaction of the pool moves to the new state and the overlay
    // empties, under the snapshot lock held exclusively.
    void new_snapshot_locked(bool committed);
    Status take_reader(MDB_txn** out);
    // The overlay's entry for key (under the snapshot lock), null if none.
    const std::optional<std::string>* overlay_find(Db db, std::string_view key) const;
    void give_back_reader(MDB_txn* txn);
    void close_readers();
    // Shared by each read for its lifetime; exclusive to change the
    // overlay or move the pool to a new state. Writers go first, so a
    // stream of reads cannot hold back the operations (which hold mu_
    // while they wait for it).
    pthread_rwlock_t snapshot_lock_;
    Overlay overlay_[static_cast<int>(Db::kCount)];  // the overlay_ordered() databases
    HashedOverlay hashed_[static_cast<int>(Db::kCount)];  // the others
    // Read transactions of the last committed state not in use, already
    // begun: taking one never waits for a commit.
    std::mutex pool_mu_;
    std::vector<MDB_txn*> pool_;
    // Held around each commit, whose I/O may take long (LMDB writes the
    // meta page last), and around beginning a read transaction, which must
    // not read that page half-written.
    std::mutex meta_page_mu_;
    std::atomic<bool> stopped_{false};  // failed_ is set: reads go to the mutex for it
    std::uint64_t overlay_bytes_ = 0;  // under mu_
    std::uint64_t page_bytes_ = 4096;

    std::mutex mu_;
    std::string dir_;
    Status failed_;
    bool failed_by_lost_group_ = false;  // failed_ is lose_group_locked's
    bool serving_ = false;  // open() has returned it
    // A damaged page met where mu_ may not be taken (a read beside the
    // operations), for take_damage_locked(); a leaf lock.
    std::mutex damage_mu_;
    Status damage_;
    // An LMDB call on the group's write transaction faulted: neither it nor
    // the environment may be freed (meta/lmdb_guard.h); the destructor
    // parks them. Under mu_.
    bool group_faulted_ = false;
    bool had_super_ = false;
    std::function<int()> commit_fault_;
    std::function<void()> on_publish_;
    std::uint64_t group_writes_limit_ = 0;
    std::uint64_t group_dirty_limit_ = 0;  // pages
    bool group_full_told_ = false;  // on_group_full called for the open group
    RandomPages fingerprint_pages_, chunk_pages_;
    std::uint64_t chunk_ids_at_start_ = 0;  // next_chunk when the group began
    // The first id of the last take_chunk_ids(): ids from there on may be
    // used in the next group, and count as appended there.
    std::uint64_t chunk_ids_taken_from_ = ~std::uint64_t{0};
    HeldBack* held_ = nullptr;
    bool applying_held_ = false;
    std::uint64_t blocks_appended_ = 0;  // distinct chunk blocks of new ids this group
    std::uint64_t last_block_appended_ = ~std::uint64_t{0};
    std::uint64_t resident_limit_ = 0;
    LmdbMap map_;  // where LMDB mapped data.mdb (trim_resident, the reads' checks)
    int statm_fd_ = -1;  // /proc/self/statm, read by trim_resident
    std::function<void()> on_group_full_;
    MDB_env* env_ = nullptr;
    MDB_dbi dbi_[static_cast<int>(Db::kCount)]{};
    MDB_txn* group_ = nullptr;
    SuperState super_;
    std::uint64_t pending_ops_ = 0;
    std::uint64_t pending_writes_ = 0;
    bool read_only_ = false;
    MetaJournal* journal_ = nullptr;
    bool logging_ = false;
    // The fsync log captures a group only when fsyncs come (set_logging).
    bool capture_next_group_ = true;
    bool capture_group_ = false;
    bool fsync_in_group_ = false;
    bool capturing() const { return journal_ != nullptr || (logging_ && capture_group_); }
    void end_group_capture();
    std::string group_journal_;  // the open group's captured changes
    // The fsync log: the last seq appended to the segment stream, how much
    // of group_journal_ it holds, and the number of the open group (a
    // commit or a lost group starts the next). A commit counts every seq
    // handed out (prepared_seq_), appended or not.
    std::uint64_t logged_seq_ = 0;
    std::uint64_t prepared_seq_ = 0;
    std::uint64_t replayed_seq_ = 0;  // the seq replay() applied last
    std::size_t logged_upto_ = 0;
    std::uint64_t group_number_ = 0;
    std::uint64_t committed_seq_ = 0;  // journal_seq of the committed state
};

}  // namespace hiodsfs

// Every user of the store needs the operation it begins (Txn), which in
// turn needs the store.
#include "meta/txn.h"
