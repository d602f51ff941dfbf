// What the engine tells of itself: status.json for hiodsfs-stat, and the
// space figures (statfs, the counters).
#include "engine/engine_impl.h"

#include <nlohmann/json.hpp>

namespace hiodsfs {

std::string EngineImpl::status_json() {
    SpaceCounters c;
    (void)counters(&c);
    // nlohmann::json writes a number that is not finite (a rate over an
    // empty interval) as null, never as the invalid "nan"; ordered, so the
    // file reads in the order below.
    nlohmann::ordered_json j;
    j["logical_bytes"] = c.logical_bytes;
    j["stored_bytes"] = c.stored_bytes;
    j["content_bytes"] = c.content_bytes;
    j["dictionaries"] = dicts_.size();
    j["disk_bytes"] = c.disk_bytes;
    j["dead_bytes"] = c.dead_bytes;
    j["raw_bytes"] = c.raw_bytes;
    j["chunk_count"] = c.chunk_count;
    j["inode_count"] = c.inode_count;
    j["dedup_hits"] = c.dedup_hits;
    j["cloned_bytes"] = c.cloned_bytes;
    j["backlog_records"] = c.backlog_records;
    j["backlog_bytes"] = c.backlog_bytes;
    j["backlog_limit_bytes"] = backlog_limit_.load(std::memory_order_relaxed);
    j["reclaim_forced"] = reclaim_forced_.load(std::memory_order_relaxed);
    j["read_errors"] = read_errors_.load();
    j["reads_beside_sweep"] = reads_beside_sweep_.load();
    j["read_replans"] = read_replans_.load();
    j["syncs_beside_sweep"] = syncs_beside_sweep_.load();
    j["reads_coalesced"] = reads_coalesced_.load();
    j["sweeps_yielded"] = sweeps_yielded_.load();
    j["sweeps_yielded_to_requests"] = sweeps_yielded_to_requests_.load();
    j["sweeps_deferred"] = sweeps_deferred_.load();
    j["dirty_records_covered"] = dirty_records_covered_.load();
    j["overwrites_in_windows"] = overwrites_in_windows_.load();
    j["overwrites_beside_others"] = overwrites_beside_others_.load();
    j["window_retries"] = window_retries_.load();
    j["early_commits"] = commit_->early_commits();
    j["resident_trims"] = commit_->resident_trims();
    j["held_writes_applied"] = write_behind_->applied();
    j["held_write_batches"] = write_behind_->batches();
    j["held_writes_lost"] = write_behind_->lost();
    j["dirty_writes_covered"] = write_behind_->covered();
    if (opts_.request_counts) {
        nlohmann::ordered_json r = nlohmann::ordered_json::object();
        for (const auto& [name, n] : opts_.request_counts()) r[name] = n;
        j["requests"] = std::move(r);
    }
    j["damaged_chunks"] = damaged_chunks_.load();
    {
        // Work set aside (engine/quarantine.h): the reason of the last one
        // this run set aside, else of one kept from an earlier run.
        std::uint64_t dirty = 0, deletes = 0;
        std::string why;
        std::unique_ptr<Txn> t;
        if (meta_->begin_read(&t)) count_set_aside(*t, &dirty, &deletes, &why);
        if (const std::string last = quarantine_.last(); !last.empty()) why = last;
        j["quarantined_dirty_records"] = dirty;
        j["quarantined_deletes"] = deletes;
        j["quarantine_error"] =
            why.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(why);
    }
    {
        // What stopped the store, if anything did: it then refuses every
        // change (and fsync) with EIO until it is mounted again.
        Status failed = meta_->failure();
        if (failed) failed = segs_->failure();  // stopped, and the engine is about to
        j["store_error"] = failed ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(failed.message());
    }
    if (compactor_) {
        const CompactionStats cs = compactor_->stats();
        j["reclaim_deletes_queued"] = deletes_queued_.load();
        j["reclaim_deletes_done"] = deletes_done_.load();
        j["compaction_segments_deleted"] = cs.segments_deleted;
        j["compaction_bytes_moved"] = cs.bytes_moved;
        j["compaction_bytes_freed"] = cs.bytes_freed;
        // Work an idle store still has to do, which no counter shows yet:
        // sealed segments to look at for weakly compressed chunks, and a
        // dictionary round (its dictionary makes more chunks weak).
        std::uint64_t to_look_at = 0;
        (void)compactor_->recompress_pending(&to_look_at);
        j["recompress_pending_segments"] = to_look_at;
    }
    j["dictionary_pending"] = trainer_ && trainer_->sampling() ? 1 : 0;
    j["file_count"] = c.file_count;
    j["pid"] = static_cast<std::uint64_t>(::getpid());
    {
        std::vector<std::pair<SegmentId, std::uint64_t>> segs;
        (void)segs_->list_segments(&segs);
        j["segment_count"] = segs.size();
    }
    {
        // Where the segments live, and the local cache in front of a tier.
        // (An unmounted store's backend is what FORMAT says; the tier's
        // figures only while a daemon has it.)
        j["backend"] = backend_;
        SegmentTierStats ts;
        if (segs_->tier_stats(&ts)) {
            nlohmann::ordered_json t;
            t["segments"] = ts.tier_segments;
            t["bytes"] = ts.tier_bytes;
            t["cached_segments"] = ts.cached_segments;
            t["cached_bytes"] = ts.cached_bytes;
            t["cache_limit"] = ts.cache_limit;
            t["cache_hits"] = ts.cache_hits;
            t["cache_misses"] = ts.cache_misses;
            t["fetched_bytes"] = ts.fetched_bytes;
            t["evictions"] = ts.evictions;
            t["uploads"] = ts.uploads;
            t["pending_uploads"] = ts.pending_uploads;
            t["upload_failures"] = ts.upload_failures;
            t["upload_error"] = ts.upload_error.empty() ? nlohmann::ordered_json(nullptr)
                                                        : nlohmann::ordered_json(ts.upload_error);
            j["tier"] = std::move(t);
        }
    }
    // Controller times (mode_since_ns, events) are on the monotonic clock of
    // now_ns; unix_time_ns is the wall clock at the same moment.
    j["now_ns"] = clock_->now_ns();
    j["unix_time_ns"] = wall_ns();
    j["interval_ms"] = opts_.control.interval_ms;
    j["target_ops"] = opts_.control.target_ops;
    j["target_bytes_per_s"] = opts_.control.target_bytes_per_s;
    j["chunking"] = chunking_.describe();
    j["encryption"] = encryption_.on() ? encryption_.cipher : "none";
    j["setting"] = controller_->setting() == ModeController::Setting::kInline     ? "inline"
                   : controller_->setting() == ModeController::Setting::kDeferred ? "deferred"
                                                                                    : "hybrid";
    j["mode"] = deferred_.load() ? "deferred" : "inline";
    j["mode_since_ns"] = controller_->mode_since_ns();
    j["background_speed"] = controller_->background_speed();
    j["throttle_regime"] = controller_->throttle_regime();
    auto samples = controller_->samples();
    if (!samples.empty()) {
        j["ops_per_s"] = samples.back().ops_per_s();
        j["bytes_per_s"] = samples.back().bytes_per_s();
        // The share of the last interval's writes their application was
        // waiting to send (the throttle's spare-capacity measure).
        j["held_fraction"] = samples.back().held_fraction();
        const double secs = samples.back().seconds();
        j["background_bytes_per_s"] =
            secs > 0 ? static_cast<double>(samples.back().background_bytes) / secs : 0.0;
    }
    // The persisted history (history.h): the last samples and the last
    // sample of each recent day.
    {
        std::vector<HistoryEntry> tail, daily;
        std::unique_ptr<Txn> t;
        if (meta_->begin_read(&t)) {
            (void)read_history_tail(*t, 60, &tail);
            (void)read_history_daily(*t, 31, &daily);
        }
        auto list = [](const std::vector<HistoryEntry>& v) {
            nlohmann::ordered_json a = nlohmann::ordered_json::array();
            for (const auto& e : v) {
                a.push_back({{"unix_time_ns", e.time_ns},
                             {"period_ns", e.r.period_ns},
                             {"mode", e.r.mode == 1 ? "deferred" : "inline"},
                             {"ops_per_s", e.r.ops_per_s},
                             {"bytes_per_s", e.r.bytes_per_s},
                             {"background_bytes_per_s", e.r.background_bytes_per_s},
                             {"backlog_records", e.r.backlog_records},
                             {"backlog_bytes", e.r.backlog_bytes},
                             {"logical_bytes", e.r.logical_bytes},
                             {"stored_bytes", e.r.stored_bytes}});
            }
            return a;
        };
        j["history"] = list(tail);
        j["history_daily"] = list(daily);
    }
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    auto all = controller_->events();
    for (std::size_t i = all.size() > 32 ? all.size() - 32 : 0; i < all.size(); ++i) {
        const auto& e = all[i];
        events.push_back({{"time_ns", e.time_ns},
                          {"kind", e.kind == ControlEvent::Kind::kModeSwitch ? "mode_switch" : "throttle"},
                          {"mode", to_string(e.mode)},
                          {"ops_per_s", e.ops_per_s},
                          {"bytes_per_s", e.bytes_per_s},
                          {"speed", e.speed},
                          {"backlog_records", e.backlog_records},
                          {"backlog_bytes", e.backlog_bytes},
                          {"reason", e.reason}});
    }
    j["events"] = std::move(events);
    // Invalid UTF-8 in a message (a store path) is replaced, not thrown.
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

Status EngineImpl::publish_status() {
    std::string text = status_json();
    const std::string tmp = opts_.store_dir + "/status.json.tmp";
    // A new file, never one found there (a link someone put in its place).
    if (::unlinkat(store_->fd(), "status.json.tmp", 0) != 0 && errno != ENOENT)
        return Status::from_errno(errno, "unlink " + tmp);
    UniqueFd fd(::openat(store_->fd(), "status.json.tmp",
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return Status::from_errno(errno, "write " + tmp);
    ssize_t n = ::write(fd.get(), text.data(), text.size());
    fd.reset();
    if (n != static_cast<ssize_t>(text.size())) return Status::error(EIO, "short write of " + tmp);
    if (::renameat(store_->fd(), "status.json.tmp", store_->fd(), "status.json") != 0)
        return Status::from_errno(errno, "rename " + tmp);
    return Status::ok();
}

Status EngineImpl::statfs(FsStats* out) {
    struct statvfs v {};
    HIODSFS_TRY(store_->statvfs(&v));
    // Figures of the backing file system, in its own block size: what df
    // shows is what the store can really still take.
    out->block_size = v.f_frsize;
    out->blocks = v.f_blocks;
    // What file data can still take: the reserve is kept back from it.
    const std::uint64_t reserve_blocks = v.f_frsize ? space_.reserve() / v.f_frsize : 0;
    out->blocks_free = v.f_bfree > reserve_blocks ? v.f_bfree - reserve_blocks : 0;
    out->blocks_avail = v.f_bavail > reserve_blocks ? v.f_bavail - reserve_blocks : 0;
    SpaceCounters c;
    HIODSFS_TRY(counters(&c));
    out->files = c.inode_count + v.f_favail;
    out->files_free = v.f_favail;
    out->name_max = kMaxName;
    return Status::ok();
}

std::uint64_t EngineImpl::data_room() {
    struct statvfs v {};
    if (!store_->statvfs(&v)) return UINT64_MAX;
    const std::uint64_t avail = std::uint64_t{v.f_bavail} * v.f_frsize;
    return avail > space_.reserve() ? avail - space_.reserve() : 0;
}

Status EngineImpl::counters(SpaceCounters* out) {
    // The in-memory state: readable even after a failed commit stopped the
    // store (when applying held writes fails too).
    (void)meta_->apply_held_back();
    *out = meta_->super_snapshot().counters;
    out->disk_bytes = segs_->disk_bytes();
    return Status::ok();
}

}  // namespace hiodsfs
