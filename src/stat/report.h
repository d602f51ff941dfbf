// hiodsfs-stat's figures for one store, mounted or not, and how they are
// printed. A mounted store is read from STORE/status.json, which the daemon
// rewrites every control interval (the LMDB environment belongs to the
// daemon alone); an unmounted store is opened read-only with the engine,
// which renders the same JSON, so the figures are computed by the same code
// either way. The JSON schema of report_json() is docs/hiodsfs-stat.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

namespace hiodsfs::stat {

struct Event {
    double unix_time = 0;  // seconds since the epoch
    std::string kind;      // "mode_switch" or "throttle"
    std::string mode;
    double ops_per_s = 0, bytes_per_s = 0, speed = 0;
    std::uint64_t backlog_records = 0, backlog_bytes = 0;
    std::string reason;
};

struct Sample {
    double unix_time = 0, period_s = 0;
    std::string mode;
    double ops_per_s = 0, bytes_per_s = 0, background_bytes_per_s = 0;
    std::uint64_t backlog_records = 0, backlog_bytes = 0, logical_bytes = 0, stored_bytes = 0;
};

struct Report {
    std::string store;       // absolute path
    std::string mountpoint;  // "" when not mounted
    bool mounted = false;
    double status_age_s = 0;  // mounted: how old status.json is
    std::string chunking;
    std::string encryption = "none";  // or "xaes-256-gcm", "aes-256-gcm"
    bool key_checked = false;         // a key given opened it (check_store_key)
    std::string setting;      // inline | deferred | hybrid ("" when not mounted)
    std::string mode;         // inline | deferred | "not mounted"
    std::optional<double> mode_since;  // unix time
    // content_bytes: the live chunks' bytes before compression (a status
    // without it is from before compression: stored_bytes).
    std::uint64_t logical_bytes = 0, stored_bytes = 0, content_bytes = 0, disk_bytes = 0, dead_bytes = 0,
                  raw_bytes = 0, chunk_count = 0, file_count = 0, inode_count = 0,
                  segment_count = 0, dedup_hits = 0, cloned_bytes = 0, backlog_records = 0,
                  backlog_bytes = 0, read_errors = 0, store_dir_bytes = 0;
    // Mounted: what stopped the store (a failed metadata commit, a segment
    // write or sync the files refused), else "".
    std::string store_error;
    // The store's zstd dictionaries (docs/architecture.md, "Compression");
    // 0 from a daemon older than them.
    std::uint64_t dictionaries = 0;
    // Work of single files the background pass or the reclaimer failed on
    // and set aside: dirty records, deleted files, and the last reason.
    std::uint64_t quarantined_dirty_records = 0, quarantined_deletes = 0;
    std::string quarantine_error;
    // "local", or where the sealed segments live ("rados:POOL/STORE").
    std::string backend = "local";
    // Mounted with a tier: what it holds and how the cache in front of it does.
    struct Tier {
        std::uint64_t segments = 0, bytes = 0, cached_segments = 0, cached_bytes = 0, cache_limit = 0,
                      cache_hits = 0, cache_misses = 0, fetched_bytes = 0, evictions = 0, uploads = 0,
                      pending_uploads = 0, upload_failures = 0;
        std::string upload_error;
    };
    std::optional<Tier> tier;
    double ops_per_s = 0, bytes_per_s = 0, background_bytes_per_s = 0, background_speed = 0;
    double target_ops = 0, target_bytes_per_s = 0;
    // Mounted: why the throttle set that speed ("" from older daemons), and
    // the share of the last interval's writes that waited on the daemon.
    std::string throttle_regime;
    double held_fraction = 0;
    // The backlog's limit (0: none, or unmounted).
    std::uint64_t backlog_limit_bytes = 0;
    // Mounted: dead space is over its bound, so reclaim runs at full speed
    // whatever the throttle says.
    bool reclaim_forced = false;
    // Mounted: idle work still to come (recompression's segments to look
    // at, a dictionary round under way).
    std::uint64_t recompress_pending_segments = 0;
    bool dictionary_pending = false;
    std::vector<Event> events;  // mounted: this session's; unmounted: the last session's
    double events_as_of = 0;    // unmounted: when the last session wrote them (0 = none)
    std::vector<Sample> history, daily;

    // Derived figures.
    std::uint64_t saved_bytes() const;
    double ratio() const;  // logical / stored (1 when nothing is stored)
    // The two factors of ratio(), as zpool's dedupratio and zfs's
    // compressratio: logical / content, and content / stored.
    double dedup_ratio() const;
    double compression_ratio() const;
    double mean_chunk_bytes() const;
    std::uint64_t reclaimable_bytes() const;   // disk bytes not holding live records
    double drain_rate() const;                 // background bytes/s used for the ETA
    std::optional<double> drain_eta_s() const;  // empty when the rate is 0 and a backlog is left
};

// arg: a store directory or the mount point of a hiodsfs mount. Errors are
// one line for the user.
Status load_report(const std::string& arg, Report* out);
// Fills the report from a status JSON text (what STORE/status.json holds).
// Members missing or of another type read as 0 or ""; text that is not JSON
// or not an object is a one-line error.
Status report_from_status(const std::string& status_json, Report* out);

struct Style {
    bool color = false;
};
std::string format_text(const Report& r, const Style& style);
std::string format_history(const Report& r, const Style& style);
// The documented JSON (docs/hiodsfs-stat.md); history included when asked.
std::string format_json(const Report& r, bool with_history);
// v as --json writes it: 6 significant digits below 1e6, 3 decimals above;
// 0 when not finite (JSON has no NaN or infinity).
double json_number(double v);

// "1.50 GiB", "812 B".
// "3 h 12 min", "45 s".
std::string human_duration(double seconds);
// YYYY-MM-DD of a unix time, in UTC.
std::string utc_date(double unix_time);

}  // namespace hiodsfs::stat
