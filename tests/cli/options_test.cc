// The daemon's command line: long flags and -o items, sizes, pass-through
// to libfuse, and the one-line errors.
#include "common/units.h"
#include "cli/options.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using hiodsfs::ChunkingParams;
using hiodsfs::cli::DaemonOptions;
using hiodsfs::cli::fuse_option_string;
using hiodsfs::cli::parse_command_line;
using hiodsfs::parse_size;
using hiodsfs::cli::split_option_list;
using hiodsfs::cli::option_keys;
using hiodsfs::cli::usage_text;

namespace {

struct Parsed {
    bool ok = false;
    DaemonOptions opt;
    std::string error;
};

Parsed parse(std::vector<const char*> args) {
    args.insert(args.begin(), "hiodsfs");
    Parsed p;
    p.ok = parse_command_line(static_cast<int>(args.size()), args.data(), &p.opt, &p.error);
    return p;
}

}  // namespace

TEST_CASE("sizes take K, M and G suffixes") {
    std::uint64_t v = 0;
    CHECK((parse_size("4096", 1ull << 40, &v) && v == 4096));
    CHECK((parse_size("64K", 1ull << 40, &v) && v == 65536));
    CHECK((parse_size("64k", 1ull << 40, &v) && v == 65536));
    CHECK((parse_size("1M", 1ull << 40, &v) && v == 1u << 20));
    CHECK((parse_size("1MiB", 1ull << 40, &v) && v == 1u << 20));
    CHECK((parse_size("2G", 1ull << 40, &v) && v == 2ull << 30));
    CHECK_FALSE(parse_size("", 1ull << 40, &v));
    CHECK_FALSE(parse_size("K", 1ull << 40, &v));
    CHECK_FALSE(parse_size("12X", 1ull << 40, &v));
    CHECK_FALSE(parse_size("-1", 1ull << 40, &v));
    CHECK_FALSE(parse_size("5M", 4u << 20, &v));
    CHECK_FALSE(parse_size("99999999999999999999", 1ull << 62, &v));
}

TEST_CASE("-o lists split at unescaped commas") {
    CHECK(split_option_list("a,b=c,,d") == std::vector<std::string>{"a", "b=c", "", "d"});
    CHECK(split_option_list("fsname=a\\,b,ro") == std::vector<std::string>{"fsname=a\\,b", "ro"});
}

TEST_CASE("positional arguments and defaults") {
    Parsed p = parse({"/store", "/mnt"});
    REQUIRE(p.ok);
    CHECK(p.opt.store == "/store");
    CHECK(p.opt.mountpoint == "/mnt");
    CHECK_FALSE(p.opt.chunking_given);
    CHECK(p.opt.writeback_cache);
    CHECK(p.opt.max_write == 1u << 20);
    CHECK(p.opt.entry_timeout == 86400.0);
    CHECK(p.opt.request_poll_us == 0);
    CHECK(p.opt.attr_timeout == 86400.0);
    CHECK(fuse_option_string(p.opt) == "default_permissions,fsname=/store,subtype=hiodsfs");

    CHECK_FALSE(parse({"/store"}).ok);
    CHECK(parse({"--help"}).opt.show_help);
    CHECK(parse({"-V"}).opt.show_version);
    Parsed d = parse({"/s", "/m", "-d"});
    CHECK((d.opt.debug && d.opt.foreground));
}

TEST_CASE("hiodsfs options come out of -o, the rest goes to libfuse") {
    Parsed p = parse({"/s", "/m", "-o",
                      "allow_other,chunking=fixed,chunk_size=8K,fsname=my\\,store,_netdev,nofail,"
                      "x-systemd.automount,defaults,noauto,user,users,max_write=128K,threads=4,"
                      "no_writeback_cache,ro",
                      "-f"});
    INFO(p.error);
    REQUIRE(p.ok);
    CHECK(p.opt.foreground);
    CHECK(p.opt.chunking_given);
    CHECK(p.opt.chunking == ChunkingParams::fixed(8192));
    CHECK(p.opt.max_write == 128u << 10);
    CHECK(p.opt.threads == 4);
    CHECK_FALSE(p.opt.writeback_cache);
    CHECK(p.opt.read_only);
    CHECK(fuse_option_string(p.opt) ==
          "allow_other,fsname=my\\,store,ro,default_permissions,subtype=hiodsfs");
}

TEST_CASE("long flags, with dashes or underscores, win over -o") {
    Parsed p = parse({"/s", "/m", "-o", "cdc_avg=32K,entry_timeout=5", "--cdc-avg=8K",
                      "--attr_timeout=0.5", "--no-writeback-cache"});
    INFO(p.error);
    REQUIRE(p.ok);
    CHECK(p.opt.chunking == ChunkingParams::cdc(2048, 8192, 32768));
    CHECK(p.opt.entry_timeout == 5.0);
    CHECK(p.opt.attr_timeout == 0.5);
    CHECK_FALSE(p.opt.writeback_cache);
}

TEST_CASE("request_poll takes microseconds up to 10000; 0 turns the gate off") {
    Parsed off = parse({"/s", "/m", "-o", "request_poll=0"});
    REQUIRE(off.ok);
    CHECK(off.opt.request_poll_us == 0);
    Parsed most = parse({"/s", "/m", "-o", "request_poll=10000"});
    REQUIRE(most.ok);
    CHECK(most.opt.request_poll_us == 10000);
    Parsed over = parse({"/s", "/m", "-o", "request_poll=10001"});
    CHECK_FALSE(over.ok);
    CHECK(over.error.find("request_poll") != std::string::npos);
}

TEST_CASE("background_nice takes 0 to 19, 19 by default") {
    Parsed dflt = parse({"/s", "/m"});
    REQUIRE(dflt.ok);
    CHECK(dflt.opt.background_nice == 19);
    Parsed zero = parse({"/s", "/m", "-o", "background_nice=0"});
    REQUIRE(zero.ok);
    CHECK(zero.opt.background_nice == 0);
    for (const char* bad : {"background_nice=20", "background_nice=-1", "background_nice=x"}) {
        Parsed p = parse({"/s", "/m", "-o", bad});
        CHECK_FALSE(p.ok);
        CHECK(p.error.find("background_nice") != std::string::npos);
    }
}

TEST_CASE("bad options are one-line errors") {
    auto error_of = [](std::vector<const char*> args) {
        Parsed p = parse(std::move(args));
        CHECK_FALSE(p.ok);
        CHECK(p.error.find('\n') == std::string::npos);
        return p.error;
    };
    CHECK(error_of({"/s", "/m", "-o", "policy=magic"}).find("capacity") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "target_ops=-5"}).find("target_ops") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "control_interval=5"}).find("control_interval") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "mode=fast"}).find("mode") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "chunking=cdc,chunk_size=4K"}).find("chunk_size") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "chunking=fixed,cdc_min=1K"}).find("cdc") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "chunk_size=3K"}).find("power of two") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "chunk_size"}).find("needs a value") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "max_write=2M"}).find("max_write") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "threads=0"}).find("threads") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "commit_interval=soon"}).find("commit_interval") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "commit_writes=-1"}).find("commit_writes") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "meta_map=1M"}).find("meta_map") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "meta_map=0"}).find("64M") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "meta_map=2048G"}).find("meta_map") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "dictionary_min=100K"}).find("dictionary_min") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "dictionary_min=lots"}).find("dictionary_min") !=
          std::string::npos);
    CHECK(error_of({"/s", "/m", "--frobnicate"}).find("frobnicate") != std::string::npos);
    CHECK(error_of({"/s", "/m", "/extra"}).find("positional") != std::string::npos);
}

TEST_CASE("compact_threshold is a percentage") {
    Parsed h = parse({"/s", "/m", "-o", "compact_threshold=30"});
    INFO(h.error);
    REQUIRE(h.ok);
    CHECK(h.opt.compact_threshold == 30);
    CHECK(parse({"/s", "/m"}).opt.compact_threshold == 50);
    CHECK(parse({"/s", "/m", "--compact-threshold=0"}).opt.compact_threshold == 0);
    Parsed bad = parse({"/s", "/m", "-o", "compact_threshold=101"});
    CHECK_FALSE(bad.ok);
    CHECK(bad.error.find("compact_threshold") != std::string::npos);
}

TEST_CASE("modes and the controller's settings") {
    Parsed h = parse({"/s", "/m", "-o", "target_ops=5000,target_bytes=200M,policy=hiods",
                      "--control-interval=500", "--background-threads=4"});
    INFO(h.error);
    REQUIRE(h.ok);
    CHECK(h.opt.mode == hiodsfs::DedupMode::kHybrid);
    CHECK(h.opt.control.target_ops == 5000);
    CHECK(h.opt.control.target_bytes_per_s == 200.0 * (1 << 20));
    CHECK(h.opt.control.interval_ms == 500);
    CHECK(h.opt.policy == "hiods");
    CHECK(h.opt.background_threads == 4);

    Parsed p = parse({"/s", "/m", "-o", "mode=inline,commit_interval=250,commit_writes=0"});
    REQUIRE(p.ok);
    CHECK(p.opt.commit_interval_ms == 250);
    CHECK(p.opt.commit_writes == 0);
    CHECK(parse({"/s", "/m"}).opt.commit_writes == hiodsfs::EngineOptions{}.commit_writes);
    CHECK(parse({"/s", "/m", "-o", "commit_writes=4096"}).opt.commit_writes == 4096);
    CHECK(parse({"/s", "/m", "-o", "meta_resident=64M"}).opt.meta_resident_bytes == 64u << 20);
    CHECK(parse({"/s", "/m", "-o", "meta_resident=0"}).opt.meta_resident_bytes == 0);
    CHECK_FALSE(parse({"/s", "/m", "-o", "meta_resident=4K"}).ok);
    CHECK(parse({"/s", "/m"}).opt.meta_dirty_bytes == hiodsfs::EngineOptions{}.meta_dirty_bytes);
    CHECK(parse({"/s", "/m", "-o", "meta_dirty=32M"}).opt.meta_dirty_bytes == 32u << 20);
    CHECK(parse({"/s", "/m", "-o", "meta_dirty=0"}).opt.meta_dirty_bytes == 0);
    CHECK(parse({"/s", "/m", "-o", "meta_dirty=4K"}).error.find("at least 64K") != std::string::npos);
    CHECK(p.opt.mode == hiodsfs::DedupMode::kInline);
    Parsed d = parse({"/s", "/m", "--mode=deferred"});
    REQUIRE(d.ok);
    CHECK(d.opt.mode == hiodsfs::DedupMode::kDeferred);
}

TEST_CASE("a bad chunk size is named as the user gave it") {
    auto error_of = [](std::vector<const char*> args) {
        Parsed p = parse(std::move(args));
        CHECK_FALSE(p.ok);
        CHECK(p.error.find('\n') == std::string::npos);
        return p.error;
    };
    const std::string avg = error_of({"/s", "/m", "-o", "cdc_avg=3K"});
    INFO(avg);
    CHECK(avg.find("'3K' for cdc_avg") != std::string::npos);
    CHECK(avg.find("3072 bytes, not a power of two (2K or 4K would do)") != std::string::npos);
    CHECK(error_of({"/s", "/m", "--chunk-size=3000"}).find("'3000' for chunk_size") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "cdc_min=128"}).find("'128' for cdc_min: expected a power of two from 256") !=
          std::string::npos);
    // Sizes that are each fine but do not go together: the given ones as
    // given, the others with where they came from.
    const std::string order = error_of({"/s", "/m", "-o", "cdc_min=16K,cdc_avg=8K"});
    INFO(order);
    CHECK(order.find("cdc_min < cdc_avg < cdc_max; got cdc_min=16K, cdc_avg=8K, cdc_max 32K (cdc_avg*4)") !=
          std::string::npos);
    const std::string derived = error_of({"/s", "/m", "-o", "cdc_avg=512"});
    INFO(derived);
    CHECK(derived.find("256 to 4M; got cdc_min 128 (cdc_avg/4), cdc_avg=512") != std::string::npos);
    CHECK(error_of({"/s", "/m", "-o", "cdc_max=4K"}).find("cdc_min 2K (default), cdc_avg 8K (default), cdc_max=4K") !=
          std::string::npos);
}

TEST_CASE("background_threads=0 where something is deferred is accepted with a warning") {
    for (const char* o : {"mode=deferred,background_threads=0", "target_ops=100,background_threads=0",
                          "mode=hybrid,target_bytes=10M,background_threads=0"}) {
        Parsed p = parse({"/s", "/m", "-o", o});
        INFO(o << ": " << p.error);
        REQUIRE(p.ok);
        REQUIRE(p.opt.warnings.size() == 1);
        CHECK(p.opt.warnings[0].find("background_threads=0") != std::string::npos);
        CHECK(p.opt.warnings[0].find("not deduplicated during this mount") != std::string::npos);
        CHECK(p.opt.warnings[0].find('\n') == std::string::npos);
    }
    // Nothing deferred, read-only, or workers: nothing to say.
    for (const char* o : {"mode=inline,background_threads=0", "background_threads=0", "mode=deferred",
                          "mode=deferred,background_threads=0,ro"}) {
        Parsed p = parse({"/s", "/m", "-o", o});
        INFO(o << ": " << p.error);
        REQUIRE(p.ok);
        CHECK(p.opt.warnings.empty());
    }
}

namespace {

std::string source_file(const std::string& rel) {
    std::ifstream in(std::string(HIODSFS_SOURCE_DIR) + "/" + rel);
    REQUIRE(in.good());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

// The parser's table is the one list of options; what documents them must
// name each one, so a new option cannot be left out of them.
TEST_CASE("every option is in --help, the manual page, README and the completion") {
    const std::string help = usage_text(), man = source_file("man/hiodsfs.8"),
                      readme = source_file("README.md"), completion = source_file("completions/hiodsfs");
    REQUIRE(option_keys().size() >= 20);
    for (const std::string& key : option_keys()) {
        INFO(key);
        Parsed probe = parse({"/s", "/m", "-o", key.c_str()});
        const bool flag = probe.ok;  // a flag takes no value; the rest need one
        CHECK(std::regex_search(help, std::regex("\\n  " + key + (flag ? " " : "="))));
        // On a .B, .BR or .BI line: .BI key= VALUE, .BR a ", " key
        CHECK(std::regex_search(man, std::regex("\\n\\.B[IR]? ([^\\n]*[ \"])?" + key + (flag ? "[ \\n\"]" : "="))));
        CHECK(readme.find("`" + key + (flag ? "`" : "=")) != std::string::npos);
        CHECK(std::regex_search(completion, std::regex("[\" ]" + key + (flag ? "[ \\n\"]" : "="))));
    }
}

TEST_CASE("meta_map sets the metadata's map, 1024G unless given") {
    Parsed p = parse({"/s", "/m"});
    REQUIRE(p.ok);
    CHECK(p.opt.meta_map_bytes == 1ull << 40);
    p = parse({"/s", "/m", "-o", "meta_map=4G"});
    REQUIRE(p.ok);
    CHECK(p.opt.meta_map_bytes == 4ull << 30);
}

TEST_CASE("dictionary_min: when a store trains compression dictionaries, 64M unless given, 0 never") {
    Parsed p = parse({"/s", "/m"});
    REQUIRE(p.ok);
    CHECK(p.opt.dictionary_min_bytes == 64ull << 20);
    CHECK(p.opt.dictionary_min_bytes == hiodsfs::EngineOptions{}.dictionary_min_bytes);
    p = parse({"/s", "/m", "-o", "dictionary_min=1G"});
    REQUIRE(p.ok);
    CHECK(p.opt.dictionary_min_bytes == 1ull << 30);
    p = parse({"/s", "/m", "-o", "dictionary_min=0"});
    REQUIRE(p.ok);
    CHECK(p.opt.dictionary_min_bytes == 0);
}

TEST_CASE("key=ask is taken for a local store and a RADOS store alike") {
    Parsed p = parse({"rados:pool/store", "/m", "-o", "cache_dir=/c,key=ask"});
    REQUIRE(p.ok);
    CHECK(p.opt.key_ask);
    CHECK(p.opt.rados);
    p = parse({"rados:pool/store", "/m", "-o", "cache_dir=/c,key_file=/k"});
    CHECK(p.ok);
    p = parse({"/s", "/m", "-o", "key=ask"});
    REQUIRE(p.ok);
    CHECK(p.opt.key_ask);
    p = parse({"rados:pool/store", "/m", "-o", "cache_dir=/c,key=ask,key_file=/k"});
    CHECK_FALSE(p.ok);
}
