// What opening a store finds and puts right: a lost FORMAT, the tier's
// copy of a lost store directory, the fsync log's records a crash left
// after the last commit, segment files against the committed metadata,
// and the chunks a crash wrote after the frontier.
#include "engine/engine_impl.h"
#include "engine/key_slot.h"
#include "engine/fsync_log.h"

#include <filesystem>

namespace hiodsfs {

// STORE/FORMAT is missing. An empty directory is a new store. One with
// committed metadata is opened with the metadata's copy of the record (and
// FORMAT written again from it, unless read-only). A first open that
// crashed before it wrote FORMAT committed nothing and wrote no segment
// byte: it is cleared and made again. Anything else is refused, untouched.
Status EngineImpl::find_lost_format(const std::string& dir, StoreFormat* format, bool* exists) {
    const bool read_only = opts_.read_only;
    std::vector<std::string> names;
    HIODSFS_TRY(env_->list_dir(dir, &names));
    bool empty = true, has_meta = false, foreign = false;
    for (const auto& n : names) {
        if (n == "." || n == ".." || n == "lock") continue;
        empty = false;
        if (n == "meta") has_meta = true;
        else if (n != "segments" && n != "status.json" && n != "FORMAT.tmp" && n != "snapshot.tmp" &&
                 n != kKeySlotName && n != std::string(kKeySlotName) + ".tmp")
            foreign = true;  // a key slot comes first, before the metadata (new_encrypted_store)
    }
    if (foreign) return Status::error(EEXIST, "store " + dir + " is not empty and is not a hiodsfs store");
    // No metadata here: a new store, or one its tier holds (the caller's).
    if (empty || !has_meta) return Status::ok();
    const std::string untouched = "; nothing was changed; ";

    std::unique_ptr<MetaStore> probe;
    MetaStoreOptions mo;
    mo.map_bytes = opts_.lmdb_map_bytes;
    mo.read_only = true;
    mo.create = false;
    std::string probe_dir;
    Status opened = store_->library_dir("meta", false, &probe_dir);
    if (opened) opened = store_->named(MetaStore::open(probe_dir, mo, &probe));
    if (opened && probe->had_super()) {
        StoreFormat copy;
        bool found = false;
        {
            std::unique_ptr<Txn> t;
            HIODSFS_TRY(probe->begin_read(&t));
            HIODSFS_TRY(read_format_copy(*t, &copy, &found));
        }
        probe.reset();
        if (!found)
            return Status::error(EUCLEAN, "store " + dir + " has metadata but no FORMAT record, and its metadata (from an "
                                          "older hiodsfs) holds no copy of it" + untouched + "`hiodsfs-fsck --repair "
                                          "--chunking SPEC " + dir + "` writes it again with the chunking it was made with");
        HIODSFS_TRY(check_format_version(dir, copy));
        *format = copy;
        *exists = true;
        if (read_only) return Status::ok();
        HIODSFS_TRY(write_store_format(env_, dir, copy));
        if (opts_.log)
            opts_.log("hiodsfs: " + dir + "/FORMAT was missing; written again from the metadata's copy (format " +
                      std::to_string(copy.version) + ", chunking " + copy.chunking.describe() + ")");
        return Status::ok();
    }
    probe.reset();
    // Nothing committed. An environment that does not open is damaged,
    // unless it is the few pages (or none) LMDB writes when it makes one.
    struct stat data {};
    const bool small_env =
        ::fstatat(store_->fd(), "meta/data.mdb", &data, AT_SYMLINK_NOFOLLOW) != 0 ||
        data.st_size <= 16384;
    if (!opened && !small_env)
        return Status::error(EUCLEAN, "store " + dir + " has no FORMAT record and its metadata is unreadable (" +
                                          opened.message() + ")" + untouched + "hiodsfs-fsck " + dir + " tells more");
    std::vector<std::string> segments;
    if (env_->list_dir(dir + "/segments", &segments)) {
        for (const std::string& n : segments) {
            std::unique_ptr<File> f;
            std::uint64_t size = 0;
            if (env_->open(dir + "/segments/" + n, OpenMode::kRead, &f) && f->size(&size) &&
                size > 0)
                return Status::error(EUCLEAN,
                                     "store " + dir +
                                         " has segment data but neither a FORMAT record nor "
                                         "committed metadata" +
                                         untouched + "hiodsfs-fsck " + dir + " tells more");
        }
    }
    if (read_only)
        return Status::error(ENOENT, "store " + dir + " was left unfinished by an interrupted first mount; "
                                     "mount it read-write to make it");
    for (const char* n : {"meta", "segments", "status.json", "FORMAT.tmp", "snapshot.tmp"}) {
        // Through the descriptor; remove_all removes a link, never what it points to.
        std::error_code ec;
        std::filesystem::remove_all(lib_dir_ + "/" + n, ec);
        if (ec) return Status::error(ec.value(), "removing " + dir + "/" + n + ": " + ec.message());
    }
    if (opts_.log)
        opts_.log("hiodsfs: " + dir + " was left unfinished by an interrupted first mount (nothing committed); "
                  "starting it again");
    return Status::ok();
}

// The metadata's copy of FORMAT, where it has one, must say what FORMAT
// says: a FORMAT edited or restored from elsewhere is not trusted over it.
Status EngineImpl::check_format_copy(const std::string& dir, const StoreFormat& format) {
    StoreFormat copy;
    bool found = false;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    }
    if (!found || same_format(copy, format)) return Status::ok();
    return Status::error(EUCLEAN, "store " + dir + ": FORMAT says format " + std::to_string(format.version) +
                                      ", chunking " + format.chunking.describe() + ", but the metadata's copy says format " +
                                      std::to_string(copy.version) + ", chunking " + copy.chunking.describe() +
                                      "; nothing was changed; `hiodsfs-fsck --repair " + dir +
                                      "` writes FORMAT again from the metadata");
}

// Records this open's FORMAT in the metadata, durably, if it is not there.
Status EngineImpl::keep_format_copy() {
    const StoreFormat want = current_format();
    StoreFormat copy;
    bool found = false;
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    if (found && store_format_text(copy) == store_format_text(want)) return Status::ok();
    HIODSFS_TRY(write_format_copy(*t, want));
    HIODSFS_TRY(t->commit());
    t.reset();
    return commit_now();
}

Status EngineImpl::mark_log_open(bool open) {
    if (format_log_open_ == open) return Status::ok();
    StoreFormat format = current_format();
    format.log_open = open;
    HIODSFS_TRY(write_store_format(env_, opts_.store_dir, format));
    format_log_open_ = open;
    return Status::ok();
}

Status EngineImpl::recover_from_tier(const std::string& dir) {
    std::string summary;
    HIODSFS_TRY(store_->named(
        recover_store_dir(env_, opts_.segments.tier, lib_dir_, opts_.lmdb_map_bytes, &summary)));
    if (opts_.log) opts_.log("hiodsfs: recovered the metadata of " + tier_name() + " into " + dir + ": " + summary);
    return Status::ok();
}

// What fsyncs left in the log after the last commit (a crash): applied
// before anything reads the metadata. A read-only open cannot, and refuses.
Status EngineImpl::replay_log(const std::string& dir) {
    LogReplay replay;
    HIODSFS_TRY(replay_fsync_log(*meta_, *segs_, !opts_.read_only, &replay));
    if (opts_.read_only && replay.records > 0 && !opts_.read_only_at_last_commit)
        return Status::error(EUCLEAN, "store " + dir + " holds " + std::to_string(replay.records) +
                                          " fsynced changes its metadata does not have yet (it was not "
                                          "unmounted): open it read-write once to apply them");
    if (!replay.stopped.empty() && opts_.log)
        opts_.log("hiodsfs: the fsync log of " + dir + " stops early: " + replay.stopped +
                  "; what was fsynced after it is lost (hiodsfs-fsck " + dir + " checks the rest)");
    if (replay.records == 0 || opts_.read_only) return Status::ok();
    if (opts_.log)
        opts_.log("hiodsfs: applied " + std::to_string(replay.records) + " fsync log records that " + dir +
                  " had not committed");
    return Status::ok();
}

// Chunk records a crash left after the frontier of the state the store
// opened with (the last commit's, or the last fsync log record's it
// replayed) are dead, unless something refers to them: counted once, as the
// next commit's frontier lies past them. A store that has no frontier yet
// (made before it was recorded) is left to hiodsfs-fsck. With a tier, a
// segment there only is read too (fetched: after a crash on another host,
// the pool's copy of its last segment holds what it wrote after its last
// commit).
Status EngineImpl::count_crash_leftovers(const SuperState& committed) {
    if (committed.frontier_segment == 0) return Status::ok();
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    std::vector<std::pair<ChunkId, ChunkLocation>> after;
    for (const auto& [seg, size] : files) {
        if (seg < committed.frontier_segment || size == 0) continue;
        HIODSFS_TRY(segs_->scan(seg, false, [&, seg = seg](const SegmentRecord& r) {
            if (r.chunk != kLogRecord && committed.after_frontier(seg, r.header_offset))
                after.emplace_back(r.chunk, r.location);
            return true;
        }));
    }
    if (after.empty()) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    std::uint64_t dead = 0;
    for (const auto& [id, loc] : after) {
        ChunkRecord rec;
        bool found = false;
        HIODSFS_TRY(get_chunk(*t, id, &rec, &found));
        if (!(found && rec.location() == loc)) dead += loc.length;
    }
    if (dead == 0) return Status::ok();
    t->super().counters.dead_bytes += dead;
    return t->commit();
}

// Segment files against what committed metadata says of them, at open.
Status EngineImpl::check_segment_files(const SuperState& committed, const std::string& hint) {
    std::vector<std::pair<SegmentId, std::uint64_t>> files;
    HIODSFS_TRY(segs_->list_segments(&files));
    std::map<SegmentId, std::uint64_t> on_disk(files.begin(), files.end());
    for (const auto& [seg, size] : files)
        if (size > 0) commit_->found_at_open(seg);
    std::vector<SegmentId> gone, beyond;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta_->begin_read(&t));
        std::set<SegmentId> known;
        Cursor c = t->cursor(Db::kSegments);
        for (bool ok = c.first(); ok; ok = c.next()) {
            std::uint64_t seg_id = 0;
            SegmentEntry entry;
            if (!parse_key_u64(c.key(), &seg_id) || seg_id > std::numeric_limits<SegmentId>::max() ||
                !decode_segment_entry(c.value(), &entry))
                continue;  // fsck's to repair
            const auto seg = static_cast<SegmentId>(seg_id);
            const std::uint64_t live = entry.live;
            known.insert(seg);
            auto it = on_disk.find(seg);
            if (it == on_disk.end() && live == 0) {
                gone.push_back(seg);  // deleted, and the metadata not told before a crash
            } else if (it == on_disk.end() || it->second < live) {
                if (opts_.read_only) continue;  // reads of it fail with EIO; copy out the rest
                return Status::error(
                    EUCLEAN, "store " + opts_.store_dir + " cannot be opened read-write: segment " +
                                 std::to_string(seg) + " holds " + std::to_string(live) +
                                 " bytes of file data by the committed metadata, but its file " +
                                 (it == on_disk.end() ? "is missing"
                                                      : "has only " + std::to_string(it->second) + " bytes") +
                                 hint + " (mount with -o ro to copy out the rest)");
            }
        }
        HIODSFS_TRY(c.status());
        // Segments made after the last commit hold nothing committed metadata
        // refers to (a crash): recorded as dead, so reclaim may remove them.
        // Others without an entry are kept and left to hiodsfs-fsck.
        for (const auto& [seg, size] : on_disk)
            if (known.count(seg) == 0 && committed.written_after(seg)) beyond.push_back(seg);
    }
    if (opts_.read_only || (gone.empty() && beyond.empty())) return Status::ok();
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    for (SegmentId seg : gone) HIODSFS_TRY(t->del(Db::kSegments, key_u64(seg)));
    for (SegmentId seg : beyond) HIODSFS_TRY(add_segment_live(*t, seg, 0));
    return t->commit();
}

}  // namespace hiodsfs
