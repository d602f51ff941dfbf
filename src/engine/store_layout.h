// The store directory's layout: the FORMAT record (format version and
// chunking parameters, human-readable) and the lock that keeps a second
// process off an open store.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hiodsfs/chunker.h"
#include "hiodsfs/env.h"
#include "hiodsfs/status.h"
#include "store/store_dir.h"

namespace hiodsfs {

class Txn;

// An encrypted store's FORMAT line: "encryption CIPHER id=HEX check=HEX".
struct StoreEncryption {
    // A new store's: XAES-256-GCM. The stores made before it (format 6
    // too) keep AES-256-GCM (chunk/cipher.h).
    static constexpr const char* kCipher = "xaes-256-gcm";
    static constexpr const char* kAesGcmCipher = "aes-256-gcm";
    std::string cipher;  // "" for a plain store
    std::string id;      // the store's random id, 32 hex digits: salts its subkeys
    std::string check;   // ChunkCipher::key_check() of its key, 64 hex digits
    bool on() const { return !cipher.empty(); }
    bool operator==(const StoreEncryption&) const = default;
};

struct StoreFormat {
    std::uint32_t version = 0;
    ChunkingParams chunking;
    // Where sealed segments live besides segments/ (SegmentTier::describe(),
    // "rados:pool/store"), or "" for a store whose directory holds them all.
    std::string tier;
    // The store is open read-write with an fsync log, or was when it
    // crashed: its segments may hold log records (engine/fsync_log.h) that
    // the metadata does not have yet. FORMAT then says format
    // version + kLogOpenVersionOffset, which hiodsfs 0.3.0 (format 4, no
    // log) refuses: it would open the store without those records and lose
    // what was fsynced since the last commit. Never in the metadata's copy.
    bool log_open = false;
    // Set (with version kEncryptedFormatVersion) for an encrypted store.
    StoreEncryption encryption;
};

// "format 1004": format 4 with an open fsync log (StoreFormat::log_open).
// Far from any real version, so no later format can be taken for one.
inline constexpr std::uint32_t kLogOpenVersionOffset = 1000;

// A small record file of the store (FORMAT, KEYSLOT): its text, at most
// 4 KiB; *exists is false (and ok) if the file is absent.
Status read_store_record(Env* env, const std::string& path, std::string* text, bool* exists);
// Writes STORE/name durably: a new temporary file (never one found there),
// synced, renamed over name, and the directory synced. A crash leaves the
// old record or the new one, whole.
Status write_store_record(Env* env, const std::string& store, const std::string& name, const std::string& text);

// Reads STORE/FORMAT. *exists is false (and ok) if the file is absent.
Status read_store_format(Env* env, const std::string& store, StoreFormat* out, bool* exists);
// The record's text, and the record from a text (`where` names it in errors).
std::string store_format_text(const StoreFormat& format);
Status parse_store_format(const std::string& text, const std::string& where, StoreFormat* out);
// EPROTO with one line when this program cannot open a store of this format
// version (kOldestOpenableFormat up to kFormatVersion it can).
Status check_format_version(const std::string& store, const StoreFormat& format);
// Writes STORE/FORMAT durably (write_store_record).
Status write_store_format(Env* env, const std::string& store, const StoreFormat& format);

// The metadata keeps a copy of the FORMAT record (its text, under this key
// of Db::kSuper), so a store whose FORMAT file is lost loses nothing: the
// file is written again from it. Stores an older hiodsfs made have none
// until their next read-write open.
inline constexpr std::string_view kFormatCopyKey = "format";
Status read_format_copy(Txn& t, StoreFormat* out, bool* found);
Status write_format_copy(Txn& t, const StoreFormat& format);
// Same version (4 and 5 count as one), chunking and encryption (log_open is FORMAT's alone). The tier line is not compared: FORMAT gains
// it when a store is given a tier, a moment apart from the copy, and
// check_tier() already holds a tiered store to it.
bool same_format(const StoreFormat& a, const StoreFormat& b);

// Makes the store's files 0600 and its subdirectories 0700 where they are
// more open (an older hiodsfs, a copy, a chmod): segments hold file contents.
// The store directory itself keeps the mode its owner gave it (StoreDir
// refuses one that others may write). Symbolic links are left alone, never
// followed.
Status make_store_private(const StoreDir& store);

// An flock on STORE/lock, released when destroyed.
class StoreLock {
public:
    // exclusive: the daemon or a repairing fsck; shared: read-only tools.
    // Waits up to wait_ms for a holder to let go, then fails with EBUSY.
    // The lock file is opened from the store's descriptor without following
    // a link, and must be a regular file of one link: the holder writes its
    // pid into it.
    static Status acquire(const StoreDir& store, bool exclusive, unsigned wait_ms,
                          std::unique_ptr<StoreLock>* out);
    ~StoreLock();
    StoreLock(const StoreLock&) = delete;
    StoreLock& operator=(const StoreLock&) = delete;

private:
    explicit StoreLock(int fd) : fd_(fd) {}
    int fd_;
};

}  // namespace hiodsfs
