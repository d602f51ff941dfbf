// FaultInjectionEnv: an Env for tests that wraps a real one (usually
// Env::posix()) and can (1) make chosen writes or syncs fail, and (2) simulate
// a power loss that throws away everything that was not made durable, in the
// spirit of LevelDB's db/fault_injection_test.cc.
//
// All operations are forwarded to the base Env, so files look normal while
// the test runs. Alongside, the wrapper keeps an undo log of what is not yet
// durable, and drop_unsynced() applies it to the base files.
//
// Durability model (what drop_unsynced() assumes the disk guarantees):
//   * File data: File::sync() (fdatasync) makes every byte written to that
//     file so far durable, through any handle of the file. Writes after the
//     last successful sync of a file are not durable: after a crash a random
//     number of them survive, in write order, the first one lost possibly
//     torn at any byte (so a record can be cut in the middle). Overwrites of
//     durable bytes and truncates are undone the same way (old bytes come
//     back). A failed sync makes nothing durable.
//   * Directory entries: a file created by open(kReadWrite or kCreateNew),
//     a rename and an unlink are durable only after sync_dir() of the parent
//     directory (of both directories for a rename across directories).
//     After a crash a random prefix of the not-yet-durable entry operations
//     survives, in order; the others are undone: a new file vanishes (even
//     if its data was synced), a rename is reverted (a file it replaced
//     comes back), an unlinked file comes back.
//   * Files are independent: each keeps its own random prefix.
//   * Not modeled: mkdir() is durable at once; files that existed before
//     the wrapper was created count as durable until written through it;
//     renaming a directory is passed through, but files opened under its old
//     name keep their old paths here; I/O that bypasses this Env (LMDB) is
//     untouched by drop_unsynced().
// Paths are compared after lexical normalization ("a//b/" == "a/b"), not
// resolved: use one spelling per file (absolute paths, as the store does).
// Unlinked files and files replaced by rename are kept in the base directory
// under hidden names ("<name>.fienv-deleted-<n>") until their directory is
// synced; list_dir() and exists() do not show them. An overwrite of existing
// bytes keeps a copy of them in memory until the next sync of the file.
//
// Typical crash test:
//   FaultInjectionEnv env(Env::posix());
//   env.set_forward_syncs(false);     // optional: skip the real fdatasync
//   ... open the component on &env, write, sync, write more ...
//   component.reset();                // close it (its handles die anyway)
//   env.drop_unsynced(seed);          // the power loss
//   ... reopen on &env: everything synced must be there ...
//
// Fault injection counts calls: pwrite calls form one sequence, and
// File::sync() and sync_dir() calls together form another. "n" in
// fail_write_at()/fail_sync_at() is relative to the count at the time of the
// call (0 = the next call).
//
// Thread-safety: every method may be called from any thread. Writes, syncs
// and namespace operations are serialized by one mutex (this is a test tool);
// reads are not.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hiodsfs/env.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

enum class WriteFault {
    kNoSpace,       // nothing is written; ENOSPC
    kIoError,       // nothing is written; EIO
    kShortWrite,    // the first half of the data (len / 2 bytes) is written; EIO
    kNotPermitted,  // nothing is written; EPERM, as for a file made immutable (chattr +i)
};

class FaultInjectionEnv final : public Env {
public:
    // base must outlive this object.
    explicit FaultInjectionEnv(Env* base);
    ~FaultInjectionEnv() override;
    FaultInjectionEnv(const FaultInjectionEnv&) = delete;
    FaultInjectionEnv& operator=(const FaultInjectionEnv&) = delete;

    // --- Env ---
    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override;
    Status unlink(const std::string& path) override;
    Status rename(const std::string& from, const std::string& to) override;
    Status mkdir(const std::string& path) override;
    Status list_dir(const std::string& path, std::vector<std::string>* names) override;
    bool exists(const std::string& path) override;
    Status sync_dir(const std::string& path) override;

    // --- Fault injection ---
    // The n-th pwrite from now (0 = the next one) fails as `kind`. With
    // permanent, that write and every later one fail the same way until
    // clear_faults(). Replaces an earlier write fault.
    void fail_write_at(std::uint64_t n, WriteFault kind, bool permanent = false);
    // The n-th sync from now (File::sync and sync_dir count together) fails
    // with errno `err` and makes nothing durable. With permanent, every later
    // sync fails too until clear_faults(). Replaces an earlier sync fault.
    void fail_sync_at(std::uint64_t n, int err = EIO, bool permanent = false);
    void clear_faults();
    // Called at the start of every pwrite, outside the Env's lock, before
    // any fault: a test can hold a writer there (empty: none).
    void set_before_write(std::function<void()> hook);

    // Calls seen since construction (failed ones included).
    std::uint64_t write_count() const;
    std::uint64_t sync_count() const;
    // Bytes files were asked to start writing back (File::start_writeback):
    // a hint, which makes nothing durable here either.
    std::uint64_t writeback_bytes() const;
    // How many writes and syncs were made to fail so far.
    std::uint64_t injected_faults() const;
    // The error the last injected fault returned ("" before any): tests
    // whose outcome depends on which call failed (a file's sync or a
    // directory's) read it.
    std::string last_injected_fault() const;

    // When false, File::sync() and sync_dir() are recorded (and can be made
    // to fail) but not passed to the base Env: the simulated durability is
    // all a crash test needs, and a real fdatasync costs milliseconds.
    // Default true.
    void set_forward_syncs(bool forward);

    // --- Crash simulation ---
    // Simulates a power loss as described at the top of this file: every
    // not-durable write is undone except a random prefix per file (chosen
    // from seed, reproducibly), and not-durable directory entry operations
    // are undone except a random prefix. Afterwards everything counts as
    // durable, write and sync faults are cleared, and the Env works normally
    // again. File handles opened before the call are dead: every operation
    // on them fails with EIO (close the stores using them, then reopen).
    Status drop_unsynced(std::uint64_t seed);
    // The worst case of drop_unsynced(): nothing that was not durable survives.
    Status drop_all_unsynced();

    // Bytes written but not yet durable, summed over all files (for tests
    // that want to check that a sync really covered everything).
    std::uint64_t unsynced_bytes() const;

private:
    class FaultFile;
    struct Node;
    struct EntryOp;

    // Entry points for FaultFile; each takes mu_.
    Status file_pwrite(FaultFile* f, const void* data, std::size_t len, std::uint64_t offset);
    Status file_sync(FaultFile* f);
    Status file_truncate(FaultFile* f, std::uint64_t length);

    // The following require mu_ held.
    Status node_for(const std::string& path, File* base_file, std::shared_ptr<Node>* out);
    bool take_write_fault();  // counts the write; true if it must fail
    bool take_sync_fault();   // counts the sync; true if it must fail
    std::string hidden_name(const std::string& path);
    void move_node(const std::string& from, const std::string& to);
    Status entry_durable(EntryOp& op);
    Status crash(std::uint64_t seed, bool worst_case);

    Env* const base_;
    mutable std::mutex mu_;
    std::function<void()> before_write_;  // set before the writers start
    // Handles remember the epoch they were opened in; drop_unsynced() starts
    // a new one so stale handles fail instead of writing after the "crash".
    std::atomic<std::uint64_t> epoch_{0};

    std::uint64_t writes_ = 0;
    std::atomic<std::uint64_t> writeback_bytes_{0};
    std::uint64_t syncs_ = 0;
    std::uint64_t injected_ = 0;
    std::string last_injected_;
    bool forward_syncs_ = true;

    std::optional<std::uint64_t> write_fault_at_;  // absolute write index
    WriteFault write_fault_kind_ = WriteFault::kIoError;
    bool write_fault_permanent_ = false;
    std::optional<std::uint64_t> sync_fault_at_;  // absolute sync index
    int sync_fault_err_ = EIO;
    bool sync_fault_permanent_ = false;

    // Per file (by current path in the base Env, hidden names included).
    std::map<std::string, std::shared_ptr<Node>> nodes_;
    // Directory entry operations not yet made durable, oldest first.
    std::vector<EntryOp> pending_;
    std::uint64_t hidden_counter_ = 0;
};

}  // namespace hiodsfs
