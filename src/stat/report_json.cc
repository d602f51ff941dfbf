// hiodsfs-stat's --json output (schema docs/hiodsfs-stat.schema.json),
// apart from the report's loading and text output in report.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "stat/report.h"

namespace hiodsfs::stat {

double json_number(double v) {
    if (!std::isfinite(v)) return 0;
    // Large values (times, byte counts) keep every integer digit.
    char buf[400];  // %.3f of the largest double
    std::snprintf(buf, sizeof(buf), std::fabs(v) >= 1e6 ? "%.3f" : "%.6g", v);
    return std::strtod(buf, nullptr);
}

namespace {

using ojson = nlohmann::ordered_json;

// The schema has no NaN: a figure that is not finite is null where null is
// allowed, else 0; rates and speeds stay in the schema's range whatever a
// damaged status.json held.
ojson opt_num(const std::optional<double>& v) {
    return v && std::isfinite(*v) ? ojson(json_number(*v)) : ojson(nullptr);
}
double rate(double v) { return std::max(0.0, json_number(v)); }
double fraction(double v) { return std::clamp(json_number(v), 0.0, 1.0); }
ojson str_or_null(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

ojson sample_json(const Sample& s) {
    return {{"unix_time", json_number(s.unix_time)},
            {"period_s", rate(s.period_s)},
            {"mode", s.mode},
            {"ops_per_s", rate(s.ops_per_s)},
            {"bytes_per_s", rate(s.bytes_per_s)},
            {"background_bytes_per_s", rate(s.background_bytes_per_s)},
            {"backlog_records", s.backlog_records},
            {"backlog_bytes", s.backlog_bytes},
            {"logical_bytes", s.logical_bytes},
            {"stored_bytes", s.stored_bytes}};
}

}  // namespace

std::string format_json(const Report& r, bool with_history) {
    ojson j;
    j["schema"] = "hiodsfs-stat/1";
    j["store"] = r.store;
    j["mounted"] = r.mounted;
    j["mountpoint"] = str_or_null(r.mountpoint);
    j["status_age_s"] = opt_num(r.mounted ? std::optional<double>(r.status_age_s) : std::nullopt);
    j["chunking"] = r.chunking;
    j["encryption"] = r.encryption;
    if (r.key_checked) j["key_checked"] = true;
    j["space"] = {{"logical_bytes", r.logical_bytes},
                  {"stored_bytes", r.stored_bytes},
                  {"disk_bytes", r.disk_bytes},
                  {"content_bytes", r.content_bytes},
                  {"saved_bytes", r.saved_bytes()},
                  {"ratio", json_number(r.ratio())},
                  {"dedup_ratio", json_number(r.dedup_ratio())},
                  {"compression_ratio", json_number(r.compression_ratio())},
                  {"dictionaries", r.dictionaries},
                  {"dead_bytes", r.dead_bytes},
                  {"reclaimable_bytes", r.reclaimable_bytes()},
                  {"raw_bytes", r.raw_bytes},
                  {"cloned_bytes", r.cloned_bytes},
                  {"segment_count", r.segment_count},
                  {"store_dir_bytes", r.store_dir_bytes}};
    j["chunks"] = {{"count", r.chunk_count}, {"mean_bytes", json_number(r.mean_chunk_bytes())},
                   {"dedup_hits", r.dedup_hits}};
    j["files"] = {{"count", r.file_count}, {"inodes", r.inode_count}};
    j["backlog"] = {{"records", r.backlog_records},
                    {"bytes", r.backlog_bytes},
                    {"drain_bytes_per_s", rate(r.drain_rate())},
                    {"limit_bytes", r.backlog_limit_bytes},
                    {"eta_s", opt_num(r.drain_eta_s())}};
    j["activity"] = {{"setting", str_or_null(r.setting)},
                     {"mode", r.mode},
                     {"mode_since", opt_num(r.mode_since)},
                     {"ops_per_s", rate(r.ops_per_s)},
                     {"bytes_per_s", rate(r.bytes_per_s)},
                     {"background_bytes_per_s", rate(r.background_bytes_per_s)},
                     {"background_speed", fraction(r.background_speed)},
                     {"throttle_regime", str_or_null(r.throttle_regime)},
                     {"held_fraction", fraction(r.held_fraction)},
                     {"reclaim_forced", r.reclaim_forced},
                     {"target_ops", rate(r.target_ops)},
                     {"target_bytes_per_s", rate(r.target_bytes_per_s)},
                     {"recompress_pending_segments", r.recompress_pending_segments},
                     {"dictionary_pending", r.dictionary_pending}};
    j["read_errors"] = r.read_errors;
    j["store_error"] = str_or_null(r.store_error);
    j["quarantine"] = {{"dirty_records", r.quarantined_dirty_records},
                       {"deleted_files", r.quarantined_deletes},
                       {"last_error", str_or_null(r.quarantine_error)}};
    j["backend"] = r.backend;
    if (r.tier) {
        const Report::Tier& t = *r.tier;
        j["tier"] = {{"segments", t.segments},
                     {"bytes", t.bytes},
                     {"cached_segments", t.cached_segments},
                     {"cached_bytes", t.cached_bytes},
                     {"cache_limit", t.cache_limit},
                     {"cache_hits", t.cache_hits},
                     {"cache_misses", t.cache_misses},
                     {"fetched_bytes", t.fetched_bytes},
                     {"evictions", t.evictions},
                     {"uploads", t.uploads},
                     {"pending_uploads", t.pending_uploads},
                     {"upload_failures", t.upload_failures},
                     {"upload_error", str_or_null(t.upload_error)}};
    } else {
        j["tier"] = nullptr;
    }
    j["events_as_of"] = opt_num(r.events_as_of > 0 ? std::optional<double>(r.events_as_of) : std::nullopt);
    ojson events = ojson::array();
    for (const Event& e : r.events)
        events.push_back({{"unix_time", json_number(e.unix_time)},
                          {"kind", e.kind},
                          {"mode", e.mode},
                          {"ops_per_s", rate(e.ops_per_s)},
                          {"bytes_per_s", rate(e.bytes_per_s)},
                          {"speed", fraction(e.speed)},
                          {"backlog_records", e.backlog_records},
                          {"backlog_bytes", e.backlog_bytes},
                          {"reason", e.reason}});
    j["events"] = std::move(events);
    if (with_history) {
        ojson history = ojson::array();
        for (const Sample& s : r.history) history.push_back(sample_json(s));
        j["history"] = std::move(history);
        ojson daily = ojson::array();
        std::int64_t prev = 0;
        for (std::size_t i = 0; i < r.daily.size(); ++i) {
            const Sample& s = r.daily[i];
            const std::int64_t saved = std::max<std::int64_t>(
                0, static_cast<std::int64_t>(s.logical_bytes) - static_cast<std::int64_t>(s.stored_bytes));
            daily.push_back({{"date", utc_date(s.unix_time)},
                             {"unix_time", json_number(s.unix_time)},
                             {"logical_bytes", s.logical_bytes},
                             {"stored_bytes", s.stored_bytes},
                             {"saved_bytes", saved},
                             {"saved_change_bytes", i == 0 ? ojson(nullptr) : ojson(saved - prev)}});
            prev = saved;
        }
        j["daily"] = std::move(daily);
    }
    // Paths are bytes, JSON is UTF-8: an invalid sequence becomes U+FFFD
    // rather than an exception.
    return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace hiodsfs::stat
