#include "fuse/options.h"

#include "common/units.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace hiodsfs::fuse {

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

class Parser {
public:
    explicit Parser(DaemonOptions* out) : out_(out) {}

    // One option, from a long flag or the -o list. key is unescaped;
    // raw is the -o item as given (for pass-through), empty for long flags.
    bool apply(const std::string& key, const std::optional<std::string>& value,
               const std::string& raw, std::string* error) {
        auto need_value = [&]() {
            if (value && !value->empty()) return true;
            *error = "option " + key + " needs a value (" + key + "=...)";
            return false;
        };
        auto bad_value = [&](const std::string& what) {
            *error = "invalid value '" + *value + "' for " + key + ": " + what;
            return false;
        };
        // A chunk size: a power of two from 256 to 4M; the message names
        // the value as given, then what it means in bytes.
        auto size_opt = [&](std::optional<std::uint64_t>* slot, std::string* text) {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_size(*value, kMaxChunk, &v) || v < kMinChunk)
                return bad_value("expected a power of two from 256 to 4M, such as 4096, 64K or 1M");
            if ((v & (v - 1)) != 0) {
                std::uint64_t below = 1;
                while (below * 2 < v) below *= 2;
                return bad_value(*value + " is " + std::to_string(v) +
                                 " bytes, not a power of two (" + size_text(below) + " or " +
                                 size_text(below * 2) + " would do)");
            }
            *slot = v;
            *text = *value;
            return true;
        };

        if (key == "chunking") {
            if (!need_value()) return false;
            if (*value == "fixed")
                chunking_.kind = ChunkingParams::Kind::kFixed;
            else if (*value == "cdc")
                chunking_.kind = ChunkingParams::Kind::kCdc;
            else
                return bad_value("expected fixed or cdc");
            return true;
        }
        if (key == "chunk_size") return size_opt(&chunking_.chunk_size, &chunking_.chunk_size_text);
        if (key == "cdc_min") return size_opt(&chunking_.cdc_min, &chunking_.cdc_min_text);
        if (key == "cdc_avg") return size_opt(&chunking_.cdc_avg, &chunking_.cdc_avg_text);
        if (key == "cdc_max") return size_opt(&chunking_.cdc_max, &chunking_.cdc_max_text);
        if (key == "mode") {
            if (!need_value()) return false;
            if (*value == "inline")
                out_->mode = DedupMode::kInline;
            else if (*value == "deferred")
                out_->mode = DedupMode::kDeferred;
            else if (*value == "hybrid")
                out_->mode = DedupMode::kHybrid;
            else
                return bad_value("expected inline, deferred or hybrid");
            return true;
        }
        if (key == "target_ops") {
            if (!need_value()) return false;
            double v = 0;
            if (!parse_number(*value, 1e9, &v))
                return bad_value("expected write ops/s (0 = no goal)");
            out_->control.target_ops = v;
            return true;
        }
        if (key == "target_bytes") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_size(*value, 1ull << 40, &v))
                return bad_value("expected bytes/s such as 200M (0 = no goal)");
            out_->control.target_bytes_per_s = static_cast<double>(v);
            return true;
        }
        if (key == "control_interval") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 10, 60000, &v))
                return bad_value("expected milliseconds between 10 and 60000");
            out_->control.interval_ms = v;
            return true;
        }
        if (key == "policy") {
            if (!need_value()) return false;
            std::vector<std::string> names = policy_names();
            if (std::find(names.begin(), names.end(), *value) == names.end()) {
                std::string known;
                for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
                return bad_value("expected one of " + known);
            }
            out_->policy = *value;
            return true;
        }
        if (key == "background_threads") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 0, 64, &v)) return bad_value("expected 0 to 64");
            out_->background_threads = static_cast<unsigned>(v);
            return true;
        }
        if (key == "compact_threshold") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 0, 100, &v)) return bad_value("expected a percentage, 0 to 100");
            out_->compact_threshold = static_cast<unsigned>(v);
            return true;
        }
        if (key == "commit_interval") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 1, 3600000, &v))
                return bad_value("expected milliseconds between 1 and 3600000");
            out_->commit_interval_ms = static_cast<std::uint32_t>(v);
            return true;
        }
        if (key == "commit_writes") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 0, 1ull << 30, &v))
                return bad_value("expected a number of metadata writes, 0 (no limit) to 2^30");
            out_->commit_writes = v;
            return true;
        }
        if (key == "nonempty") {
            if (value) {
                *error = "option nonempty takes no value";
                return false;
            }
            out_->nonempty = true;
            return true;
        }
        if (key == "writeback_cache" || key == "no_writeback_cache") {
            if (value) {
                *error = "option " + key + " takes no value";
                return false;
            }
            out_->writeback_cache = key == "writeback_cache";
            return true;
        }
        if (key == "max_write") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_size(*value, 1u << 20, &v) || v < 4096)
                return bad_value("expected a size between 4K and 1M");
            out_->max_write = static_cast<std::uint32_t>(v);
            return true;
        }
        if (key == "threads") {
            if (!need_value()) return false;
            std::uint64_t v = 0;
            if (!parse_uint(*value, 1, 1024, &v)) return bad_value("expected 1 to 1024");
            out_->threads = static_cast<unsigned>(v);
            return true;
        }
        if (key == "entry_timeout" || key == "attr_timeout") {
            if (!need_value()) return false;
            double v = 0;
            if (!parse_seconds(*value, &v))
                return bad_value("expected seconds between 0 and 86400");
            (key == "entry_timeout" ? out_->entry_timeout : out_->attr_timeout) = v;
            return true;
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

// hiodsfs's own options, usable as --name=value (or --name for flags).
const char* const kValueOptions[] = {"chunking",
                                     "chunk_size",
                                     "cdc_min",
                                     "cdc_avg",
                                     "cdc_max",
                                     "mode",
                                     "target_ops",
                                     "target_bytes",
                                     "policy",
                                     "control_interval",
                                     "background_threads",
                                     "compact_threshold",
                                     "commit_interval",
                                     "max_write",
                                     "threads",
                                     "entry_timeout",
                                     "attr_timeout"};

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
    bool writeback = false, no_writeback = false;
    // clang-format off
    desc.add_options()
        ("help,h", po::bool_switch(&out->show_help))
        ("version,V", po::bool_switch(&out->show_version))
        ("foreground,f", po::bool_switch(&out->foreground))
        ("debug,d", po::bool_switch(&out->debug))
        ("single,s", po::bool_switch(&out->single_thread))
        ("writeback_cache", po::bool_switch(&writeback))
        ("no_writeback_cache", po::bool_switch(&no_writeback))
        ("option,o", po::value<std::vector<std::string>>()->composing())
        ("store", po::value<std::string>())
        ("mountpoint", po::value<std::string>());
    // clang-format on
    for (const char* name : kValueOptions) desc.add_options()(name, po::value<std::string>());
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
    for (const char* name : kValueOptions)
        if (vm.count(name) && !parser.apply(name, vm[name].as<std::string>(), "", error))
            return false;
    if (writeback && no_writeback) {
        *error = "--writeback_cache and --no_writeback_cache exclude each other";
        return false;
    }
    if (writeback) out->writeback_cache = true;
    if (no_writeback) out->writeback_cache = false;
    if (!parser.finish(error)) return false;
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
    if (!fsname) add("fsname=" + escape(options.store));
    if (!subtype) add("subtype=hiodsfs");
    return joined;
}

std::string usage_text() {
    const ChunkingParams cdc;
    std::ostringstream o;
    o << "usage: hiodsfs STORE MOUNTPOINT [-o opt,...] [-f] [-d] [-s]\n"
         "       mount -t fuse.hiodsfs STORE MOUNTPOINT [-o opt,...]\n"
         "\n"
         "Mounts the deduplicating store STORE (created on first use) at MOUNTPOINT.\n"
         "\n"
         "  -h, --help              this text\n"
         "  -V, --version           version of hiodsfs and libfuse\n"
         "  -f                      stay in the foreground\n"
         "  -d                      debug output (implies -f)\n"
         "  -s                      single-threaded\n"
         "  -o opt,...              mount options (below, and libfuse's)\n"
         "\n"
         "hiodsfs options, as -o name=value or --name=value:\n"
         "  chunking=fixed|cdc      chunking of a new store (default cdc)\n"
         "  chunk_size=SIZE         fixed chunk size (default 4K)\n"
         "  cdc_min=SIZE            smallest CDC chunk (default "
      << size_text(cdc.min_size)
      << ", or cdc_avg/4)\n"
         "  cdc_avg=SIZE            average CDC chunk (default "
      << size_text(cdc.avg_size)
      << ")\n"
         "  cdc_max=SIZE            largest CDC chunk (default "
      << size_text(cdc.max_size)
      << ", or cdc_avg*4)\n"
         "                          (sizes: powers of two, 256 to 4M, K/M suffixes)\n"
         "                          for an existing store, given chunking must match\n"
         "  mode=MODE               inline: deduplicate on the write path;\n"
         "                          deferred: write raw, deduplicate in the background;\n"
         "                          hybrid (default): switch between them to meet\n"
         "                          the goal below (no goal: stays inline)\n"
         "  target_ops=N            write ops/s goal for hybrid (default 0: none)\n"
         "  target_bytes=SIZE       write bytes/s goal for hybrid, e.g. 200M (default 0)\n"
         "  policy=NAME             hybrid's mode policy: capacity (default) or hiods\n"
         "  control_interval=MS     controller sampling interval (default 1000)\n"
         "  background_threads=N    background deduplication workers (default 2)\n"
         "  compact_threshold=PCT   compact segments less than PCT % live (default 50;\n"
         "                          0: only delete segments without live data)\n"
         "  commit_interval=MS      metadata group commit interval (default 1000)\n"
         "  writeback_cache         kernel writeback cache (default)\n"
         "  no_writeback_cache      write through to the daemon on every write\n"
         "  max_write=SIZE          largest write request, 4K to 1M (default 1M)\n"
         "  threads=N               request threads (default 10)\n"
         "  entry_timeout=SECONDS   kernel name cache timeout (default 1)\n"
         "  attr_timeout=SECONDS    kernel attribute cache timeout (default 1)\n"
         "  nonempty                mount over a directory that is not empty\n"
         "\n"
         "FUSE options passed on: allow_other, allow_root, auto_unmount, ro, rw,\n"
         "fsname= (default STORE), subtype= (default hiodsfs), nosuid, nodev,\n"
         "noexec, noatime, max_read=, ... default_permissions is always on.\n"
         "Ignored (for fstab and mount): defaults, auto, noauto, user, users,\n"
         "nouser, owner, group, _netdev, nofail, x-*, comment=.\n";
    return o.str();
}

}  // namespace hiodsfs::fuse
