#include "stat/report.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/mountinfo.h"
#include "common/name_escape.h"
#include "common/units.h"
#include "hiodsfs/engine.h"
#include "hiodsfs/segment_store.h"

namespace hiodsfs::stat {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Loading

namespace {

double now_unix() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct MountEntry {
    std::string mountpoint, source;
};

// hiodsfs mounts (fuse.hiodsfs).
std::vector<MountEntry> hiodsfs_mounts() {
    std::vector<MountEntry> out;
    for (const MountInfo& m : read_mountinfo())
        if (m.fstype == "fuse.hiodsfs") out.push_back({m.mountpoint, m.source});
    return out;
}

bool is_store(const std::string& dir) {
    struct stat st{};
    return ::lstat((dir + "/FORMAT").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A file of the store (status.json, lock), never through a link put in its
// place: its text would end up in the report, or in an error message.
bool read_text(const std::string& path, std::string* out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    out->clear();
    char buf[65536];
    while (ok) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        out->append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return ok;
}

// A store's files are 0600 and its directories 0700: only its owner and
// root can read them, mounted or not. Says so rather than fail further on.
Status check_readable(const std::string& store) {
    for (const char* name : {"/meta", "/FORMAT"}) {
        const std::string path = store + name;
        if (::access(path.c_str(), R_OK) == 0 || errno != EACCES) continue;
        struct stat st {};
        const std::string owner = ::stat(path.c_str(), &st) == 0 ? "uid " + std::to_string(st.st_uid) : "its owner";
        return Status::error(EACCES, "cannot read store " + store + ": " + std::strerror(EACCES) +
                                         " (its files are private to " + owner + "; run hiodsfs-stat as root or as " +
                                         owner + ")");
    }
    return Status::ok();
}

// The pid in STORE/lock (the holder writes it), or 0.
long lock_pid(const std::string& store) {
    std::string text;
    if (!read_text(store + "/lock", &text)) return 0;
    return std::strtol(text.c_str(), nullptr, 10);
}

thread_local std::uint64_t g_du_bytes = 0;
int du_one(const char*, const struct stat* st, int flag, struct FTW*) {
    // FTW_NS: gone between the listing and its stat (status.json.tmp).
    if (flag != FTW_NS) g_du_bytes += static_cast<std::uint64_t>(st->st_blocks) * 512;
    return 0;
}

// Like du -sB1: allocated bytes of everything under dir.
std::uint64_t du_bytes(const std::string& dir) {
    g_du_bytes = 0;
    ::nftw(dir.c_str(), du_one, 16, FTW_PHYS | FTW_MOUNT);
    return g_du_bytes;
}

// An object of status.json, read leniently: a member that is missing or of
// another type reads as 0 or "", as the engine's status may gain or lose
// figures between versions. Never throws.
class Members {
public:
    explicit Members(const json& obj) : obj_(obj) {}
    const json& get(const char* key) const {
        static const json null;
        if (!obj_.is_object()) return null;
        auto it = obj_.find(key);
        return it != obj_.end() ? *it : null;
    }
    bool has(const char* key) const { return obj_.is_object() && obj_.contains(key); }
    std::uint64_t u(const char* key) const {
        const json& v = get(key);
        if (v.is_number_unsigned()) return v.get<std::uint64_t>();
        if (v.is_number_float()) {
            const double d = v.get<double>();
            return d >= 0 && d < 1.8e19 ? static_cast<std::uint64_t>(d) : 0;
        }
        return 0;  // negative, or not a number
    }
    double d(const char* key) const {
        const json& v = get(key);
        return v.is_number() ? v.get<double>() : 0;
    }
    // true, or a number other than 0.
    bool flag(const char* key) const {
        const json& v = get(key);
        return v.is_boolean() ? v.get<bool>() : u(key) != 0;
    }
    std::string s(const char* key) const {
        const json& v = get(key);
        return v.is_string() ? v.get<std::string>() : std::string();
    }

private:
    const json& obj_;
};

// nlohmann::json throws on bad text; the error comes back as one line
// (its message escapes control characters) prefixed with `what`.
Status parse_json(const std::string& text, const std::string& what, json* out) {
    try {
        *out = json::parse(text);
    } catch (const json::exception& e) {
        std::string m = e.what();  // "[json.exception.parse_error.101] parse error at ..."
        if (m.starts_with("[json.exception.") && m.find("] ") != std::string::npos) m.erase(0, m.find("] ") + 2);
        return Status::error(EINVAL, what + ": not valid JSON: " + m);
    }
    return Status::ok();
}

Status parse_file(const std::string& path, json* out, bool* exists) {
    std::string text;
    *exists = read_text(path, &text);
    if (!*exists) return Status::ok();
    return parse_json(text, path, out);
}

// The members events and history samples share.
template <class T>
void read_common(const Members& e, T* x) {
    x->mode = e.s("mode");
    x->ops_per_s = e.d("ops_per_s");
    x->bytes_per_s = e.d("bytes_per_s");
    x->backlog_records = e.u("backlog_records");
    x->backlog_bytes = e.u("backlog_bytes");
}

std::vector<Event> events_from(const json& status) {
    std::vector<Event> out;
    const Members st(status);
    if (!st.get("events").is_array()) return out;
    // Controller times are on the daemon's monotonic clock; now_ns and
    // unix_time_ns were taken at the same moment.
    const double mono_now = static_cast<double>(st.u("now_ns"));
    const double unix_now = static_cast<double>(st.u("unix_time_ns"));
    for (const auto& item : st.get("events")) {
        const Members e(item);
        Event x;
        x.unix_time = (unix_now - (mono_now - static_cast<double>(e.u("time_ns")))) / 1e9;
        read_common(e, &x);
        x.kind = e.s("kind");
        x.speed = e.d("speed");
        x.reason = e.s("reason");
        out.push_back(std::move(x));
    }
    return out;
}

std::vector<Sample> samples_from(const json& list) {
    std::vector<Sample> out;
    if (!list.is_array()) return out;
    for (const auto& item : list) {
        const Members e(item);
        Sample s;
        s.unix_time = static_cast<double>(e.u("unix_time_ns")) / 1e9;
        s.period_s = static_cast<double>(e.u("period_ns")) / 1e9;
        read_common(e, &s);
        s.background_bytes_per_s = e.d("background_bytes_per_s");
        s.logical_bytes = e.u("logical_bytes");
        s.stored_bytes = e.u("stored_bytes");
        out.push_back(std::move(s));
    }
    return out;
}

Status report_from(const json& status, Report* r) {
    const Members st(status);
    if (!st.has("logical_bytes"))
        return Status::error(EINVAL, "status is not a hiodsfs status object");
    r->logical_bytes = st.u("logical_bytes");
    r->stored_bytes = st.u("stored_bytes");
    r->content_bytes = st.has("content_bytes") ? st.u("content_bytes") : r->stored_bytes;
    r->dictionaries = st.u("dictionaries");
    r->disk_bytes = st.u("disk_bytes");
    r->dead_bytes = st.u("dead_bytes");
    r->raw_bytes = st.u("raw_bytes");
    r->chunk_count = st.u("chunk_count");
    r->file_count = st.u("file_count");
    r->inode_count = st.u("inode_count");
    r->segment_count = st.u("segment_count");
    r->dedup_hits = st.u("dedup_hits");
    r->cloned_bytes = st.u("cloned_bytes");
    r->backlog_records = st.u("backlog_records");
    r->backlog_bytes = st.u("backlog_bytes");
    r->store_error = st.s("store_error");  // null when the store is well
    r->quarantined_dirty_records = st.u("quarantined_dirty_records");  // older daemons: 0
    r->quarantined_deletes = st.u("quarantined_deletes");
    r->quarantine_error = st.s("quarantine_error");
    if (st.has("backend")) r->backend = st.s("backend");  // older daemons: local
    if (st.get("tier").is_object()) {
        const Members t(st.get("tier"));
        Report::Tier x;
        x.segments = t.u("segments");
        x.bytes = t.u("bytes");
        x.cached_segments = t.u("cached_segments");
        x.cached_bytes = t.u("cached_bytes");
        x.cache_limit = t.u("cache_limit");
        x.cache_hits = t.u("cache_hits");
        x.cache_misses = t.u("cache_misses");
        x.fetched_bytes = t.u("fetched_bytes");
        x.evictions = t.u("evictions");
        x.uploads = t.u("uploads");
        x.pending_uploads = t.u("pending_uploads");
        x.upload_failures = t.u("upload_failures");
        x.upload_error = t.s("upload_error");
        r->tier = x;
    }
    // The engine's read-corruption counter, under whichever name it has.
    r->read_errors = 0;
    for (const char* k : {"read_errors", "read_error_count", "corrupt_reads", "checksum_errors"})
        if (st.has(k)) {
            r->read_errors = st.u(k);
            break;
        }
    r->chunking = st.s("chunking");
    r->encryption = st.has("encryption") ? st.s("encryption") : "none";  // older daemons: none
    r->setting = st.s("setting");
    r->mode = st.s("mode");
    r->ops_per_s = st.d("ops_per_s");
    r->bytes_per_s = st.d("bytes_per_s");
    r->background_bytes_per_s = st.d("background_bytes_per_s");
    r->background_speed = st.d("background_speed");
    r->throttle_regime = st.s("throttle_regime");  // older daemons: ""
    r->held_fraction = st.d("held_fraction");
    r->backlog_limit_bytes = st.u("backlog_limit_bytes");
    r->reclaim_forced = st.flag("reclaim_forced");
    r->recompress_pending_segments = st.u("recompress_pending_segments");
    r->dictionary_pending = st.u("dictionary_pending") != 0;
    r->target_ops = st.d("target_ops");
    r->target_bytes_per_s = st.d("target_bytes_per_s");
    const double mono_now = static_cast<double>(st.u("now_ns")), unix_now = static_cast<double>(st.u("unix_time_ns"));
    if (st.has("mode_since_ns") && unix_now > 0)
        r->mode_since = (unix_now - (mono_now - static_cast<double>(st.u("mode_since_ns")))) / 1e9;
    r->events = events_from(status);
    r->history = samples_from(st.get("history"));
    r->daily = samples_from(st.get("history_daily"));
    return Status::ok();
}

}  // namespace

Status report_from_status(const std::string& status_json, Report* r) {
    json v;
    HIODSFS_TRY(parse_json(status_json, "status", &v));
    return report_from(v, r);
}

Status load_report(const std::string& arg, Report* out) {
    *out = Report{};
    char* real = ::realpath(arg.c_str(), nullptr);
    if (real == nullptr) return Status::from_errno(errno, arg);
    std::string path = real;
    std::free(real);

    const auto mounts = hiodsfs_mounts();
    std::string store, mountpoint;
    if (is_store(path)) {
        store = path;
        for (const auto& m : mounts)
            if (m.source == store) mountpoint = m.mountpoint;
    } else {
        for (const auto& m : mounts)
            if (m.mountpoint == path) {
                store = m.source;
                mountpoint = m.mountpoint;
            }
        if (store.empty())
            return Status::error(EINVAL, arg + " is neither a hiodsfs store nor a hiodsfs mount point");
        if (store.rfind("rados:", 0) == 0)
            return Status::error(EINVAL, arg + " is mounted from " + store +
                                             ": give hiodsfs-stat the mount's cache_dir instead");
        if (!is_store(store))
            return Status::error(EINVAL, arg + " is mounted from " + store +
                                             ", which is not a store directory (fsname= changed?)");
    }
    out->store = store;
    HIODSFS_TRY(check_readable(store));

    EngineOptions eo;
    eo.store_dir = store;
    eo.read_only = true;
    eo.read_only_at_last_commit = true;  // after a crash: the figures of the last commit
    eo.create_if_missing = false;
    eo.background_commit = false;
    eo.background_threads = 0;
    // Only reads: any owner's store (check_readable has let it through); no
    // link inside it is followed all the same.
    eo.any_store_owner = true;
    // Its figures are the metadata's, which an encrypted store keeps plain.
    eo.without_key = true;
    std::unique_ptr<Engine> engine;
    Status st = Engine::open(eo, &engine);
    if (st) {
        // Unmounted: the engine renders the same status JSON the daemon writes.
        json v;
        HIODSFS_TRY(parse_json(engine->status_json(), "the engine's status of " + store, &v));
        HIODSFS_TRY(report_from(v, out));
        (void)engine->close();
        engine.reset();
        out->mounted = false;
        out->mountpoint.clear();
        out->mode = "not mounted";
        out->setting.clear();
        out->mode_since.reset();
        out->ops_per_s = out->bytes_per_s = out->background_bytes_per_s = out->background_speed = 0;
        out->throttle_regime.clear();
        out->held_fraction = 0;
        out->backlog_limit_bytes = 0;
        out->reclaim_forced = false;
        out->target_ops = out->target_bytes_per_s = 0;
        out->recompress_pending_segments = 0;
        out->dictionary_pending = false;
        out->events.clear();
        // The last session's events, from the status it left behind.
        // A broken one only loses those events; the figures stand without them.
        json last;
        bool exists = false;
        if (parse_file(store + "/status.json", &last, &exists) && exists) {
            out->events = events_from(last);
            out->events_as_of = static_cast<double>(Members(last).u("unix_time_ns")) / 1e9;
            if (out->read_errors == 0) {
                Report prev;
                if (report_from(last, &prev)) out->read_errors = prev.read_errors;
            }
        }
        out->store_dir_bytes = du_bytes(store);
        return Status::ok();
    }
    if (st.err() != EBUSY) return st;

    // Mounted (or held by another tool): read what the daemon publishes. A
    // daemon that has just started has not written its first status yet:
    // wait for one with its pid, up to a few intervals.
    const long holder = lock_pid(store);
    const std::string status_path = store + "/status.json";
    json v;
    bool exists = false;
    for (int tries = 0;; ++tries) {
        HIODSFS_TRY(parse_file(status_path, &v, &exists));
        const bool fresh = exists && (holder == 0 || !Members(v).has("pid") ||
                                      static_cast<long>(Members(v).u("pid")) == holder);
        if (fresh) break;
        if (tries >= 50)
            return Status::error(EBUSY, "store " + store + " is in use by " +
                                            (holder ? "pid " + std::to_string(holder) : "another process") +
                                            ", which publishes no status.json (a read-only mount or another tool)");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (Status bad = report_from(v, out); !bad) return Status::error(EINVAL, status_path + ": " + bad.message());
    out->mounted = true;
    out->mountpoint = mountpoint;
    const Members status(v);
    out->status_age_s = status.has("unix_time_ns")
                            ? std::max(0.0, now_unix() - static_cast<double>(status.u("unix_time_ns")) / 1e9)
                            : 0;
    out->store_dir_bytes = du_bytes(store);
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Formatting

std::string utc_date(double unix_time) {
    time_t t = static_cast<time_t>(unix_time);
    struct tm tm{};
    gmtime_r(&t, &tm);
    char buf[16];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
    return buf;
}

std::string human_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    char buf[48];
    if (s < 60) std::snprintf(buf, sizeof(buf), "%.0f s", s);
    else if (s < 3600) std::snprintf(buf, sizeof(buf), "%d min %d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
    else if (s < 86400) std::snprintf(buf, sizeof(buf), "%d h %d min", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
    else std::snprintf(buf, sizeof(buf), "%d d %d h", static_cast<int>(s / 86400), static_cast<int>(s / 3600) % 24);
    return buf;
}

namespace {

std::string grouped(std::uint64_t v) {
    std::string d = std::to_string(v), out;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
        out += d[i];
    }
    return out;
}

std::string local_time(double unix_time, const char* fmt) {
    time_t t = static_cast<time_t>(unix_time);
    struct tm tm{};
    localtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof(buf), fmt, &tm);
    return buf;
}

struct Painter {
    bool on;
    std::string operator()(const std::string& s, const char* code) const {
        return on ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
    }
};

// One aligned line: label column, value column, note.
void line(std::string* o, const std::string& label, const std::string& value, const std::string& note = "",
          const Painter* paint = nullptr, const char* code = nullptr) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %-14s", label.c_str());
    std::string v = value;
    std::string pad = v.size() < 12 ? std::string(12 - v.size(), ' ') : " ";
    if (paint != nullptr && code != nullptr) v = (*paint)(v, code);
    *o += buf + pad + v + (note.empty() ? "" : "  " + note) + "\n";
}

std::string rate_text(double bytes_per_s) { return human_bytes(bytes_per_s) + "/s"; }

}  // namespace

std::string format_text(const Report& r, const Style& style) {
    Painter paint{style.color};
    std::string o;
    // Paths and messages may hold any byte (a user mounts a store under a
    // name of their own): escaped, so each stays on its line.
    o += paint("hiodsfs store " + escape_path(r.store), "1");
    if (r.mounted) {
        char age[32];
        std::snprintf(age, sizeof(age), "%.1f s", r.status_age_s);
        o += "  (mounted" +
             (r.mountpoint.empty() ? std::string() : " on " + escape_path(r.mountpoint)) +
             ", status " + age + " old)";
    } else {
        o += "  (not mounted)";
    }
    o += "\n";
    if (r.mounted && r.status_age_s > 30)
        o += paint("warning: the daemon has not updated its status for " + human_duration(r.status_age_s), "33") + "\n";
    o += "  chunking      " + escape_line(r.chunking) + "\n";
    o += "  encryption    " + escape_line(r.encryption) + (r.key_checked ? " (the key given opens it)" : "") + "\n\n";

    o += paint("Space", "1") + "\n";
    line(&o, "logical", human_bytes(static_cast<double>(r.logical_bytes)),
         "what the files hold (" + grouped(r.file_count) + " files, " + grouped(r.inode_count) + " inodes)");
    line(&o, "stored", human_bytes(static_cast<double>(r.stored_bytes)),
         "live chunk bytes, " + human_bytes(static_cast<double>(r.content_bytes)) + " before compression");
    line(&o, "on disk", human_bytes(static_cast<double>(r.disk_bytes)),
         grouped(r.segment_count) + " segment files, dead space included");
    char ratio[48];
    std::snprintf(ratio, sizeof(ratio), "ratio %.2f : 1", r.ratio());
    line(&o, "saved", human_bytes(static_cast<double>(r.saved_bytes())), ratio, &paint, "32");
    char factors[32];
    std::snprintf(factors, sizeof(factors), "%.2f : 1", r.dedup_ratio());
    line(&o, "dedup", factors, "logical / chunk bytes");
    std::snprintf(factors, sizeof(factors), "%.2f : 1", r.compression_ratio());
    line(&o, "compression", factors,
         "chunk bytes / stored, " + grouped(r.dictionaries) +
             (r.dictionaries == 1 ? " dictionary" : " dictionaries"));
    line(&o, "reclaimable", human_bytes(static_cast<double>(r.reclaimable_bytes())),
         human_bytes(static_cast<double>(r.dead_bytes)) + " of dead chunks; compaction gives it back");
    line(&o, "chunks", grouped(r.chunk_count),
         "mean " + human_bytes(r.mean_chunk_bytes()) + ", " + grouped(r.dedup_hits) + " duplicate chunks found");
    line(&o, "store dir", human_bytes(static_cast<double>(r.store_dir_bytes)), "allocated under the store (du)");
    line(&o, "backend", r.backend,
         r.backend == "local" ? "every segment in the store directory"
                              : "sealed segments there, the store directory caches them");
    if (r.tier) {
        const Report::Tier& t = *r.tier;
        line(&o, "in the tier", human_bytes(static_cast<double>(t.bytes)),
             grouped(t.segments) + " segments; " + grouped(t.uploads) + " uploaded this mount, " +
                 grouped(t.pending_uploads) + " waiting");
        const std::uint64_t reads = t.cache_hits + t.cache_misses;
        char rate_buf[32];
        std::snprintf(rate_buf, sizeof rate_buf, "%.1f %%", reads > 0 ? 100.0 * static_cast<double>(t.cache_hits) / static_cast<double>(reads) : 100.0);
        line(&o, "cache", human_bytes(static_cast<double>(t.cached_bytes)),
             "of " + human_bytes(static_cast<double>(t.cache_limit)) + "; hits " + rate_buf + " (" +
                 grouped(t.cache_hits) + " hits, " + grouped(t.cache_misses) + " fetches of " +
                 human_bytes(static_cast<double>(t.fetched_bytes)) + ")");
        if (!t.upload_error.empty())
            line(&o, "UPLOADS FAIL", escape_line(t.upload_error),
                 "retried; the segments stay in the store directory", &paint, "31");
    }
    o += "\n";

    o += paint("Activity", "1") + "\n";
    if (r.mounted) {
        std::string since;
        if (r.mode_since)
            since = "since " + local_time(*r.mode_since, "%Y-%m-%d %H:%M:%S") + " (" +
                    human_duration(std::max(0.0, (r.mode_since ? *r.mode_since : 0) > 0 ? std::time(nullptr) - *r.mode_since : 0)) + " ago)";
        std::string goal;
        if (r.target_ops > 0) goal += ", goal " + grouped(static_cast<std::uint64_t>(r.target_ops)) + " ops/s";
        if (r.target_bytes_per_s > 0) goal += ", goal " + rate_text(r.target_bytes_per_s);
        line(&o, "mode", r.mode, since + " (setting " + r.setting + goal + ")", &paint,
             r.mode == "deferred" ? "33" : "36");
        char ops[32];
        std::snprintf(ops, sizeof(ops), "%.0f ops/s", r.ops_per_s);
        line(&o, "writes now", ops, rate_text(r.bytes_per_s));
        char speed[48];
        std::snprintf(speed, sizeof(speed), "throttle speed %.2f", r.background_speed);
        line(&o, "background", rate_text(r.background_bytes_per_s),
             std::string(speed) + (r.throttle_regime.empty() ? "" : " (" + r.throttle_regime + ")"));
        if (r.reclaim_forced)
            line(&o, "reclaim", "forced", "dead space is over twice the live data: compaction runs at full speed", &paint,
                 "33");
        if (r.recompress_pending_segments > 0 || r.dictionary_pending)
            line(&o, "recompression", grouped(r.recompress_pending_segments) + " segments",
                 std::string("to look at for weakly compressed chunks when idle") +
                     (r.dictionary_pending ? "; a dictionary is being trained" : ""));
    } else {
        line(&o, "mode", "not mounted");
    }
    std::string eta;
    if (r.backlog_records > 0) {
        auto e = r.drain_eta_s();
        eta = e ? "drains in ~" + human_duration(*e) + " at " + rate_text(r.drain_rate())
                : std::string(r.mounted ? "not draining now (background paused)" : "drains when mounted");
    }
    line(&o, "backlog", human_bytes(static_cast<double>(r.backlog_bytes)),
         grouped(r.backlog_records) + " records" + (eta.empty() ? "" : ", " + eta) +
             (r.backlog_limit_bytes > 0 ? "; limit " + human_bytes(static_cast<double>(r.backlog_limit_bytes)) : ""));
    line(&o, "read errors", grouped(r.read_errors), "chunks that failed their checksum on read", &paint,
         r.read_errors > 0 ? "31" : nullptr);
    if (r.quarantined_dirty_records > 0 || r.quarantined_deletes > 0)
        line(&o, "set aside",
             grouped(r.quarantined_dirty_records) + " dirty, " + grouped(r.quarantined_deletes) +
                 " deletes",
             "tried again at the next mount; last: " + r.quarantine_error, &paint, "33");
    if (r.mounted && !r.store_error.empty())
        line(&o, "STOPPED", escape_line(r.store_error),
             "every change fails with EIO until the store is mounted again", &paint, "31");

    std::vector<const Event*> switches;
    for (const auto& e : r.events)
        if (e.kind == "mode_switch") switches.push_back(&e);
    if (!switches.empty()) {
        o += "\n" + paint(r.mounted ? "Mode switches" : "Mode switches (last mounted session)", "1") + "\n";
        std::size_t first = switches.size() > 8 ? switches.size() - 8 : 0;
        for (std::size_t i = first; i < switches.size(); ++i) {
            const Event& e = *switches[i];
            const std::string mode = escape_line(e.mode);
            o += "  " + local_time(e.unix_time, "%m-%d %H:%M:%S") + "  -> " + mode +
                 std::string(mode.size() < 9 ? 9 - mode.size() : 1, ' ') + escape_line(e.reason) +
                 "\n";
        }
    }
    return o;
}

std::string format_history(const Report& r, const Style& style) {
    Painter paint{style.color};
    std::string o = paint("History", "1") + " (a sample every 10 s while active, every minute when idle)\n";
    if (r.history.empty()) {
        o += "  no samples yet\n";
    } else {
        char buf[256];
        std::snprintf(buf, sizeof(buf), "  %-19s %-8s %9s %11s %11s %12s %11s %7s\n", "time", "mode", "ops/s",
                      "write/s", "backgr./s", "backlog", "saved", "ratio");
        o += buf;
        for (const auto& s : r.history) {
            double ratio = s.stored_bytes ? static_cast<double>(s.logical_bytes) / static_cast<double>(s.stored_bytes) : 1.0;
            std::snprintf(buf, sizeof(buf), "  %-19s %-8s %9.0f %11s %11s %12s %11s %7.2f\n",
                          local_time(s.unix_time, "%Y-%m-%d %H:%M:%S").c_str(), s.mode.c_str(), s.ops_per_s,
                          human_bytes(s.bytes_per_s).c_str(), human_bytes(s.background_bytes_per_s).c_str(),
                          human_bytes(static_cast<double>(s.backlog_bytes)).c_str(),
                          human_bytes(static_cast<double>(s.logical_bytes > s.stored_bytes ? s.logical_bytes - s.stored_bytes : 0)).c_str(),
                          ratio);
            o += buf;
        }
    }
    o += "\n" + paint("Space saved per day", "1") + " (UTC days, at the last sample of each day)\n";
    if (r.daily.empty()) {
        o += "  no samples yet\n";
        return o;
    }
    char buf[200];
    std::snprintf(buf, sizeof(buf), "  %-10s %12s %12s %12s %12s\n", "day", "logical", "stored", "saved", "change");
    o += buf;
    std::int64_t prev = 0;
    for (std::size_t i = 0; i < r.daily.size(); ++i) {
        const auto& s = r.daily[i];
        std::int64_t saved = static_cast<std::int64_t>(s.logical_bytes) - static_cast<std::int64_t>(s.stored_bytes);
        if (saved < 0) saved = 0;
        char change[48] = "";
        if (i != 0)
            std::snprintf(change, sizeof(change), "%s%s", saved >= prev ? "+" : "-",
                          human_bytes(static_cast<double>(std::llabs(saved - prev))).c_str());
        std::snprintf(buf, sizeof(buf), "  %-10s %12s %12s %12s %12s\n", utc_date(s.unix_time).c_str(),
                      human_bytes(static_cast<double>(s.logical_bytes)).c_str(),
                      human_bytes(static_cast<double>(s.stored_bytes)).c_str(),
                      human_bytes(static_cast<double>(saved)).c_str(), change);
        o += buf;
        prev = saved;
    }
    return o;
}

}  // namespace hiodsfs::stat
