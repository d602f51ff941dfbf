#include "cli/options.h"

#include "common/units.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>

namespace hiodsfs::cli {

namespace po = boost::program_options;

namespace {

// Raw chunking choices; combined and checked once every option is seen.
struct ChunkingInput {
    std::optional<ChunkingParams::Kind> kind;
    std::optional<std::uint64_t> chunk_size, cdc_min, cdc_avg, cdc_max;
    // The sizes as the user wrote them ("3K"), for messages.
    std::string chunk_size_text, cdc_min_text, cdc_avg_text, cdc_max_text;
    bool any() const { return kind || chunk_size || cdc_min || cdc_avg || cdc_max; }
};

constexpr std::uint64_t kMinChunk = 256;
constexpr std::uint64_t kMaxChunk = 4u << 20;

std::string size_text(std::uint64_t bytes) {
    if (bytes != 0 && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
    if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
    return std::to_string(bytes);
}

// Options that mount(8), fstab and systemd use for themselves.
bool is_ignored(const std::string& key) {
    static const char* const kIgnored[] = {"defaults", "auto",  "noauto", "user",    "nouser",
                                           "users",    "owner", "group",  "_netdev", "nofail"};
    for (const char* k : kIgnored)
        if (key == k) return true;
    return key == "comment" || key.rfind("x-", 0) == 0 || key.rfind("X-", 0) == 0;
}

std::string unescape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        out.push_back(s[i]);
    }
    return out;
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == ',' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

bool parse_number(const std::string& text, double max, double* out) {
    if (text.empty()) return false;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v) || v < 0 || v > max) return false;
    *out = v;
    return true;
}

bool parse_seconds(const std::string& text, double* out) {
    if (text.empty()) return false;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v) || v < 0 || v > 86400) return false;
    *out = v;
    return true;
}

// What an option's apply function gets: the value (absent for a flag) and
// where results go. bad_value() sets the one-line error and returns false.
struct OptionInput {
    const std::string& key;
    const std::string& value;
    DaemonOptions* out;
    ChunkingInput* chunking;
    std::string* error;
    bool bad_value(const std::string& what) const {
        *error = "invalid value '" + value + "' for " + key + ": " + what;
        return false;
    }
};

// One of hiodsfs's own options: its name in -o (and as --name), its value's
// name in --help ("" for a flag that takes none), its --help text (lines
// after the first are continuation lines) and what it does. The table is
// the one list of them: the long flags, the -o parser and --help are made
// from it, and tests check the manual page and completion against it.
struct OptionSpec {
    const char* key;
    const char* metavar;
    std::string help;
    std::function<bool(const OptionInput&)> apply;
};

// A whole number from min to max, stored by `set`.
template <typename Set>
std::function<bool(const OptionInput&)> uint_option(std::uint64_t min, std::uint64_t max, std::string what,
                                                     Set set) {
    return [=](const OptionInput& in) {
        std::uint64_t v = 0;
        if (!parse_uint(in.value, min, max, &v)) return in.bad_value(what);
        set(*in.out, v);
        return true;
    };
}

// A size such as 16M: 0, or from min to max bytes.
template <typename Set>
std::function<bool(const OptionInput&)> size_option(std::uint64_t min, std::uint64_t max, std::string what,
                                                     Set set) {
    return [=](const OptionInput& in) {
        std::uint64_t v = 0;
        if (!parse_size(in.value, max, &v) || (v != 0 && v < min)) return in.bad_value(what);
        set(*in.out, v);
        return true;
    };
}

// A chunk size: a power of two from 256 to 4M; the message names the value
// as given, then what it means in bytes.
std::function<bool(const OptionInput&)> chunk_size_option(std::optional<std::uint64_t> ChunkingInput::*slot,
                                                          std::string ChunkingInput::*text) {
    return [=](const OptionInput& in) {
        std::uint64_t v = 0;
        if (!parse_size(in.value, kMaxChunk, &v) || v < kMinChunk)
            return in.bad_value("expected a power of two from 256 to 4M, such as 4096, 64K or 1M");
        if ((v & (v - 1)) != 0) {
            std::uint64_t below = 1;
            while (below * 2 < v) below *= 2;
            return in.bad_value(in.value + " is " + std::to_string(v) + " bytes, not a power of two (" +
                                size_text(below) + " or " + size_text(below * 2) + " would do)");
        }
        in.chunking->*slot = v;
        in.chunking->*text = in.value;
        return true;
    };
}

std::function<bool(const OptionInput&)> seconds_option(double DaemonOptions::*field) {
    return [=](const OptionInput& in) {
        double v = 0;
        if (!parse_seconds(in.value, &v)) return in.bad_value("expected seconds between 0 and 86400");
        in.out->*field = v;
        return true;
    };
}

std::function<bool(const OptionInput&)> compression_option(Compression DaemonOptions::*field) {
    return [=](const OptionInput& in) {
        Compression c;
        Status st = parse_compression(in.value, &c);
        if (!st) return in.bad_value("expected none, lz4, zstd or zstd:LEVEL with LEVEL 1-" + std::to_string(kMaxZstdLevel));
        in.out->*field = c;
        return true;
    };
}

const std::vector<OptionSpec>& option_table() {
    static const std::vector<OptionSpec> table = [] {
        const ChunkingParams cdc;
        const EngineOptions engine;
        std::vector<OptionSpec> t;
        t.push_back({"chunking", "fixed|cdc", "chunking of a new store (default cdc)",
                     [](const OptionInput& in) {
                         if (in.value == "fixed")
                             in.chunking->kind = ChunkingParams::Kind::kFixed;
                         else if (in.value == "cdc")
                             in.chunking->kind = ChunkingParams::Kind::kCdc;
                         else
                             return in.bad_value("expected fixed or cdc");
                         return true;
                     }});
        t.push_back({"chunk_size", "SIZE", "fixed chunk size (default 4K)",
                     chunk_size_option(&ChunkingInput::chunk_size, &ChunkingInput::chunk_size_text)});
        t.push_back({"cdc_min", "SIZE", "smallest CDC chunk (default " + size_text(cdc.min_size) + ", or cdc_avg/4)",
                     chunk_size_option(&ChunkingInput::cdc_min, &ChunkingInput::cdc_min_text)});
        t.push_back({"cdc_avg", "SIZE", "average CDC chunk (default " + size_text(cdc.avg_size) + ")",
                     chunk_size_option(&ChunkingInput::cdc_avg, &ChunkingInput::cdc_avg_text)});
        t.push_back({"cdc_max", "SIZE",
                     "largest CDC chunk (default " + size_text(cdc.max_size) +
                         ", or cdc_avg*4)\n"
                         "(sizes: powers of two, 256 to 4M, K/M suffixes)\n"
                         "for an existing store, given chunking must match",
                     chunk_size_option(&ChunkingInput::cdc_max, &ChunkingInput::cdc_max_text)});
        t.push_back({"mode", "MODE",
                     "inline: deduplicate on the write path;\n"
                     "deferred: write raw, deduplicate in the background;\n"
                     "hybrid (default): switch between them to meet\n"
                     "the goal below (no goal: stays inline)",
                     [](const OptionInput& in) {
                         if (in.value == "inline")
                             in.out->mode = DedupMode::kInline;
                         else if (in.value == "deferred")
                             in.out->mode = DedupMode::kDeferred;
                         else if (in.value == "hybrid")
                             in.out->mode = DedupMode::kHybrid;
                         else
                             return in.bad_value("expected inline, deferred or hybrid");
                         return true;
                     }});
        t.push_back({"target_ops", "N", "write ops/s goal for hybrid (default 0: none)", [](const OptionInput& in) {
                         double v = 0;
                         if (!parse_number(in.value, 1e9, &v)) return in.bad_value("expected write ops/s (0 = no goal)");
                         in.out->control.target_ops = v;
                         return true;
                     }});
        t.push_back({"target_bytes", "SIZE", "write bytes/s goal for hybrid, e.g. 200M (default 0)",
                     size_option(0, 1ull << 40, "expected bytes/s such as 200M (0 = no goal)",
                                 [](DaemonOptions& o, std::uint64_t v) {
                                     o.control.target_bytes_per_s = static_cast<double>(v);
                                 })});
        t.push_back({"policy", "NAME", "hybrid's mode policy: capacity (default) or hiods", [](const OptionInput& in) {
                         std::vector<std::string> names = policy_names();
                         if (std::find(names.begin(), names.end(), in.value) == names.end()) {
                             std::string known;
                             for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
                             return in.bad_value("expected one of " + known);
                         }
                         in.out->policy = in.value;
                         return true;
                     }});
        t.push_back({"compression", "METHOD",
                     "how writes store new chunks: none, lz4 or zstd[:LEVEL]\n"
                     "(LEVEL 1-19; default " + compression_name(DaemonOptions{}.compression) + ")",
                     compression_option(&DaemonOptions::compression)});
        t.push_back({"compression_background", "METHOD",
                     "how the background pass and compaction store them\n"
                     "(default " + compression_name(DaemonOptions{}.compression_background) + ")",
                     compression_option(&DaemonOptions::compression_background)});
        t.push_back(
            {"dictionary_min", "SIZE",
             "train a zstd dictionary from the store's chunks once\n"
             "it holds SIZE of them, again at 8 times that (default\n" +
                 size_text(engine.dictionary_min_bytes) + "; 0: never)",
             size_option(1u << 20, 1ull << 50,
                         "expected a size of at least 1M, such as 64M or 1G, or 0 (never)",
                         [](DaemonOptions& o, std::uint64_t v) { o.dictionary_min_bytes = v; })});
        t.push_back({"control_interval", "MS", "controller sampling interval (default 1000)",
                     uint_option(10, 60000, "expected milliseconds between 10 and 60000",
                                 [](DaemonOptions& o, std::uint64_t v) { o.control.interval_ms = v; })});
        t.push_back({"background_threads", "N", "background deduplication workers (default 2)",
                     uint_option(0, 64, "expected 0 to 64", [](DaemonOptions& o, std::uint64_t v) {
                         o.background_threads = static_cast<unsigned>(v);
                     })});
        t.push_back({"background_nice", "N",
                     "CPU nice value of background work: requests are\n"
                     "served first, it takes the CPU they leave\n"
                     "(0 to 19, default " + std::to_string(engine.background_nice) + "; 0: as requests)",
                     uint_option(0, 19, "expected 0 to 19", [](DaemonOptions& o, std::uint64_t v) {
                         o.background_nice = static_cast<int>(v);
                     })});
        t.push_back({"backlog_max", "SIZE|PCT%",
                     "the largest backlog of data not yet deduplicated:\n"
                     "past it hybrid writes inline and a deferred pass\n"
                     "takes what it needs from the foreground (default\n" +
                         std::to_string(engine.backlog_max_percent) +
                         "% of the free space; 0: no limit)",
                     [](const OptionInput& in) {
                         const std::string what = "expected a size such as 4G, a percentage from 1% to 100%, or 0";
                         std::uint64_t v = 0;
                         if (!in.value.empty() && in.value.back() == '%') {
                             if (!parse_uint(in.value.substr(0, in.value.size() - 1), 1, 100, &v))
                                 return in.bad_value(what);
                             in.out->backlog_max_percent = static_cast<unsigned>(v);
                             in.out->backlog_max_bytes = 0;
                             return true;
                         }
                         if (!parse_size(in.value, 1ull << 60, &v) || (v != 0 && v < (1u << 20)))
                             return in.bad_value(what + " (a size is at least 1M)");
                         in.out->backlog_max_bytes = v;
                         in.out->backlog_max_percent = 0;
                         return true;
                     }});
        t.push_back({"compact_threshold", "PCT",
                     "compact segments less than PCT % live (default 50;\n"
                     "0: only delete segments without live data)",
                     uint_option(0, 100, "expected a percentage, 0 to 100", [](DaemonOptions& o, std::uint64_t v) {
                         o.compact_threshold = static_cast<unsigned>(v);
                     })});
        t.push_back({"commit_interval", "MS", "metadata group commit interval (default 1000)",
                     uint_option(1, 3600000, "expected milliseconds between 1 and 3600000",
                                 [](DaemonOptions& o, std::uint64_t v) {
                                     o.commit_interval_ms = static_cast<std::uint32_t>(v);
                                 })});
        t.push_back({"commit_writes", "N",
                     "and sooner once a group holds N metadata writes\n"
                     "(default " + std::to_string(engine.commit_writes) + "; 0: no limit): bounds its memory",
                     uint_option(0, 1ull << 30, "expected a number of metadata writes, 0 (no limit) to 2^30",
                                 [](DaemonOptions& o, std::uint64_t v) { o.commit_writes = v; })});
        t.push_back({"meta_dirty", "SIZE",
                     "and sooner once a group has dirtied about SIZE of\n"
                     "index pages (default " + size_text(engine.meta_dirty_bytes) + "; 0: no limit): bounds\n"
                     "its memory as the index grows",
                     size_option(64u << 10, 1ull << 40, "expected a size of at least 64K, such as 16M, or 0 (no limit)",
                                 [](DaemonOptions& o, std::uint64_t v) { o.meta_dirty_bytes = v; })});
        t.push_back({"meta_resident", "SIZE",
                     "unmap the metadata pages read once more than SIZE\n"
                     "are mapped; they stay in the page cache (default\n" +
                         size_text(engine.meta_resident_bytes) + "; 0: never)",
                     size_option(1u << 20, 1ull << 50,
                                 "expected a size of at least 1M, such as 128M or 1G, or 0 (no limit)",
                                 [](DaemonOptions& o, std::uint64_t v) { o.meta_resident_bytes = v; })});
        t.push_back({"meta_compact", "SIZE",
                     "at unmount, rewrite the metadata compacted if it is\n"
                     "at most SIZE and that saves 10 % (default " +
                         size_text(engine.meta_compact_max_bytes) + ";\n0: never)",
                     size_option(0, 1ull << 50, "expected a size such as 256M or 4G, or 0 (never)",
                                 [](DaemonOptions& o, std::uint64_t v) { o.meta_compact_max_bytes = v; })});
        t.push_back({"meta_map", "SIZE",
                     "the address space the metadata is mapped in, the most\n"
                     "it may grow to (default " + size_text(engine.lmdb_map_bytes) + "): lower it where\n"
                     "virtual memory is limited (ulimit -v)",
                     [](const OptionInput& in) {
                         // No 0: a map of no size is no store.
                         std::uint64_t v = 0;
                         if (!parse_size(in.value, 1ull << 40, &v) || v < (64u << 20))
                             return in.bad_value("expected a size from 64M to 1024G, such as 4G");
                         in.out->meta_map_bytes = v;
                         return true;
                     }});
        t.push_back({"writeback_cache", "", "kernel writeback cache (default)", [](const OptionInput& in) {
                         in.out->writeback_cache = true;
                         return true;
                     }});
        t.push_back({"no_writeback_cache", "", "write through to the daemon on every write",
                     [](const OptionInput& in) {
                         in.out->writeback_cache = false;
                         return true;
                     }});
        t.push_back({"max_write", "SIZE", "largest write request, 4K to 1M (default 1M)", [](const OptionInput& in) {
                         std::uint64_t v = 0;
                         if (!parse_size(in.value, 1u << 20, &v) || v < 4096)
                             return in.bad_value("expected a size between 4K and 1M");
                         in.out->max_write = static_cast<std::uint32_t>(v);
                         return true;
                     }});
        t.push_back({"threads", "N", "request threads (default 10)",
                     uint_option(1, 1024, "expected 1 to 1024",
                                 [](DaemonOptions& o, std::uint64_t v) { o.threads = static_cast<unsigned>(v); })});
        t.push_back({"request_poll", "USEC",
                     "one request thread at a time waits for the next\n"
                     "request, polling this long before it sleeps: fewer\n"
                     "wake-ups for copiers that send one request at a time\n"
                     "when the CPU has room (default 0: off; e.g. 50)",
                     uint_option(0, 10000, "expected 0 to 10000 microseconds", [](DaemonOptions& o, std::uint64_t v) {
                         o.request_poll_us = static_cast<unsigned>(v);
                     })});
        t.push_back({"entry_timeout", "SECONDS", "kernel name cache timeout (default 86400)",
                     seconds_option(&DaemonOptions::entry_timeout)});
        t.push_back({"attr_timeout", "SECONDS", "kernel attribute cache timeout (default 86400)",
                     seconds_option(&DaemonOptions::attr_timeout)});
        t.push_back({"nonempty", "", "mount over a directory that is not empty", [](const OptionInput& in) {
                         in.out->nonempty = true;
                         return true;
                     }});
        t.push_back({"unsafe_store_dir", "",
                     "accept a store (or cache_dir) that another user owns\n"
                     "or that group or others may write: they could replace\n"
                     "its files (refused otherwise; links are never followed)",
                     [](const OptionInput& in) {
                         in.out->unsafe_store_dir = true;
                         return true;
                     }});
        t.push_back({"key_file", "FILE",
                     "encrypt a new store with the 32-byte key in FILE, or\n"
                     "open an encrypted one (FILE: mode 0600, owned by root)",
                     [](const OptionInput& in) {
                         if (in.value.empty()) return in.bad_value("expected the key file's path");
                         in.out->key_file = in.value;
                         return true;
                     }});
        t.push_back({"key", "ask",
                     "encrypt a new store, or open an encrypted one, with a\n"
                     "passphrase asked for on the terminal, read from standard\n"
                     "input, or through systemd-ask-password",
                     [](const OptionInput& in) {
                         if (in.value != "ask")
                             return in.bad_value("the only form is key=ask (a key file is key_file=FILE)");
                         in.out->key_ask = true;
                         return true;
                     }});
        // rados:POOL/STORE only (checked once the store is known).
        t.push_back({"cache_dir", "DIR",
                     "rados:POOL/STORE: the local directory of its metadata,\n"
                     "active segment and cached segments (required)",
                     [](const OptionInput& in) {
                         in.out->cache_dir = in.value;
                         return true;
                     }});
        t.push_back({"cache_size", "SIZE",
                     "rados:POOL/STORE: segments kept in cache_dir beyond\n"
                     "what is not yet uploaded (default 1G; at least 1M)",
                     size_option(1u << 20, 1ull << 50, "expected a size of at least 1M, such as 512M or 20G",
                                 [](DaemonOptions& o, std::uint64_t v) { o.cache_size = v; })});
        t.push_back({"ceph_conf", "FILE", "rados:POOL/STORE: the cluster's ceph.conf\n(default /etc/ceph/ceph.conf)",
                     [](const OptionInput& in) {
                         in.out->ceph_conf = in.value;
                         return true;
                     }});
        t.push_back({"ceph_id", "ID", "rados:POOL/STORE: connect as client.ID (default admin)",
                     [](const OptionInput& in) {
                         in.out->ceph_id = in.value;
                         return true;
                     }});
        t.push_back({"rados_timeout", "SECONDS",
                     "rados:POOL/STORE: bound on connecting and on each\nRADOS operation (default 10)",
                     uint_option(1, 3600, "expected seconds between 1 and 3600", [](DaemonOptions& o, std::uint64_t v) {
                         o.rados_timeout = static_cast<unsigned>(v);
                     })});
        t.push_back({"rados_lease", "SECONDS",
                     "rados:POOL/STORE: the store lock's lease, renewed every\n"
                     "quarter of it: how long a dead daemon keeps the store\n(default 60)",
                     uint_option(4, 3600, "expected seconds between 4 and 3600", [](DaemonOptions& o, std::uint64_t v) {
                         o.rados_lease = static_cast<unsigned>(v);
                     })});
        return t;
    }();
    return table;
}

const OptionSpec* find_option(const std::string& key) {
    for (const OptionSpec& spec : option_table())
        if (key == spec.key) return &spec;
    return nullptr;
}

class Parser {
public:
    explicit Parser(DaemonOptions* out) : out_(out) {}

    // One option, from a long flag or the -o list. key is unescaped;
    // raw is the -o item as given (for pass-through), empty for long flags.
    bool apply(const std::string& key, const std::optional<std::string>& value,
               const std::string& raw, std::string* error) {
        if (const OptionSpec* spec = find_option(key)) {
            const bool flag = *spec->metavar == '\0';
            if (flag && value) {
                *error = "option " + key + " takes no value";
                return false;
            }
            if (!flag && (!value || value->empty())) {
                *error = "option " + key + " needs a value (" + key + "=...)";
                return false;
            }
            const std::string none;
            return spec->apply(OptionInput{key, value ? *value : none, out_, &chunking_, error});
        }
        if (raw.empty()) {
            *error = "unknown option --" + key;
            return false;
        }
        if (is_ignored(key)) return true;
        if (key == "ro") out_->read_only = true;
        if (key == "rw") out_->read_only = false;
        // Everything else is libfuse's to accept or reject.
        out_->fuse_options.push_back(raw);
        return true;
    }

    bool apply_item(const std::string& raw, std::string* error) {
        if (raw.empty()) return true;
        std::string item = unescape(raw);
        std::size_t eq = item.find('=');
        std::string key = item.substr(0, eq);
        std::optional<std::string> value;
        if (eq != std::string::npos) value = item.substr(eq + 1);
        return apply(key, value, raw, error);
    }

    bool finish(std::string* error) {
        if (!chunking_.any()) return true;
        auto kind = chunking_.kind.value_or(chunking_.chunk_size ? ChunkingParams::Kind::kFixed
                                                                 : ChunkingParams::Kind::kCdc);
        bool cdc_sizes = chunking_.cdc_min || chunking_.cdc_avg || chunking_.cdc_max;
        if (kind == ChunkingParams::Kind::kFixed) {
            if (cdc_sizes) {
                *error = "cdc_min, cdc_avg and cdc_max apply to chunking=cdc only";
                return false;
            }
            out_->chunking = ChunkingParams::fixed(
                static_cast<std::uint32_t>(chunking_.chunk_size.value_or(4096)));
        } else {
            if (chunking_.chunk_size) {
                *error = "chunk_size applies to chunking=fixed only (use cdc_min/cdc_avg/cdc_max)";
                return false;
            }
            // The chunk component's defaults; bounds not given follow a given
            // average with FastCDC's usual 1/4 and 4x.
            const ChunkingParams defaults;
            std::uint64_t avg = chunking_.cdc_avg.value_or(defaults.avg_size);
            std::uint64_t min =
                chunking_.cdc_min.value_or(chunking_.cdc_avg ? avg / 4 : defaults.min_size);
            std::uint64_t max =
                chunking_.cdc_max.value_or(chunking_.cdc_avg ? avg * 4 : defaults.max_size);
            // Each size as the user gave it, or where it came from.
            auto named = [&](const char* key, const std::optional<std::uint64_t>& given,
                             const std::string& text, std::uint64_t v, const char* derived) {
                if (given) return std::string(key) + "=" + text;
                return std::string(key) + " " + size_text(v) + " (" +
                       (chunking_.cdc_avg ? derived : "default") + ")";
            };
            const std::string sizes =
                named("cdc_min", chunking_.cdc_min, chunking_.cdc_min_text, min, "cdc_avg/4") + ", " +
                named("cdc_avg", chunking_.cdc_avg, chunking_.cdc_avg_text, avg, "default") + ", " +
                named("cdc_max", chunking_.cdc_max, chunking_.cdc_max_text, max, "cdc_avg*4");
            if (min < kMinChunk || max > kMaxChunk) {
                *error = "CDC chunk sizes must be 256 to 4M; got " + sizes;
                return false;
            }
            if (!(min < avg && avg < max)) {
                *error = "CDC chunk sizes must satisfy cdc_min < cdc_avg < cdc_max; got " + sizes;
                return false;
            }
            out_->chunking = ChunkingParams::cdc(static_cast<std::uint32_t>(min),
                                                 static_cast<std::uint32_t>(avg),
                                                 static_cast<std::uint32_t>(max));
        }
        Status st = out_->chunking.validate();
        if (!st.is_ok()) {
            *error = st.message();
            return false;
        }
        out_->chunking_given = true;
        return true;
    }

private:
    DaemonOptions* out_;
    ChunkingInput chunking_;
};

// rados:POOL/STORE: checks it and its options, and makes cache_dir the
// store directory. Options of a RADOS store given for a local one are
// refused rather than ignored.
bool apply_rados_source(DaemonOptions* out, std::string* error) {
    const DaemonOptions defaults;
    const std::string prefix = "rados:";
    if (out->store.rfind(prefix, 0) != 0) {
        if (!out->cache_dir.empty() || out->cache_size != defaults.cache_size ||
            out->ceph_conf != defaults.ceph_conf || out->ceph_id != defaults.ceph_id ||
            out->rados_timeout != defaults.rados_timeout || out->rados_lease != defaults.rados_lease) {
            *error = "cache_dir, cache_size, ceph_conf, ceph_id, rados_timeout and rados_lease are for a store given "
                     "as rados:POOL/STORE, not " + out->store;
            return false;
        }
        return true;
    }
    std::string pool, name;
    if (!parse_rados_source(out->store, &pool, &name, error)) return false;
    if (out->cache_dir.empty()) {
        *error = out->store + " needs -o cache_dir=DIR: the local directory of its metadata and cache";
        return false;
    }
    // A daemon starts no write within rados_timeout of its lease's end (it
    // could land after it); the rest of the lease must leave room for a
    // renewal that fails (taking up to rados_timeout) and one more. The
    // fence itself is the cluster's: the next holder blocklists it.
    if (out->rados_lease <= 2 * out->rados_timeout) {
        *error = "rados_lease=" + std::to_string(out->rados_lease) +
                 " must be more than twice rados_timeout=" + std::to_string(out->rados_timeout) +
                 ": a daemon writes nothing in the last rados_timeout of its "
                 "lease, and needs the rest to renew it";
        return false;
    }
    out->rados = true;
    out->rados_source = out->store;
    out->rados_pool = pool;
    out->rados_store = name;
    out->store = out->cache_dir;
    return true;
}

}  // namespace

std::vector<std::string> split_option_list(const std::string& list) {
    std::vector<std::string> items;
    std::string cur;
    for (std::size_t i = 0; i < list.size(); ++i) {
        char c = list[i];
        if (c == '\\' && i + 1 < list.size()) {
            cur.push_back(c);
            cur.push_back(list[++i]);
        } else if (c == ',') {
            items.push_back(std::move(cur));
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    items.push_back(std::move(cur));
    return items;
}

bool parse_command_line(int argc, const char* const* argv, DaemonOptions* out, std::string* error) {
    // --chunk-size and --chunk_size are the same flag; -o items only ever
    // use underscores, as mount options do.
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) == 0 && a.size() > 2) {
            std::size_t end = a.find('=');
            for (std::size_t j = 2; j < std::min(end, a.size()); ++j)
                if (a[j] == '-') a[j] = '_';
        }
        args.push_back(std::move(a));
    }

    po::options_description desc;
    // clang-format off
    desc.add_options()
        ("help,h", po::bool_switch(&out->show_help))
        ("version,V", po::bool_switch(&out->show_version))
        ("foreground,f", po::bool_switch(&out->foreground))
        ("debug,d", po::bool_switch(&out->debug))
        ("single,s", po::bool_switch(&out->single_thread))
        ("option,o", po::value<std::vector<std::string>>()->composing())
        ("store", po::value<std::string>())
        ("mountpoint", po::value<std::string>());
    // clang-format on
    // The table's options as --name=value, and its flags as --name.
    for (const OptionSpec& spec : option_table()) {
        if (*spec.metavar != '\0')
            desc.add_options()(spec.key, po::value<std::string>());
        else
            desc.add_options()(spec.key, po::bool_switch());
    }
    po::positional_options_description positional;
    positional.add("store", 1).add("mountpoint", 1);

    po::variables_map vm;
    try {
        auto style =
            po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
        po::store(
            po::command_line_parser(args).options(desc).positional(positional).style(style).run(),
            vm);
        po::notify(vm);
    } catch (const po::error& e) {
        *error = std::string(e.what()) + " (see hiodsfs --help)";
        return false;
    }
    if (out->show_help || out->show_version) return true;

    Parser parser(out);
    if (vm.count("option")) {
        for (const std::string& list : vm["option"].as<std::vector<std::string>>())
            for (const std::string& item : split_option_list(list))
                if (!parser.apply_item(item, error)) return false;
    }
    // Long flags come after -o so that they win.
    auto given = [&](const OptionSpec& spec) {
        return vm.count(spec.key) && (*spec.metavar != '\0' || vm[spec.key].as<bool>());
    };
    if (given(*find_option("writeback_cache")) && given(*find_option("no_writeback_cache"))) {
        *error = "--writeback_cache and --no_writeback_cache exclude each other";
        return false;
    }
    for (const OptionSpec& spec : option_table()) {
        if (!given(spec)) continue;
        std::optional<std::string> value;
        if (*spec.metavar != '\0') value = vm[spec.key].as<std::string>();
        if (!parser.apply(spec.key, value, "", error)) return false;
    }
    if (!parser.finish(error)) return false;
    if (out->key_ask && !out->key_file.empty()) {
        *error = "key=ask and key_file= exclude each other: a store opens with its key file or its passphrase";
        return false;
    }
    Status control = out->control.validate();
    if (!control.is_ok()) {
        *error = control.message();
        return false;
    }

    // Without workers nothing drains the dirty queue while mounted. Kept
    // legal: a backlog can be held for a later mount (and benchmarks and
    // tests measure the raw write path that way), but never silently.
    const bool goal = out->control.target_ops > 0 || out->control.target_bytes_per_s > 0;
    if (out->background_threads == 0 && !out->read_only &&
        (out->mode == DedupMode::kDeferred || (out->mode == DedupMode::kHybrid && goal)))
        out->warnings.push_back(
            std::string("warning: background_threads=0 with ") +
            (out->mode == DedupMode::kDeferred ? "mode=deferred" : "mode=hybrid and a goal") +
            ": what is written deferred is not deduplicated during this mount; its backlog "
            "waits for a mount with background_threads of 1 or more");

    if (!vm.count("store") || !vm.count("mountpoint")) {
        *error = "usage: hiodsfs STORE MOUNTPOINT [-o opt,...] (see hiodsfs --help)";
        return false;
    }
    out->store = vm["store"].as<std::string>();
    out->mountpoint = vm["mountpoint"].as<std::string>();
    if (out->store.empty() || out->mountpoint.empty()) {
        *error = "STORE and MOUNTPOINT must not be empty";
        return false;
    }
    if (!apply_rados_source(out, error)) return false;
    if (out->debug) out->foreground = true;
    return true;
}

std::string fuse_option_string(const DaemonOptions& options) {
    bool fsname = false, subtype = false, default_permissions = false;
    std::string joined;
    for (const std::string& o : options.fuse_options) {
        fsname |= o.rfind("fsname=", 0) == 0;
        subtype |= o.rfind("subtype=", 0) == 0;
        default_permissions |= o == "default_permissions";
        if (!joined.empty()) joined += ',';
        joined += o;
    }
    auto add = [&](const std::string& o) {
        if (!joined.empty()) joined += ',';
        joined += o;
    };
    // The engine checks no permissions; the kernel must.
    if (!default_permissions) add("default_permissions");
    if (!fsname) add("fsname=" + escape(options.rados ? options.rados_source : options.store));
    if (!subtype) add("subtype=hiodsfs");
    return joined;
}

std::vector<std::string> option_keys() {
    std::vector<std::string> keys;
    for (const OptionSpec& spec : option_table()) keys.push_back(spec.key);
    return keys;
}

std::string usage_text() {
    std::ostringstream o;
    o << "usage: hiodsfs STORE MOUNTPOINT [-o opt,...] [-f] [-d] [-s]\n"
         "       hiodsfs rados:POOL/STORE MOUNTPOINT -o cache_dir=DIR[,cache_size=SIZE,ceph_conf=FILE]\n"
         "       mount -t fuse.hiodsfs STORE MOUNTPOINT [-o opt,...]\n"
         "\n"
         "Mounts the deduplicating store STORE (created on first use) at MOUNTPOINT.\n"
         "A store rados:POOL/STORE keeps its sealed segments as objects of that Ceph\n"
         "pool and its metadata and a cache of segments in cache_dir.\n"
         "\n"
         "  -h, --help              this text\n"
         "  -V, --version           version of hiodsfs and libfuse\n"
         "  -f                      stay in the foreground\n"
         "  -d                      debug output (implies -f)\n"
         "  -s                      single-threaded\n"
         "  -o opt,...              mount options (below, and libfuse's)\n"
         "\n"
         "hiodsfs options, as -o name=value or --name=value:\n";
    // Names in a column of 24, help beside them, continuation lines under it.
    for (const OptionSpec& spec : option_table()) {
        std::string name = std::string(spec.key) + (*spec.metavar != '\0' ? std::string("=") + spec.metavar : "");
        std::istringstream lines(spec.help);
        std::string line;
        bool first = true;
        while (std::getline(lines, line)) {
            std::string left = first ? "  " + name : "";
            if (left.size() < 26) left.resize(26, ' ');
            else left += "\n" + std::string(26, ' ');
            o << left << line << "\n";
            first = false;
        }
    }
    o << "\n"
         "FUSE options passed on: allow_other, allow_root, auto_unmount, ro, rw,\n"
         "fsname= (default STORE), subtype= (default hiodsfs), nosuid, nodev,\n"
         "noexec, noatime, max_read=, ... default_permissions is always on.\n"
         "Ignored (for fstab and mount): defaults, auto, noauto, user, users,\n"
         "nouser, owner, group, _netdev, nofail, x-*, comment=.\n";
    return o.str();
}

}  // namespace hiodsfs::cli
