// hiodsfs-stat's pieces without a mount: the JSON reader, the history
// records in LMDB and their sampling, the report's derived figures, and the
// --json output against the documented schema.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "hiodsfs/history.h"
#include "hiodsfs/meta_store.h"
#include "stat/json.h"
#include "stat/report.h"

using namespace hiodsfs;

namespace {

struct TmpDir {
    std::string path;
    TmpDir() {
        char tmpl[] = "/tmp/hiodsfs-stat-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TmpDir() { std::filesystem::remove_all(path); }
};

// Runs the schema checker on text; returns its exit status and output.
int check_schema(const std::string& text, std::string* output) {
    TmpDir d;
    std::string in = d.path + "/doc.json", out = d.path + "/out.txt";
    FILE* f = std::fopen(in.c_str(), "w");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    std::string cmd = std::string("python3 '") + HIODSFS_SCHEMA_CHECK + "' '" + HIODSFS_SCHEMA + "' <'" + in +
                      "' >'" + out + "' 2>&1";
    int rc = std::system(cmd.c_str());
    output->clear();
    if (FILE* o = std::fopen(out.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof(buf), o)) > 0) output->append(buf, n);
        std::fclose(o);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
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

TEST_CASE("json: parses what the engine and the tool write, and rejects broken text", "[stat]") {
    json::Value v;
    REQUIRE(json::parse(R"({"a": 18446744073709551615, "b": [1, 2.5e3, -3], "c": "x\"\u00e9\n", "d": null,
                           "e": true, "f": {}})",
                        &v));
    CHECK(v.get("a")->u64() == 18446744073709551615ull);
    CHECK(v.get("b")->items.size() == 3);
    CHECK(v.get("b")->items[1].num() == 2500);
    CHECK(v.get("c")->str() == "x\"\xc3\xa9\n");
    CHECK(v.get("d")->type == json::Value::Type::kNull);
    CHECK(v.get("e")->boolean);
    CHECK(v.get("missing") == nullptr);
    for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "{\"a\": 1} x", "\"\x01\"", "01x", "nul"}) {
        INFO(bad);
        CHECK_FALSE(json::parse(bad, &v));
    }
    CHECK(json::quote("a\"b\\\n") == "\"a\\\"b\\\\\\u000a\"");
    CHECK(json::number(1.0 / 0.0) == "null");
    CHECK(json::number(1715000000.25) == "1715000000.250");
}

TEST_CASE("history: samples are stored, read back oldest first, summarised per day and pruned", "[stat]") {
    TmpDir d;
    std::unique_ptr<MetaStore> meta;
    REQUIRE(MetaStore::open(d.path, 1ull << 30, false, &meta));
    const std::uint64_t day = kNsPerDay, t0 = 20000 * day;  // some UTC midnight
    {
        std::unique_ptr<Txn> t;
        REQUIRE(meta->begin(&t));
        // Three days: samples every 6 h; logical grows by 100 per sample.
        for (int i = 0; i < 12; ++i) {
            HistoryEntry e;
            e.time_ns = t0 + static_cast<std::uint64_t>(i) * (day / 4) + 1;
            e.r.logical_bytes = 100 * static_cast<std::uint64_t>(i + 1);
            e.r.stored_bytes = 10 * static_cast<std::uint64_t>(i + 1);
            REQUIRE(append_history(*t, e));
        }
        REQUIRE(t->commit());
    }
    REQUIRE(meta->commit_group(nullptr));
    std::unique_ptr<Txn> t;
    REQUIRE(meta->begin(&t));
    std::vector<HistoryEntry> tail, daily;
    REQUIRE(read_history_tail(*t, 5, &tail));
    REQUIRE(tail.size() == 5);
    CHECK(tail.front().r.logical_bytes == 800);
    CHECK(tail.back().r.logical_bytes == 1200);
    REQUIRE(read_history_daily(*t, 31, &daily));
    REQUIRE(daily.size() == 3);  // the last sample of each day
    CHECK(daily[0].r.logical_bytes == 400);
    CHECK(daily[1].r.logical_bytes == 800);
    CHECK(daily[2].r.logical_bytes == 1200);
    REQUIRE(read_history_daily(*t, 2, &daily));
    CHECK(daily.size() == 2);
    CHECK(daily[0].r.logical_bytes == 800);
    // A sample 30 days after the second day prunes what is older than that.
    HistoryEntry late;
    late.time_ns = t0 + day + 31 * day;
    REQUIRE(append_history(*t, late, 30 * day));
    REQUIRE(read_history_tail(*t, 100, &tail));
    for (const auto& e : tail) CHECK(e.time_ns >= late.time_ns - 30 * day);
    CHECK(tail.size() == 4 + 1);  // the third day's samples (after the cut) and the new one
}

TEST_CASE("history: a sample every 10 s while active, one a minute when idle", "[stat]") {
    HistoryRecorder rec;
    SpaceCounters c;
    c.logical_bytes = 7;
    HistoryEntry e;
    const std::uint64_t s = 1'000'000'000;
    std::uint64_t wall = 1000 * s, mono = 0;
    auto tick = [&](std::uint64_t ops, std::uint64_t bytes) {
        IntervalSample is;
        is.start_ns = mono;
        mono += s;
        wall += s;
        is.end_ns = mono;
        is.ops = ops;
        is.bytes = bytes;
        return rec.tick(is, wall, WriteMode::kDeferred, c, &e);
    };
    int due = 0;
    for (int i = 0; i < 30; ++i) due += tick(100, 1 << 20) ? 1 : 0;
    CHECK(due == 3);
    CHECK(e.r.ops_per_s == Approx(100));
    CHECK(e.r.bytes_per_s == Approx(1 << 20));
    CHECK(e.r.mode == 1);
    CHECK(e.r.logical_bytes == 7);
    due = 0;
    for (int i = 0; i < 180; ++i) due += tick(0, 0) ? 1 : 0;
    CHECK(due == 3);
    CHECK(e.r.ops_per_s == 0);
}

TEST_CASE("report: derived figures", "[stat]") {
    stat::Report r = sample_report();
    CHECK(r.saved_bytes() == 6'000'000'000ull);
    CHECK(r.ratio() == Approx(2.5));
    CHECK(r.mean_chunk_bytes() == Approx(8000));
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
    CHECK(stat::human_bytes(1536) == "1.50 KiB");
    CHECK(stat::human_bytes(812) == "812 B");
    CHECK(stat::human_duration(3 * 3600 + 12 * 60) == "3 h 12 min");
}

TEST_CASE("report: --json output follows the documented schema", "[stat]") {
    stat::Report r = sample_report();
    std::string out;
    for (bool history : {false, true}) {
        std::string doc = stat::format_json(r, history);
        json::Value v;
        REQUIRE(json::parse(doc, &v));
        INFO(doc);
        CHECK(check_schema(doc, &out) == 0);
        CHECK(out == "");
        CHECK(v.get("space")->get("reclaimable_bytes")->u64() == 123'456);
        CHECK((v.get("history") != nullptr) == history);
    }
    // The checker is not a rubber stamp.
    std::string doc = stat::format_json(r, true);
    std::string broken = doc;
    broken.replace(broken.find("\"read_errors\": 0"), 16, "\"read_errors\": -1");
    CHECK(check_schema(broken, &out) == 1);
    CHECK(out.find("read_errors") != std::string::npos);
    broken = doc;
    broken.replace(broken.find("\"files\": {"), 10, "\"filez\": {");
    CHECK(check_schema(broken, &out) == 1);
    // Colour only when asked, and then ANSI.
    CHECK(stat::format_text(r, {false}).find('\033') == std::string::npos);
    CHECK(stat::format_text(r, {true}).find("\033[") != std::string::npos);
    CHECK(stat::format_history(r, {false}).find("+100 B") != std::string::npos);  // 40 B -> 140 B saved
}
