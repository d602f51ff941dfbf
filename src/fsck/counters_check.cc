// The dirty queue (damaged records, impossible ranges, the backlog it
// holds, the next record number) and the global counters (ids, space,
// inodes, files, backlog, dead bytes), checked against what the stages
// before them counted.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fsck/checker.h"
#include "meta/dirty_queue.h"
#include "meta/keys.h"

namespace hiodsfs::fsck {
namespace {

constexpr std::uint64_t kMaxFileSize = std::uint64_t(1) << 60;

}  // namespace

Status Checker::check_dirty() {
    std::vector<std::pair<std::string, std::string>> drop;
    std::uint64_t stale = 0, max_seq = 0, set_aside = 0;
    std::string last_aside;
    Cursor c = t_.cursor(Db::kDirty);
    for (bool ok = c.first(); ok; ok = c.next()) {
        ++rep_.dirty;
        std::string key(c.key());
        std::uint64_t seq = 0;
        DirtyRange aside;
        std::string_view why;
        if (parse_set_aside_key(key, &seq) && decode_set_aside(c.value(), &aside, &why)) {
            // Out of the backlog until the next read-write mount queues it again.
            max_seq = std::max(max_seq, seq);
            ++set_aside;
            last_aside = "inode " + u(aside.ino) + ": " + std::string(why);
            continue;
        }
        if (!parse_key_u64(key, &seq) || c.value().size() != 24) {
            drop.emplace_back(key, "damaged dirty-queue record");
            continue;
        }
        std::uint64_t ino = get_be64(c.value(), 0),
                      off = get_be64(c.value(), 8), len = get_be64(c.value(), 16);
        if (len == 0 || off > kMaxFileSize || len > kMaxFileSize - off) {
            drop.emplace_back(key, "dirty-queue record " + u(seq) + " has an impossible range (offset " +
                                       u(off) + ", length " + u(len) + ")");
            continue;
        }
        max_seq = std::max(max_seq, seq);
        backlog_records_ += 1;
        backlog_bytes_ += len;
        auto it = inodes_.find(ino);
        if (it == inodes_.end() || !S_ISREG(it->second.r.mode)) ++stale;
    }
    HIODSFS_TRY(c.status());
    for (auto& [key, why] : drop)
        HIODSFS_TRY(fix(why + "; it is removed", [&, k = key] { return t_.del(Db::kDirty, k); }));
    if (stale > 0)
        rep_.notes.push_back(u(stale) + " dirty-queue record(s) name files that are gone; the "
                                        "background pass skips them");
    if (set_aside > 0)
        rep_.notes.push_back(u(set_aside) +
                             " dirty-queue record(s) were set aside: the background pass "
                             "failed on them, and the next read-write mount tries them "
                             "again (the last: " +
                             last_aside + ")");
    SuperState& s = t_.super();
    if (s.next_dirty <= max_seq) {
        HIODSFS_TRY(fix("next dirty-queue number is " + u(s.next_dirty) + " but record " + u(max_seq) + " exists",
                        [&] {
                            s.next_dirty = max_seq + 1;
                            return Status::ok();
                        }));
    }
    return Status::ok();
}

// What the dead-bytes counter (hiodsfs-stat's "reclaimable") should
// say: the payload of the segments the metadata knows, less the live
// chunks. Power lost in the middle of a reclaim can leave it off either
// way (docs/architecture.md, "dead_bytes"); nothing depends on it but
// hiodsfs-stat, so a difference is a note, which --repair mends.
Status Checker::check_dead_bytes(const SpaceCounters& want) {
    if (!payload_) return Status::ok();
    std::uint64_t total = 0;
    for (const auto& [seg, bytes] : *payload_)
        if (known_segments_.count(seg)) total += bytes;
    // Less payload than live chunks: chunks in missing or cut segments,
    // reported above; the counter cannot be known then.
    if (total < want.stored_bytes) return Status::ok();
    std::uint64_t& have = t_.super().counters.dead_bytes;
    const std::uint64_t should = total - want.stored_bytes;
    if (have == should) return Status::ok();
    std::string what = "the counter of dead chunk bytes is " + u(have) + ", the segments hold " + u(should);
    if (repair_) {
        have = should;
        rep_.notes.push_back(what + "; it is set");
    } else {
        rep_.notes.push_back(what + " (--repair sets it)");
    }
    return Status::ok();
}

Status Checker::check_counters() {
    SuperState& s = t_.super();
    if (s.next_chunk <= max_chunk_) {
        HIODSFS_TRY(fix("next chunk id is " + u(s.next_chunk) + " but chunk " + u(max_chunk_) + " exists",
                        [&] {
                            s.next_chunk = max_chunk_ + 1;
                            return Status::ok();
                        }));
    }
    SpaceCounters want = s.counters;
    want.logical_bytes = 0;
    for (const auto& [ino, sums] : extent_sums_) want.logical_bytes += sums.first;
    want.stored_bytes = want.raw_bytes = want.content_bytes = 0;
    for (const auto& [id, ci] : chunks_) {
        if (ci.r.lost()) continue;  // stored nowhere
        want.stored_bytes += ci.r.stored_length();
        want.content_bytes += ci.r.length;
        if (!(ci.r.flags & ChunkRecord::kIndexed)) want.raw_bytes += ci.r.stored_length();
    }
    want.chunk_count = chunks_.size();
    want.inode_count = inodes_.size();
    want.file_count = 0;
    for (const auto& [ino, in] : inodes_) want.file_count += S_ISREG(in.r.mode) ? 1 : 0;
    want.backlog_records = backlog_records_;
    want.backlog_bytes = backlog_bytes_;
    struct Field {
        const char* name;
        std::uint64_t SpaceCounters::*field;
    };
    static const Field fields[] = {
        {"logical bytes", &SpaceCounters::logical_bytes},
        {"stored bytes", &SpaceCounters::stored_bytes},
        {"chunk content bytes", &SpaceCounters::content_bytes},
        {"not-deduplicated bytes", &SpaceCounters::raw_bytes},
        {"chunk count", &SpaceCounters::chunk_count},
        {"inode count", &SpaceCounters::inode_count},
        {"file count", &SpaceCounters::file_count},
        {"dirty-queue records", &SpaceCounters::backlog_records},
        {"dirty-queue bytes", &SpaceCounters::backlog_bytes},
    };
    for (const Field& f : fields) {
        std::uint64_t have = s.counters.*f.field, should = want.*f.field;
        if (have == should) continue;
        HIODSFS_TRY(fix(std::string("counter of ") + f.name + " is " + u(have) + ", should be " + u(should),
                        [&] {
                            s.counters.*f.field = should;
                            return Status::ok();
                        }));
    }
    return check_dead_bytes(want);
}

}  // namespace hiodsfs::fsck
