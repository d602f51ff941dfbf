// hiodsfs-stat: what a hiodsfs store saved, what it is doing, and what an
// existing tree would save (--estimate). See man/hiodsfs-stat.1 and
// docs/hiodsfs-stat.md (the --json schema).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/name_escape.h"
#include "common/units.h"
#include "cli/credentials.h"
#include "cli/options.h"
#include "stat/estimate.h"
#include "stat/key_check.h"
#include "stat/report.h"

namespace po = boost::program_options;
using namespace hiodsfs;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

const char* const kUsage =
    "usage: hiodsfs-stat [--json] [--history] [--watch [SEC]] [--no-color]\n"
    "                    [--key-file FILE | --key ask] STORE|MOUNTPOINT\n"
    "       hiodsfs-stat --estimate [-o CHUNKING] [--compare] [--compression LIST]\n"
    "                    [--cache PATH | --no-cache] [--json] DIR...\n"
    "\n"
    "Shows what a hiodsfs store holds and saves, and what the daemon is doing\n"
    "(mounted or not; a mounted store is read from the status the daemon\n"
    "publishes, without disturbing it).\n"
    "\n"
    "options:\n"
    "  --json            machine-readable output (schema: docs/hiodsfs-stat.md)\n"
    "  --history         activity samples over time and space saved per day\n"
    "  --watch [SEC]     refresh every SEC seconds (default 2) until interrupted\n"
    "  --no-color        no colours (also when NO_COLOR is set or not on a terminal)\n"
    "  --key-file FILE   check that FILE's key opens the encrypted store (as the daemon\n"
    "                    checks it when it mounts the store; no chunk is read), and say\n"
    "                    so; exit 1 with one line if it does not. The figures need no key\n"
    "  --key ask         the same with the store's passphrase (a RADOS store's is checked\n"
    "                    by hiodsfs-fsck --key ask, its key slot being in its pool)\n"
    "  --estimate        chunk and fingerprint DIR... as hiodsfs would (no symlink\n"
    "                    followed, one file system) and report the stored size and\n"
    "                    ratios it would get\n"
    "  -o CHUNKING       chunking for --estimate, as the daemon takes it:\n"
    "                    chunking=cdc|fixed, chunk_size=, cdc_min=, cdc_avg=, cdc_max=\n"
    "                    (default: the daemon's default, cdc 2K/8K/32K)\n"
    "  --compare         also estimate fixed 4K-32K and CDC 4K-32K in the same pass\n"
    "  --compression LIST\n"
    "                    compress the distinct chunks of the -o chunking with each\n"
    "                    method of LIST and report the sizes, ratios and CPU time\n"
    "                    (lz4, zstd, zstd:1-19; default lz4,zstd:3,zstd:9; none: no\n"
    "                    compression figures)\n"
    "  --cache PATH      the estimate cache (default $XDG_CACHE_HOME/hiodsfs/estimate.cache\n"
    "                    or ~/.cache/hiodsfs/estimate.cache); files whose size, mtime,\n"
    "                    ctime and inode are unchanged are not read again\n"
    "  --no-cache        neither read nor write a cache\n"
    "  -h, --help        this text\n"
    "  -V, --version     the version\n";

int fail(const std::string& message) {
    // It may name a mount's source, which the user who mounted it chose.
    std::cerr << "hiodsfs-stat: " << escape_line(message) << "\n";
    return 1;
}

bool use_color(bool no_color_flag) {
    const char* nc = std::getenv("NO_COLOR");
    if (no_color_flag || (nc != nullptr && nc[0] != '\0')) return false;
    const char* term = std::getenv("TERM");
    if (term != nullptr && std::string(term) == "dumb") return false;
    return ::isatty(STDOUT_FILENO) != 0;
}

// Chunking from -o items, through the daemon's own option parser so the
// defaults and rules are the same.
bool parse_chunking(const std::vector<std::string>& opts, ChunkingParams* out, std::string* error) {
    std::vector<std::string> args = {"hiodsfs", "STORE", "MOUNTPOINT"};
    for (const auto& o : opts) {
        for (const auto& item : cli::split_option_list(o)) {
            std::string key = item.substr(0, item.find('='));
            if (key != "chunking" && key != "chunk_size" && key != "cdc_min" && key != "cdc_avg" &&
                key != "cdc_max") {
                *error = "-o " + item + ": --estimate takes only chunking options "
                         "(chunking, chunk_size, cdc_min, cdc_avg, cdc_max)";
                return false;
            }
        }
        args.push_back("-o");
        args.push_back(o);
    }
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    cli::DaemonOptions d;
    if (!cli::parse_command_line(static_cast<int>(argv.size()), argv.data(), &d, error)) return false;
    *out = d.chunking_given ? d.chunking : ChunkingParams{};
    return true;
}

int run_estimate_cmd(const std::vector<std::string>& dirs,
                     const std::vector<std::string>& chunk_opts, bool compare,
                     const std::optional<std::string>& compression, const std::string& cache,
                     bool no_cache, bool json) {
    if (dirs.empty()) return fail("--estimate needs at least one directory");
    stat::EstimateOptions eo;
    eo.roots = dirs;
    ChunkingParams main;
    std::string error;
    if (!parse_chunking(chunk_opts, &main, &error)) return fail(error);
    eo.compressions = stat::default_estimate_compressions();
    if (compression) {
        Status st = stat::parse_compression_list(*compression, &eo.compressions);
        if (!st) return fail(st.message());
    }
    eo.chunkings.push_back(main);
    if (compare)
        for (const auto& c : stat::comparison_chunkings())
            if (!(c == main)) eo.chunkings.push_back(c);
    eo.cache_path = no_cache ? "" : (cache.empty() ? stat::default_cache_path() : cache);
    eo.interrupt = &g_stop;
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    if (tty) {
        eo.progress = [](const stat::EstimateProgress& p) {
            double rate = p.elapsed_s > 0 ? static_cast<double>(p.bytes_read) / p.elapsed_s : 0;
            std::string eta = "?";
            if (p.bytes_read >= p.bytes_to_read) eta = "0 s";
            else if (rate > 0) eta = stat::human_duration(static_cast<double>(p.bytes_to_read - p.bytes_read) / rate);
            std::fprintf(stderr, "\r\033[K%llu/%llu files, %s of %s, %s/s, ETA %s",
                         static_cast<unsigned long long>(p.files_done),
                         static_cast<unsigned long long>(p.files_total),
                         hiodsfs::human_bytes(static_cast<double>(p.bytes_done)).c_str(),
                         hiodsfs::human_bytes(static_cast<double>(p.bytes_total)).c_str(),
                         hiodsfs::human_bytes(rate).c_str(), eta.c_str());
        };
    }
    stat::EstimateReport r;
    Status st = stat::run_estimate(eo, &r);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!r.cache_note.empty()) std::cerr << "hiodsfs-stat: " << r.cache_note << "\n";
    if (!st) return fail(st.message());
    std::cout << (json ? stat::format_estimate_json(r) : stat::format_estimate_text(r));
    if (r.interrupted) {
        std::cerr << "hiodsfs-stat: interrupted; the cache keeps what was read\n";
        return 130;
    }
    return 0;
}

// credentials: a key to check (once: --watch shows it checked after).
int show(const std::string& target, bool json, bool history, bool color, const cli::StoreCredentials& credentials,
         bool* key_checked) {
    stat::Report r;
    Status st = stat::load_report(target, &r);
    if (!st) return fail(st.message());
    if (credentials.given() && !*key_checked) {
        st = stat::check_store_key(r.store, credentials.key.get(), credentials.passphrase.get());
        if (!st) return fail(st.message());
        *key_checked = true;
    }
    r.key_checked = *key_checked;
    if (json) {
        std::cout << stat::format_json(r, history);
    } else {
        stat::Style style{color};
        std::cout << stat::format_text(r, style);
        if (history) std::cout << "\n" << stat::format_history(r, style);
    }
    std::cout.flush();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    po::options_description opts;
    opts.add_options()("json", "")("history", "")("watch", po::value<double>()->implicit_value(2.0), "")(
        "no-color", "")("estimate", "")("compare", "")("compression", po::value<std::string>(), "")(
        "cache", po::value<std::string>(), "")("no-cache", "")(
        "option,o", po::value<std::vector<std::string>>(), "")("key-file", po::value<std::string>(), "")(
        "key", po::value<std::string>(), "")("help,h", "")("version,V", "")(
        "paths", po::value<std::vector<std::string>>(), "");
    po::positional_options_description pos;
    pos.add("paths", -1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
        po::notify(vm);
    } catch (const std::exception& e) {
        return fail(std::string(e.what()) + " (see hiodsfs-stat --help)");
    }
    if (vm.count("help")) {
        std::cout << kUsage;
        return 0;
    }
    if (vm.count("version")) {
        std::cout << "hiodsfs-stat " << HIODSFS_VERSION << "\n";
        return 0;
    }
    std::vector<std::string> paths;
    if (vm.count("paths")) paths = vm["paths"].as<std::vector<std::string>>();
    const bool json = vm.count("json") != 0;
    std::vector<std::string> chunk_opts;
    if (vm.count("option")) chunk_opts = vm["option"].as<std::vector<std::string>>();

    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);

    const bool keyed = vm.count("key-file") || vm.count("key");
    if (vm.count("estimate")) {
        if (vm.count("watch") || vm.count("history")) return fail("--estimate does not go with --watch or --history");
        if (keyed) return fail("--key-file and --key go with a STORE or MOUNTPOINT, not --estimate");
        std::optional<std::string> compression;
        if (vm.count("compression")) compression = vm["compression"].as<std::string>();
        return run_estimate_cmd(paths, chunk_opts, vm.count("compare") != 0, compression,
                                vm.count("cache") ? vm["cache"].as<std::string>() : "",
                                vm.count("no-cache") != 0, json);
    }
    if (!chunk_opts.empty() || vm.count("compare") || vm.count("compression") ||
        vm.count("cache") || vm.count("no-cache"))
        return fail("-o, --compare, --compression, --cache and --no-cache go with --estimate");
    if (paths.size() != 1) return fail("give one STORE or MOUNTPOINT (see hiodsfs-stat --help)");
    const bool color = !json && use_color(vm.count("no-color") != 0);
    const bool history = vm.count("history") != 0;
    cli::StoreCredentials credentials;
    if (keyed) {
        const auto given = [&](const char* name) { return vm.count(name) ? &vm[name].as<std::string>() : nullptr; };
        const Status read = cli::read_store_credentials(given("key-file"), given("key"), paths[0], &credentials);
        if (!read) return fail(read.message());
    }
    bool key_checked = false;
    if (!vm.count("watch")) return show(paths[0], json, history, color, credentials, &key_checked);

    const double every = vm["watch"].as<double>();
    if (!(every >= 0.1 && every <= 86400)) return fail("--watch takes 0.1 to 86400 seconds");
    const bool clear = !json && ::isatty(STDOUT_FILENO) != 0;
    int rc = 0;
    while (!g_stop.load()) {
        if (clear) std::cout << "\033[H\033[2J";
        rc = show(paths[0], json, history, color, credentials, &key_checked);
        if (rc != 0) return rc;
        for (double waited = 0; waited < every && !g_stop.load(); waited += 0.05)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
}
