// hiodsfs-stat's pieces without a mount: the report's derived figures,
// reading status.json (broken ones included), and the --json output against
// the documented schema. (The history records it shows are tested in
// tests/meta/history_test.cc.)
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/units.h"
#include "hiodsfs/engine.h"
#include "schema_check.h"
#include "stat_test_util.h"
#include "stat/estimate.h"
#include "stat/report.h"

using namespace hiodsfs;
using nlohmann::json;

namespace {

using TmpDir = test::ScratchDir;

const json& schema() {
    static const json s = test::read_json_file(HIODSFS_SCHEMA);
    return s;
}

// --json of r, which must parse (no nan, no broken UTF-8) and follow the
// schema.
json checked_json(const stat::Report& r, bool history) {
    const std::string doc = stat::format_json(r, history);
    INFO(doc);
    json v = json::parse(doc, nullptr, false);
    REQUIRE_FALSE(v.is_discarded());
    CHECK(test::schema_violations(v, schema()) == std::vector<std::string>{});
    return v;
}

// A status.json as the engine writes it, with what a test adds or changes.
std::string status_text(const json& changes = json::object()) {
    json st = {{"logical_bytes", 3000},  {"stored_bytes", 1000}, {"disk_bytes", 1200},   {"dead_bytes", 0},
               {"raw_bytes", 0},         {"chunk_count", 2},     {"inode_count", 3},     {"dedup_hits", 1},
               {"cloned_bytes", 0},      {"backlog_records", 0}, {"backlog_bytes", 0},   {"read_errors", 0},
               {"store_error", nullptr}, {"file_count", 2},      {"segment_count", 1},   {"now_ns", 5'000'000'000},
               {"unix_time_ns", 1'700'000'000'000'000'000},      {"chunking", "fixed:4096"},
               {"setting", "hybrid"},    {"mode", "inline"},     {"mode_since_ns", 4'000'000'000},
               {"ops_per_s", 10.5},      {"bytes_per_s", 4096},  {"background_bytes_per_s", 0},
               {"background_speed", 1},  {"target_ops", 0},      {"target_bytes_per_s", 0},
               {"events", json::array()}};
    st.update(changes);
    return st.dump();
}

stat::Report sample_report() {
    stat::Report r;
    r.store = "/srv/store \"quoted\"";
    r.mounted = true;
    r.mountpoint = "/mnt/dedup";
    r.status_age_s = 0.4;
    r.chunking = "cdc:2048/8192/32768";
    r.setting = "hybrid";
    r.mode = "deferred";
    r.mode_since = 1.7e9 + 0.25;
    r.logical_bytes = 10'000'000'000ull;
    r.stored_bytes = 4'000'000'000ull;
    r.content_bytes = 5'000'000'000ull;  // compressed to 0.8
    r.chunk_count = 500'000;
    r.disk_bytes = r.stored_bytes + 24 * r.chunk_count + 123'456;
    r.dead_bytes = 100'000;
    r.file_count = 42;
    r.inode_count = 50;
    r.backlog_records = 10;
    r.backlog_bytes = 50 << 20;
    r.background_bytes_per_s = 10 << 20;
    r.background_speed = 0.5;
    r.ops_per_s = 812;
    r.events.push_back({1.7e9, "mode_switch", "deferred", 495, 6.4e7, 0.2, 3, 4096, "capacity: under stress"});
    stat::Sample s;
    s.unix_time = 1.7e9;
    s.period_s = 10;
    s.mode = "inline";
    s.logical_bytes = 100;
    s.stored_bytes = 60;
    r.history = {s};
    r.daily = {s, s};
    r.daily[1].unix_time += 86400;
    r.daily[1].logical_bytes = 200;
    return r;
}

}  // namespace

TEST_CASE("report: derived figures", "[stat]") {
    stat::Report r = sample_report();
    CHECK(r.saved_bytes() == 6'000'000'000ull);
    CHECK(r.ratio() == Approx(2.5));
    CHECK(r.dedup_ratio() == Approx(2.0));
    CHECK(r.compression_ratio() == Approx(1.25));
    CHECK(r.mean_chunk_bytes() == Approx(10000));  // before compression
    CHECK(r.reclaimable_bytes() == 123'456);
    REQUIRE(r.drain_eta_s());
    CHECK(*r.drain_eta_s() == Approx(5));
    r.background_bytes_per_s = 0;
    r.history.back().background_bytes_per_s = 0;
    CHECK_FALSE(r.drain_eta_s());  // paused: no estimate rather than a wrong one
    r.backlog_records = r.backlog_bytes = 0;
    CHECK(*r.drain_eta_s() == 0);
    stat::Report empty;
    CHECK(empty.ratio() == 1);
    CHECK(empty.saved_bytes() == 0);
    CHECK(human_bytes(1536) == "1.50 KiB");
    CHECK(human_bytes(812) == "812 B");
    CHECK(stat::human_duration(3 * 3600 + 12 * 60) == "3 h 12 min");
}


namespace {

// A store made and closed: what hiodsfs-stat sees unmounted.
void make_store(const std::string& dir) {
    EngineOptions o;
    o.store_dir = dir;
    o.background_commit = false;
    o.background_threads = 0;
    std::unique_ptr<Engine> e;
    REQUIRE(Engine::open(o, &e));
    REQUIRE(e->close());
}

// The store held open read-write, as a daemon holds it: hiodsfs-stat then
// reads STORE/status.json, here written by the test.
std::unique_ptr<Engine> hold_store(const std::string& dir) {
    EngineOptions o;
    o.store_dir = dir;
    o.create_if_missing = false;
    o.background_commit = false;
    o.background_threads = 0;
    std::unique_ptr<Engine> e;
    REQUIRE(Engine::open(o, &e));
    return e;
}

void write_status(const std::string& dir, const std::string& text) {
    std::ofstream(dir + "/status.json", std::ios::binary) << text;
}

}  // namespace

TEST_CASE("report: a status that is not JSON or not a status object is one line of error, never a throw",
          "[stat]") {
    stat::Report r;
    for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "{\"logical_bytes\": 1} x", "\"\x01\"", "nul", "01",
                            "{\"logical_bytes\": 1e999}", "{\"logical_bytes\": 1, \"mode\": \"\xff\"}",
                            "{\"logical_bytes\": 1, \"mode\": \"a\nb\"}", "[]", "{}", "42"}) {
        INFO(bad);
        Status st;
        REQUIRE_NOTHROW(st = stat::report_from_status(bad, &r));
        CHECK_FALSE(st);
        CHECK_FALSE(st.message().empty());
        CHECK(st.message().find('\n') == std::string::npos);
    }
    // Members missing or of another type read as 0 or "", as from a daemon
    // of another version; 64-bit counters are exact.
    REQUIRE(stat::report_from_status(
        status_text({{"logical_bytes", 18446744073709551615ull}, {"stored_bytes", "many"}, {"dead_bytes", -5},
                     {"disk_bytes", 2.5e3}, {"mode", 7}, {"ops_per_s", nullptr}, {"events", {{"x", 1}}},
                     {"history", {1, "a", nullptr}}}),
        &r));
    CHECK(r.logical_bytes == 18446744073709551615ull);
    CHECK(r.stored_bytes == 0);
    CHECK(r.dead_bytes == 0);
    CHECK(r.disk_bytes == 2500);
    CHECK(r.mode == "");
    CHECK(r.ops_per_s == 0);
    CHECK(r.events.empty());
    CHECK(r.history.size() == 3);  // each read as an empty sample
    CHECK(r.history[0].logical_bytes == 0);

    TmpDir d;
    const std::string store = d.path + "/store";
    make_store(store);
    SECTION("mounted: a broken status.json is the error, naming the file") {
        auto held = hold_store(store);
        write_status(store, "{\"logical_bytes\": 1, ");
        Status st = stat::load_report(store, &r);
        INFO(st.message());
        CHECK(st.message().find(store + "/status.json: not valid JSON: ") == 0);
        CHECK(st.message().find('\n') == std::string::npos);
        write_status(store, "[1, 2]");
        st = stat::load_report(store, &r);
        CHECK(st.message() == store + "/status.json: status is not a hiodsfs status object");
        REQUIRE(held->close());
    }
    SECTION("unmounted: a broken status.json only loses the last session's events") {
        write_status(store, "{\"events\": [");
        REQUIRE(stat::load_report(store, &r));
        CHECK_FALSE(r.mounted);
        CHECK(r.events.empty());
    }
}

TEST_CASE("report: numbers for JSON keep 6 significant digits and are always finite", "[stat]") {
    CHECK(stat::json_number(1715000000.25) == 1715000000.25);
    CHECK(stat::json_number(10.0 / 3) == 3.33333);
    CHECK(stat::json_number(std::nan("")) == 0);
    CHECK(stat::json_number(-std::numeric_limits<double>::infinity()) == 0);
    CHECK(stat::json_number(std::numeric_limits<double>::max()) == std::numeric_limits<double>::max());
    stat::EstimateReport e;
    e.elapsed_s = std::nan("");
    e.results.push_back({});
    json v = json::parse(stat::format_estimate_json(e), nullptr, false);
    REQUIRE_FALSE(v.is_discarded());
    CHECK(v["elapsed_s"] == 0);
    CHECK(v["results"][0]["ratio"] == 1);
}

TEST_CASE("report: --json follows the documented schema in every state", "[stat]") {
    SECTION("mounted, with events and history") {
        stat::Report r = sample_report();
        for (bool history : {false, true}) {
            json v = checked_json(r, history);
            CHECK(v["store"] == r.store);
            CHECK(v["space"]["reclaimable_bytes"] == 123'456);
            CHECK(v["space"]["ratio"] == 2.5);
            CHECK(v["activity"]["mode_since"] == 1.7e9 + 0.25);
            CHECK(v["events"][0]["reason"] == "capacity: under stress");
            CHECK(v.contains("history") == history);
            if (history) {
                CHECK(v["daily"][0]["saved_change_bytes"].is_null());
                CHECK(v["daily"][1]["saved_change_bytes"] == 100);
            }
        }
        // Colour only when asked, and then ANSI.
        CHECK(stat::format_text(r, {false}).find('\033') == std::string::npos);
        CHECK(stat::format_text(r, {true}).find("\033[") != std::string::npos);
        CHECK(stat::format_history(r, {false}).find("+100 B") != std::string::npos);  // 40 B -> 140 B saved
    }
    SECTION("an empty store, unmounted") {
        TmpDir d;
        make_store(d.path);
        stat::Report r;
        REQUIRE(stat::load_report(d.path, &r));
        json v = checked_json(r, true);
        CHECK(v["mounted"] == false);
        CHECK(v["mountpoint"].is_null());
        CHECK(v["status_age_s"].is_null());
        CHECK(v["activity"]["setting"].is_null());
        CHECK(v["activity"]["mode"] == "not mounted");
        CHECK(v["space"]["logical_bytes"] == 0);
        CHECK(v["space"]["ratio"] == 1);
        CHECK(v["backlog"]["eta_s"] == 0);
        CHECK(v["events"] == json::array());
        CHECK(v["events_as_of"].is_null());
        CHECK(v["history"] == json::array());
    }
    SECTION("events and history from a mounted store's status.json") {
        TmpDir d;
        make_store(d.path);
        const json sample = {{"unix_time_ns", 1'699'999'990'000'000'000}, {"period_ns", 10'000'000'000},
                             {"mode", "deferred"}, {"ops_per_s", 3.5}, {"bytes_per_s", 1e6},
                             {"background_bytes_per_s", 5e5}, {"backlog_records", 2}, {"backlog_bytes", 8192},
                             {"logical_bytes", 3000}, {"stored_bytes", 1000}};
        auto held = hold_store(d.path);
        write_status(
            d.path,
            status_text({{"backlog_records", 2}, {"backlog_bytes", 8192},
                         {"events",
                          {{{"time_ns", 4'500'000'000}, {"kind", "mode_switch"}, {"mode", "deferred"},
                            {"ops_per_s", 900}, {"bytes_per_s", 6.4e7}, {"speed", 0.25}, {"backlog_records", 1},
                            {"backlog_bytes", 4096}, {"reason", "capacity: under stress"}},
                           {{"time_ns", 4'900'000'000}, {"kind", "throttle"}, {"mode", "deferred"},
                            {"ops_per_s", 800}, {"bytes_per_s", 6e7}, {"speed", 0.5}, {"backlog_records", 2},
                            {"backlog_bytes", 8192}, {"reason", "foreground busy"}}}},
                         {"history", {sample, sample}},
                         {"history_daily", {sample}}}));
        stat::Report r;
        REQUIRE(stat::load_report(d.path, &r));
        json v = checked_json(r, true);
        CHECK(v["mounted"] == true);
        CHECK(v["activity"]["setting"] == "hybrid");
        CHECK(v["activity"]["mode_since"] == 1.7e9 - 1);
        REQUIRE(v["events"].size() == 2);
        CHECK(v["events"][0]["unix_time"] == 1.7e9 - 0.5);
        CHECK(v["events"][1]["kind"] == "throttle");
        CHECK(v["backlog"]["drain_bytes_per_s"] == 5e5);  // the last sample's, the interval had none
        CHECK(v["history"].size() == 2);
        CHECK(v["daily"][0]["date"] == "2023-11-14");
        REQUIRE(held->close());
    }
    SECTION("odd strings, and rates that are not finite") {
        const std::string odd = "q\"uote b\\ack \x01\x1f\n\t\x7f caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 /";
        stat::Report r;
        // A denormal drain rate: the ETA overflows to infinity.
        REQUIRE(stat::report_from_status(
            status_text({{"chunking", odd}, {"store_error", odd}, {"backlog_records", 1},
                         {"backlog_bytes", 1'000'000}, {"background_bytes_per_s", 1e-320},
                         {"events",
                          {{{"time_ns", 1}, {"kind", "throttle"}, {"mode", "inline"}, {"speed", 0.5},
                            {"reason", odd}}}}}),
            &r));
        REQUIRE(std::isinf(*r.drain_eta_s()));
        r.store = "/srv/" + odd + "\xff\xfe";  // a path need not be UTF-8
        r.mounted = true;
        r.mountpoint = odd;
        r.status_age_s = std::numeric_limits<double>::infinity();
        const double nan = std::nan("");
        r.ops_per_s = nan;
        r.bytes_per_s = -std::numeric_limits<double>::infinity();
        r.background_speed = nan;
        r.target_ops = -1;
        r.mode_since = nan;
        r.events[0].unix_time = nan;
        r.events[0].speed = 7;
        r.history.push_back({});
        r.history[0].mode = "inline";
        r.history[0].period_s = nan;
        r.history[0].ops_per_s = std::numeric_limits<double>::infinity();
        r.daily = r.history;
        json v = checked_json(r, true);
        CHECK(v["chunking"] == odd);
        CHECK(v["store_error"] == odd);
        CHECK(v["mountpoint"] == odd);
        CHECK(v["events"][0]["reason"] == odd);
        CHECK(v["store"] == "/srv/" + odd + "\xef\xbf\xbd\xef\xbf\xbd");  // each bad byte U+FFFD
        CHECK(v["backlog"]["eta_s"].is_null());
        CHECK(v["status_age_s"].is_null());
        CHECK(v["activity"]["mode_since"].is_null());
        CHECK(v["activity"]["ops_per_s"] == 0);
        CHECK(v["activity"]["bytes_per_s"] == 0);
        CHECK(v["activity"]["background_speed"] == 0);
        CHECK(v["activity"]["target_ops"] == 0);
        CHECK(v["events"][0]["unix_time"] == 0);
        CHECK(v["events"][0]["speed"] == 1);
        CHECK(v["history"][0]["ops_per_s"] == 0);
        // The text output takes them too.
        CHECK(stat::format_text(r, {false}).find("cannot") == std::string::npos);
    }
}

TEST_CASE("report: work set aside shows as counts and the last reason, in text and JSON",
          "[stat]") {
    const std::string why = "freeing of inode 12: chunk 5 is missing or damaged";
    stat::Report r;
    REQUIRE(stat::report_from_status(status_text({{"quarantined_dirty_records", 3},
                                                  {"quarantined_deletes", 1},
                                                  {"quarantine_error", why}}),
                                     &r));
    r.store = "/srv/store";
    r.mounted = true;
    r.mountpoint = "/mnt/dedup";
    json v = checked_json(r, false);
    CHECK(v["quarantine"]["dirty_records"] == 3);
    CHECK(v["quarantine"]["deleted_files"] == 1);
    CHECK(v["quarantine"]["last_error"] == why);
    const std::string text = stat::format_text(r, {false});
    INFO(text);
    CHECK(text.find("set aside") != std::string::npos);
    CHECK(text.find(why) != std::string::npos);
    // Nothing set aside (or a daemon older than the figures): zeros, null, no line.
    stat::Report well;
    REQUIRE(stat::report_from_status(status_text(), &well));
    well.store = "/srv/store";
    v = checked_json(well, false);
    CHECK(v["quarantine"]["dirty_records"] == 0);
    CHECK(v["quarantine"]["last_error"].is_null());
    CHECK(stat::format_text(well, {false}).find("set aside") == std::string::npos);
}

TEST_CASE("schema check: a missing or mistyped member fails, and a keyword it lacks throws", "[stat]") {
    const json good = checked_json(sample_report(), true);
    auto violations = [](const json& doc) {
        std::string all;
        for (const auto& e : test::schema_violations(doc, schema())) all += e + "\n";
        return all;
    };
    json doc = good;
    doc["space"].erase("ratio");
    CHECK(violations(doc) == "$.space: missing ratio\n");
    doc = good;
    doc["files"]["count"] = "42";
    CHECK(violations(doc) == "$.files.count: \"42\" is not of type \"integer\"\n");
    doc = good;
    doc["read_errors"] = 1.0;  // a counter written as a float
    CHECK(violations(doc) == "$.read_errors: 1.0 is not of type \"integer\"\n");
    doc = good;
    doc["read_errors"] = -1;
    CHECK(violations(doc) == "$.read_errors: -1 is below 0\n");
    doc = good;
    doc["filez"] = doc["files"];
    doc.erase("files");
    CHECK(violations(doc) == "$: missing files\n$: unexpected member filez\n");
    doc = good;
    doc["mountpoint"] = 5;
    CHECK(violations(doc) == "$.mountpoint: 5 is not of type [\"string\",\"null\"]\n");
    doc = good;
    doc["events"][0]["kind"] = "other";
    doc["activity"]["background_speed"] = 1.5;
    doc["history"][0].erase("mode");
    CHECK(violations(doc) ==
          "$.activity.background_speed: 1.5 is above 1\n"
          "$.events[0].kind: \"other\" is not one of [\"mode_switch\",\"throttle\"]\n"
          "$.history[0]: missing mode\n");
    // A keyword the validator lacks fails loudly, even where the document
    // does not reach (no history here).
    json schema_plus = schema();
    schema_plus["properties"]["daily"]["items"]["properties"]["date"]["format"] = "date";
    const json no_history = checked_json(sample_report(), false);
    CHECK_THROWS_WITH(test::schema_violations(no_history, schema_plus),
                      Catch::Contains("keyword format is not implemented"));
}

TEST_CASE("history: the daily table's change column says how much the saved space moved", "[stat]") {
    stat::Report r;
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    auto day = [](std::int64_t unix_time, std::uint64_t logical_gib, std::uint64_t stored_gib) {
        stat::Sample s;
        s.unix_time = static_cast<double>(unix_time);
        s.logical_bytes = logical_gib << 30;
        s.stored_bytes = stored_gib << 30;
        return s;
    };
    // Saved: 1 GiB, then 3 GiB (+2), then 2 GiB (-1).
    r.daily = {day(1764547200, 2, 1), day(1764633600, 5, 2), day(1764720000, 5, 3)};
    const std::string out = stat::format_history(r, stat::Style{});
    INFO(out);
    std::vector<std::string> rows;
    for (std::size_t at = out.find("2025-12-"); at != std::string::npos; at = out.find("2025-12-", at + 1))
        rows.push_back(out.substr(at, out.find('\n', at) - at));
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].find('+') == std::string::npos);
    CHECK(rows[0].find(" -") == std::string::npos);
    CHECK(rows[1].ends_with("+" + human_bytes(2 * kGiB)));
    CHECK(rows[2].ends_with("-" + human_bytes(1 * kGiB)));
}

// A mount point, a store path or a message may hold any byte: a user may
// mount a store of their own under a name they chose. Text shows them
// escaped (common/name_escape.h), one line each; JSON holds them as
// strings, valid whatever the bytes (not UTF-8: U+FFFD).
TEST_CASE("report: paths and messages in text are escaped, so none forges a line",
          "[stat][escape]") {
    stat::Report r = sample_report();
    r.store = "/srv/a\nSTOPPED b";
    r.mountpoint = "/mnt/\x1b[2Kx\xff";
    r.store_error = "cannot write /srv/a\nSTOPPED b/status.json.tmp";
    r.events[0].reason = "capacity\r\x1b[2K";
    const std::string text = stat::format_text(r, {false});
    INFO(text);
    CHECK(text.find("hiodsfs store /srv/a\\nSTOPPED\\ b") != std::string::npos);
    CHECK(text.find("on /mnt/\\033[2Kx\\377") != std::string::npos);
    CHECK(text.find("cannot write /srv/a\\012STOPPED b/status.json.tmp") != std::string::npos);
    CHECK(text.find("capacity\\015\\033[2K") != std::string::npos);
    CHECK(text.find('\033') == std::string::npos);
    CHECK(text.find('\r') == std::string::npos);
    CHECK(text.find("\nSTOPPED b") == std::string::npos);
    const json v = checked_json(r, false);
    CHECK(v["store"] == "/srv/a\nSTOPPED b");
    CHECK(v["mountpoint"] == "/mnt/\x1b[2Kx\xef\xbf\xbd");
}

TEST_CASE("report: the store's compression dictionaries are counted in text and JSON",
          "[stat][dictionary]") {
    stat::Report r;
    REQUIRE(
        stat::report_from_status(status_text({{"content_bytes", 2000}, {"dictionaries", 2}}), &r));
    CHECK(r.dictionaries == 2);
    json v = checked_json(r, false);
    CHECK(v["space"]["dictionaries"] == 2);
    CHECK(stat::format_text(r, {false}).find("2 dictionaries") != std::string::npos);
    // A daemon from before dictionaries: none.
    REQUIRE(stat::report_from_status(status_text(), &r));
    CHECK(r.dictionaries == 0);
    CHECK(checked_json(r, false)["space"]["dictionaries"] == 0);
    r.dictionaries = 1;
    CHECK(stat::format_text(r, {false}).find("1 dictionary") != std::string::npos);
}

TEST_CASE("report: recompression still to come shows in text and JSON while mounted", "[stat][compression]") {
    stat::Report r;
    REQUIRE(stat::report_from_status(
        status_text({{"recompress_pending_segments", 3}, {"dictionary_pending", 1}}), &r));
    r.store = "/srv/store";
    r.mounted = true;
    r.mountpoint = "/mnt/dedup";
    json v = checked_json(r, false);
    CHECK(v["activity"]["recompress_pending_segments"] == 3);
    CHECK(v["activity"]["dictionary_pending"] == true);
    std::string text = stat::format_text(r, {false});
    INFO(text);
    CHECK(text.find("recompression") != std::string::npos);
    CHECK(text.find("3 segments") != std::string::npos);
    CHECK(text.find("a dictionary is being trained") != std::string::npos);
    // Nothing to come (or a daemon older than the figures): no line.
    REQUIRE(stat::report_from_status(status_text(), &r));
    CHECK(checked_json(r, false)["activity"]["recompress_pending_segments"] == 0);
    CHECK(checked_json(r, false)["activity"]["dictionary_pending"] == false);
    CHECK(stat::format_text(r, {false}).find("recompression") == std::string::npos);
}

TEST_CASE("report: the throttle's reason, the held share and the backlog's limit show in text and JSON while "
          "mounted",
          "[stat][spare]") {
    stat::Report r;
    REQUIRE(stat::report_from_status(status_text({{"backlog_records", 10},
                                                  {"backlog_bytes", 40960},
                                                  {"backlog_limit_bytes", 3ull << 30},
                                                  {"background_speed", 0.42},
                                                  {"throttle_regime", "spare capacity"},
                                                  {"held_fraction", 0.12},
                                                  {"reclaim_forced", true}}),
                                     &r));
    r.store = "/srv/store";
    r.mounted = true;
    r.mountpoint = "/mnt/dedup";
    json v = checked_json(r, false);
    CHECK(v["activity"]["throttle_regime"] == "spare capacity");
    CHECK(v["activity"]["held_fraction"] == Approx(0.12));
    CHECK(v["backlog"]["limit_bytes"] == 3ull << 30);
    CHECK(v["activity"]["reclaim_forced"] == true);
    std::string text = stat::format_text(r, {false});
    INFO(text);
    CHECK(text.find("throttle speed 0.42 (spare capacity)") != std::string::npos);
    CHECK(text.find("limit 3.00 GiB") != std::string::npos);
    CHECK(text.find("reclaim") != std::string::npos);
    CHECK(text.find("dead space is over twice the live data") != std::string::npos);
    // A daemon older than the figures: null, 0 and no limit shown.
    REQUIRE(stat::report_from_status(status_text(), &r));
    v = checked_json(r, false);
    CHECK(v["activity"]["throttle_regime"].is_null());
    CHECK(v["backlog"]["limit_bytes"] == 0);
    CHECK(v["activity"]["reclaim_forced"] == false);
    CHECK(stat::format_text(r, {false}).find("limit") == std::string::npos);
    CHECK(stat::format_text(r, {false}).find("over twice the live data") == std::string::npos);
}

TEST_CASE("report: an encrypted store says so in text and JSON; an older daemon's status says none",
          "[stat][encryption]") {
    stat::Report r;
    REQUIRE(stat::report_from_status(status_text({{"encryption", "aes-256-gcm"}}), &r));
    CHECK(r.encryption == "aes-256-gcm");
    CHECK(stat::format_text(r, {false}).find("encryption    aes-256-gcm\n") != std::string::npos);
    CHECK(checked_json(r, false)["encryption"] == "aes-256-gcm");
    REQUIRE(stat::report_from_status(status_text(), &r));
    CHECK(r.encryption == "none");
    CHECK(checked_json(r, false)["encryption"] == "none");
}
