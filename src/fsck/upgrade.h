// hiodsfs-fsck --upgrade: converts a store of an older format to the
// current one (docs/fsck.md "Upgrading a store"). The metadata is copied,
// record by record, into a new LMDB environment beside the old one
// (STORE/meta.upgrade); only when that copy is durable are the two swapped
// and FORMAT rewritten, so a crash at any point leaves either the old store
// or the new one, and running the upgrade again finishes the job. Segment
// files are not touched.
// Thread-safety: takes the store's lock; call it from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hiodsfs/status.h"

namespace hiodsfs {

struct UpgradeOptions {
    std::string store;
    // Upgrade a store directory that another user owns or that group or
    // others may write (--unsafe-store-dir; store/store_dir.h refuses one).
    bool any_store_owner = false;
    // Tests: called after each durable step ("copied", "old set aside",
    // "new in place", "format written"); an error stops the upgrade there,
    // as a crash would.
    std::function<Status(std::string_view step)> after_step;
};

struct UpgradeReport {
    std::uint32_t from_version = 0, to_version = 0;
    bool already_current = false;
    bool resumed = false;  // an interrupted upgrade was finished
    std::uint64_t records = 0;
    // Records that were not valid in the old format, copied as they were
    // (hiodsfs-fsck reports them as it would have before).
    std::uint64_t damaged_records = 0;
    // Files that map raw chunks, queued for the background pass again.
    std::uint64_t files_queued = 0;
    std::uint64_t bytes_before = 0, bytes_after = 0;  // of meta/data.mdb
};

Status upgrade_store(const UpgradeOptions& options, UpgradeReport* report);

struct InodeRecord;

// An inode record of format `version` (1 to 3) as the upgrade reads it,
// and its tail (a symlink's target; in format 3 a regular file's first
// extent block); false if it is damaged. Tests compare the upgraded inodes
// with it.
bool decode_old_inode(std::uint32_t version, std::string_view in, InodeRecord* out,
                      std::string_view* tail);

}  // namespace hiodsfs
