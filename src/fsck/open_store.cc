// Opening a store for hiodsfs-fsck (open_store.h).
#include "fsck/open_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/fsync_log.h"
#include "fsck/checker.h"

namespace hiodsfs::fsck {
namespace {

// Whether the run writes metadata: a repair, or a scrub that flags what it finds.
bool writes_metadata(const FsckOptions& o) { return o.repair || (o.scrub && o.mark_bad_chunks); }

constexpr std::uint64_t kLmdbMapBytes = 1ull << 40;

// The address space to map the metadata with: what the file holds and room
// for a repair's new pages, not the daemon's terabyte (which need not fit
// where address space is scarce: a sanitizer's, or a 32-bit-sized ulimit).
std::uint64_t map_bytes_for(const std::string& data_file) {
    struct stat st {};
    const std::uint64_t size = ::stat(data_file.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    return std::min<std::uint64_t>(kLmdbMapBytes, 2 * size + (256ull << 20));
}

Status check_format_record(const FsckOptions& options, const StoreFormat& format, bool exists, MetaStore& meta,
                           FormatFinding* out) {
    const std::string& dir = options.store;
    StoreFormat copy;
    bool found = false;
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(meta.begin_read(&t));
        HIODSFS_TRY(read_format_copy(*t, &copy, &found));
    }
    auto says = [](const StoreFormat& f) {
        return "format " + std::to_string(f.version) + ", chunking " + f.chunking.describe();
    };
    if (exists) {
        out->add_copy = !found;
        out->write = format;
        if (found && !same_format(copy, format)) {
            out->problem = "FORMAT says " + says(format) + " but the metadata's copy says " + says(copy) +
                           ": FORMAT is written again from the copy";
            out->repairable = true;
            out->write = copy;
            out->write.tier = format.tier;
        }
        return Status::ok();
    }
    if (found) {
        HIODSFS_TRY(check_format_version(dir, copy));
        out->problem = "the FORMAT record is missing; the metadata's copy says " + says(copy);
        out->repairable = true;
        out->write = copy;
    } else if (options.chunking_given) {
        out->problem = "the FORMAT record is missing and the metadata holds no copy of it; --chunking " +
                       options.chunking.describe() + " was given for it";
        out->repairable = true;
        out->write = StoreFormat{kFormatVersion, options.chunking, ""};
        out->add_copy = true;
    } else {
        out->problem = "the FORMAT record is missing and the metadata (from an older hiodsfs) holds no copy of it: "
                       "`hiodsfs-fsck --repair --chunking SPEC " + dir + "` writes it with the chunking the store "
                       "was made with";
    }
    return Status::ok();
}

// A store is checked with the tier its FORMAT names, and only with it:
// without it every segment it holds alone would look lost.
Status check_tier(const std::string& dir, const std::string& named, SegmentTier* tier) {
    if (tier == nullptr && named.empty()) return Status::ok();
    if (tier == nullptr)
        return Status::error(EOPNOTSUPP, "store " + dir + " keeps its sealed segments in " + named +
                                             ": check it as hiodsfs-fsck " + named + " --cache-dir " + dir +
                                             " (nothing was checked)");
    if (named != tier->describe())
        return Status::error(EINVAL, "store " + dir + " keeps its segments in " +
                                         (named.empty() ? "the directory itself" : named) + ", not in " +
                                         tier->describe());
    return Status::ok();
}

// The daemon holds the lock exclusively while mounted. The metadata is
// opened without LMDB's reader table, so even reading beside it is unsafe.
Status lock_store(const StoreDir& dir, bool exclusive, std::unique_ptr<StoreLock>* out) {
    Status locked = StoreLock::acquire(dir, exclusive, 0, out);
    if (locked.err() == EBUSY)
        return Status::error(EBUSY, locked.message() + "; unmount it before running hiodsfs-fsck");
    return locked;
}

// A tiered store's cache_dir without FORMAT and metadata is made the
// tier's copy of the store, as a mount's open does.
Status recover_cache_dir(const StoreDir& store, SegmentTier* tier,
                         std::vector<std::string>* notes) {
    const std::string& dir = store.path();
    bool in_tier = false;
    HIODSFS_TRY(tier_has_metadata(tier, &in_tier));
    if (!in_tier)
        return Status::error(ENOENT, tier->describe() + " holds no hiodsfs store (no metadata snapshot or journal), "
                                     "and " + dir + " has none either");
    std::string summary;
    HIODSFS_TRY(
        store.named(recover_store_dir(store.env(), tier, store.via_fd(), kLmdbMapBytes, &summary)));
    notes->push_back("recovered the metadata of " + tier->describe() + " into " + dir + ": " + summary);
    return Status::ok();
}

// A tiered store's metadata is brought up to the tier's journal (records
// a crash kept from its local commit), and refused when it is no copy of
// the tier's; a repair then commits through the journal, as the daemon
// does, so the tier stays the authority and the next mount finds its
// cache_dir neither behind nor ahead.
Status join_tier(const FsckOptions& options, OpenStore* out, std::vector<std::string>* notes) {
    SegmentTier* tier = options.tier;
    CatchUp caught_up;
    Status caught = catch_up_from_tier(tier, *out->meta, options.store, &caught_up);
    const std::uint64_t replayed = caught_up.replayed;
    if (!caught) return Status::error(caught.err(), "store " + tier->describe() + " cannot be checked: " + caught.message());
    if (replayed > 0)
        notes->push_back("replayed " + u(replayed) + " journal records from " + tier->describe() + " that " +
                         options.store + " had not committed");
    if (!writes_metadata(options)) return Status::ok();
    bool in_tier = false;
    HIODSFS_TRY(tier_has_metadata(tier, &in_tier));
    // A journal record with nothing before it in the tier would be replayed
    // onto an empty store by the next recovery.
    if (!in_tier)
        return Status::error(
            EOPNOTSUPP, "store " + tier->describe() +
                            " has no metadata in the pool yet (a store "
                            "made before the journal): mount it once, then run this again (a check "
                            "with -n needs no mount)");
    out->journal = std::make_unique<TierJournal>(tier);
    out->meta->set_journal(out->journal.get());
    return Status::ok();
}

}  // namespace

// The segments, read-only: fsck repairs metadata only, and never rewrites
// a segment's bytes (a repair may add an empty one: lost_segments.h).
Status open_segments(const FsckOptions& options, OpenStore& store) {
    const SuperState committed = store.meta->super_snapshot();
    SegmentStoreOptions so;
    so.read_only = true;
    so.tier = options.tier;
    so.tier_reads_in_memory = true;  // a check leaves the cache as it was
    so.committed = SegmentPosition{static_cast<SegmentId>(committed.frontier_segment),
                                   committed.frontier_offset};
    store.segs.reset();
    return SegmentStore::open(store.dir->env(), options.store + "/segments", so, &store.segs);
}

Status open_store(const FsckOptions& options, OpenStore* out, FormatFinding* finding, std::vector<std::string>* notes) {
    const std::string& dir = options.store;
    SegmentTier* const tier = options.tier;
    // A tiered store's cache_dir may be written before the check: brought
    // up to the tier (its copy of the pool's metadata).
    const bool write = writes_metadata(options) || tier != nullptr;
    if (dir.empty()) return Status::error(EINVAL, "no store directory given");
    StoreDirOptions dir_options;
    dir_options.create = tier != nullptr;
    dir_options.read_only = !write;
    dir_options.check_owner = !options.any_store_owner;
    dir_options.waiver = "--unsafe-store-dir accepts it";
    HIODSFS_TRY(StoreDir::open(dir, dir_options, &out->dir));
    Env* env = out->dir->env();
    if (tier != nullptr) HIODSFS_TRY(lock_store(*out->dir, true, &out->lock));
    StoreFormat format;
    bool exists = false;
    HIODSFS_TRY(read_store_format(env, dir, &format, &exists));
    if (!exists && tier != nullptr && !env->exists(dir + "/meta")) {
        HIODSFS_TRY(recover_cache_dir(*out->dir, tier, notes));
        HIODSFS_TRY(read_store_format(env, dir, &format, &exists));
    }
    // Without FORMAT, metadata still makes it a store (whose record is lost).
    if (!exists && !env->exists(dir + "/meta"))
        return Status::error(ENOENT, dir + " is not a hiodsfs store (it has no FORMAT record)");
    if (exists) HIODSFS_TRY(check_format_version(dir, format));
    if (exists) HIODSFS_TRY(check_tier(dir, format.tier, tier));
    if (tier == nullptr) HIODSFS_TRY(lock_store(*out->dir, write, &out->lock));
    // Never a fresh environment: "repairing" against empty metadata would
    // disown every segment. File maps cannot be rebuilt from the segments
    // (their records name chunks, not files), so this is as far as it goes.
    const std::string lost = "store " + dir + ": its metadata cannot be checked (";
    const std::string advice =
        "); the segment files are left as they are: restore " + dir + "/meta from a backup";
    std::string meta_dir;
    Status opened = out->dir->library_dir("meta", false, &meta_dir);
    MetaStoreOptions mo;
    mo.map_bytes = map_bytes_for(meta_dir + "/data.mdb");
    mo.read_only = !write;
    mo.create = false;
    mo.check_bytes = ~std::uint64_t{0};  // every page of the file, before LMDB maps it
    if (opened) opened = out->dir->named(MetaStore::open(meta_dir, mo, &out->meta));
    if (!opened) return Status::error(EUCLEAN, lost + opened.message() + advice);
    if (!out->meta->had_super())
        return Status::error(EUCLEAN, lost + "it has no state record: made anew or damaged" + advice);
    HIODSFS_TRY(check_format_record(options, format, exists, *out->meta, finding));
    HIODSFS_TRY(check_tier(dir, finding->write.tier, tier));
    if (tier != nullptr) HIODSFS_TRY(join_tier(options, out, notes));

    // A cache_dir just recovered holds no segment yet (reads go to the tier).
    if (tier != nullptr) HIODSFS_TRY(env->mkdir(dir + "/segments"));
    HIODSFS_TRY(open_segments(options, *out));
    if (tier != nullptr) return Status::ok();  // a tiered store journals instead
    // fsyncs a crash left in the log (engine/fsync_log.h): a repair applies
    // them first, as the next mount would; a check reads the state before them.
    if (write) out->meta->set_logging(true);
    LogReplay replay;
    HIODSFS_TRY(replay_fsync_log(*out->meta, *out->segs, write, &replay));
    const std::string n = std::to_string(replay.records);
    if (replay.records > 0 && options.repair)
        notes->push_back("applied " + n + " fsync log records the store had not committed");
    if (replay.records > 0 && write && !options.repair)
        notes->push_back(
            n +
            " fsync log records are not in the metadata yet (the store was not unmounted): this "
            "scrub checks the state after them, and commits them only with the chunks it flags");
    if (replay.records > 0 && !write)
        notes->push_back(n + " fsync log records are not in the metadata yet (the store was not unmounted): the "
                             "next read-write mount or --repair applies them; this check is of the state before them");
    if (!replay.stopped.empty())
        notes->push_back("the fsync log stops early: " + replay.stopped + "; what was fsynced after it is lost");
    return Status::ok();
}

// Metadata objects an interrupted snapshot left in the tier: normal after
// a crash, and never deleted here; the next snapshot removes them.
Status note_superseded_objects(SegmentTier* tier, FsckReport* report) {
    std::uint64_t seq = 0;
    bool found = false;
    std::uint32_t epoch = 0;
    HIODSFS_TRY(snapshot_seq(tier, &seq, &found, &epoch));
    if (!found) return Status::ok();  // every journal object is still needed
    std::vector<std::string> names;
    HIODSFS_TRY(superseded_objects(tier, seq, epoch, &names));
    for (const std::string& n : names)
        report->notes.push_back(tier->describe() + ": object " + n + " holds nothing the metadata snapshot of record " +
                                u(seq) + " lacks (a snapshot was interrupted before it removed it); kept, the next "
                                "snapshot removes it");
    return Status::ok();
}

}  // namespace hiodsfs::fsck
