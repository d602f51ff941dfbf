// Compression through a real mount (docs/architecture.md, "Compression"):
// each method's round trip and figures; deferred writes the background
// pass compresses; a store written inline with lz4 stored anew at the
// background level once idle; and a store mixing raw, lz4, zstd and
// dictionary chunks that reads back after remounts and recompression.
// Figures are read with hiodsfs-stat --json, of the unmounted store where a
// figure must be exact, and checked with hiodsfs-fsck --scrub.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mount_fixture.h"
#include "stat_util.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;
using nlohmann::json;

namespace {

// Where got first differs from want, or "" when they are equal: a CHECK on
// the contents themselves would print megabytes.
std::string first_difference(const std::string& got, const std::string& want) {
    if (got == want) return "";
    std::size_t at = 0;
    while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
    return "read " + std::to_string(got.size()) + " bytes of " + std::to_string(want.size()) +
           ", first difference at byte " + std::to_string(at);
}

void check_files_read_back(const MountFixture& m, const std::map<std::string, std::string>& files) {
    for (const auto& [name, data] : files) {
        INFO(name);
        CHECK(first_difference(read_file(m.path(name)), data) == "");
    }
}

void check_scrub_clean(const std::string& store) {
    const CmdResult scrub = run({HIODSFS_FSCK_BIN, store, "--scrub"});
    INFO("hiodsfs-fsck --scrub: " << scrub.describe());
    CHECK(scrub.status == 0);
}

double compression_ratio(const json& v) {
    return v.at("space").at("compression_ratio").get<double>();
}

// How long the background may take for what these tests give it (a few
// MiB): generous, for a machine busy with other work.
constexpr std::chrono::seconds kBackgroundDeadline{120};

}  // namespace

TEST_CASE(
    "each compression method through a mount: files read back after a remount, text is stored "
    "smaller, "
    "random bytes as they are",
    "[mount][compression]") {
    const std::string text = text_like(3 * kMiB, 4501);
    const std::string noise = random_bytes(2 * kMiB, 4502);
    std::map<std::string, std::uint64_t> text_stored;
    for (const std::string method : {"none", "lz4", "zstd:1", "zstd:19"}) {
        INFO("compression=" << method);
        // The background level is the write path's, so no idle
        // recompression changes what the write path stored.
        MountFixture m(
            {"mode=inline", "compression=" + method, "compression_background=" + method});
        write_file(m.path("text"), text);
        m.unmount();
        const json with_text = stat_json(m.store());
        m.mount();
        write_file(m.path("random"), noise);
        m.remount();
        check_files_read_back(m, {{"text", text}, {"random", noise}});
        m.unmount();
        const json v = stat_json(m.store());
        check_scrub_clean(m.store());

        text_stored[method] = field(with_text, "space", "stored_bytes");
        CHECK(field(with_text, "space", "content_bytes") == text.size());
        CHECK(field(v, "space", "content_bytes") == text.size() + noise.size());
        const std::uint64_t stored = field(v, "space", "stored_bytes");
        INFO("text stored in " << text_stored[method] << " bytes, text and random bytes in "
                               << stored << ", compression ratio " << compression_ratio(v));
        // The random bytes are stored as they are: their size, not more.
        const std::uint64_t random_added = stored - text_stored[method];
        CHECK(random_added >= noise.size());
        CHECK(random_added <= noise.size() + noise.size() / 100);
        if (method == "none") {
            CHECK(stored == field(v, "space", "content_bytes"));
            CHECK(compression_ratio(v) == 1.0);
        } else {
            CHECK(compression_ratio(v) > 1.2);
        }
    }
    INFO("text stored with lz4 in " << text_stored["lz4"] << " bytes, with zstd:19 in "
                                    << text_stored["zstd:19"]);
    CHECK(text_stored["zstd:19"] < text_stored["lz4"]);
}

TEST_CASE(
    "deferred writes through a mount with compression=none are stored compressed by the background "
    "pass",
    "[mount][compression]") {
    MountFixture m({"mode=deferred", "compression=none", "compression_background=zstd:9"});
    std::map<std::string, std::string> files;
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < 3; ++i) {
        const std::string name = "text" + std::to_string(i);
        files[name] = text_like(kMiB, 4700 + i);
        total += files[name].size();
        write_file(m.path(name), files[name]);
    }
    fsync_path(m.path("text0"));
    const json v = wait_for_stat(
        m.store(),
        [&](const json& x) {
            return field(x, "space", "logical_bytes") == total &&
                   field(x, "backlog", "records") == 0 && field(x, "space", "raw_bytes") == 0;
        },
        kBackgroundDeadline);
    INFO("daemon log: " << m.daemon_log());
    REQUIRE(field(v, "space", "logical_bytes") == total);
    CHECK(field(v, "backlog", "records") == 0);
    CHECK(field(v, "space", "raw_bytes") == 0);
    INFO("compression ratio " << compression_ratio(v));
    CHECK(compression_ratio(v) > 1.2);
    m.remount();
    check_files_read_back(m, files);
    m.unmount();
    check_scrub_clean(m.store());
}

TEST_CASE(
    "a store written inline with lz4 through a mount is stored at the background level once idle, "
    "and so is what is written after that",
    "[mount][compression]") {
    const std::string first = text_like(3 * kMiB, 4801);
    // Less than 1 MiB once stored with lz4: the open segment grows by less
    // than that after its look at the copies the first recompression made.
    const std::string second = text_like(3 * kMiB / 2, 4802);
    // What lz4 stores for each: a store of the same files that never
    // recompresses (the store under test may begin while they are written).
    std::uint64_t lz4_first = 0, lz4_second = 0;
    {
        MountFixture twin({"mode=inline", "compression=lz4", "compression_background=lz4"});
        write_file(twin.path("first"), first);
        twin.unmount();
        lz4_first = field(stat_json(twin.store()), "space", "stored_bytes");
        twin.mount();
        write_file(twin.path("second"), second);
        twin.unmount();
        lz4_second = field(stat_json(twin.store()), "space", "stored_bytes") - lz4_first;
    }
    REQUIRE(lz4_second < kMiB);
    MountFixture m({"mode=inline", "compression=lz4", "compression_background=zstd:19"});
    // Polls until the store holds `logical` bytes in fewer than `below`.
    auto wait_stored_below = [&](std::uint64_t logical, std::uint64_t below) {
        const json v = wait_for_stat(
            m.store(),
            [&](const json& x) {
                return field(x, "space", "logical_bytes") == logical &&
                       field(x, "space", "stored_bytes") < below;
            },
            kBackgroundDeadline);
        INFO("daemon log: " << m.daemon_log());
        INFO("stored " << field(v, "space", "stored_bytes") << " bytes, expected below " << below);
        CHECK(field(v, "space", "content_bytes") == logical);
        CHECK(field(v, "space", "stored_bytes") < below);
        return field(v, "space", "stored_bytes");
    };
    write_file(m.path("first"), first);
    fsync_path(m.path("first"));
    const std::uint64_t stored_first = wait_stored_below(first.size(), lz4_first * 8 / 10);
    write_file(m.path("second"), second);
    fsync_path(m.path("second"));
    wait_stored_below(first.size() + second.size(), stored_first + lz4_second * 8 / 10);
    // Done, the daemon says so: no segment left to look at, no round.
    const json settled = wait_for_stat(
        m.mnt(),
        [](const json& x) {
            return x["activity"]["recompress_pending_segments"] == 0 && x["activity"]["dictionary_pending"] == false;
        },
        kBackgroundDeadline);
    CHECK(settled["activity"]["recompress_pending_segments"] == 0);
    CHECK(run({HIODSFS_STAT_BIN, m.mnt()}).out.find("recompression") == std::string::npos);
    m.remount();
    check_files_read_back(m, {{"first", first}, {"second", second}});
    m.unmount();
    check_scrub_clean(m.store());
}

TEST_CASE(
    "a store of raw, lz4, zstd and dictionary chunks reads back after remounts and after idle "
    "recompression",
    "[mount][compression]") {
    struct Round {
        std::string name;
        std::vector<std::string> options;
    };
    // No background level until the last remount, so the chunks stay as
    // each round stored them (an idle store would store them anew).
    const std::vector<Round> rounds = {
        {"raw", {"compression=none"}},
        {"lz4", {"compression=lz4"}},
        {"zstd3", {"compression=zstd:3"}},
        {"dict", {"compression=zstd:3", "dictionary_min=1M"}},
    };
    MountFixture m({}, false);
    std::map<std::string, std::string> files;
    std::uint64_t seed = 4900;
    std::uint64_t rounds_stored = 0;
    for (const Round& round : rounds) {
        INFO("round " << round.name);
        std::vector<std::string> options = {"mode=inline", "compression_background=none"};
        options.insert(options.end(), round.options.begin(), round.options.end());
        m.set_options(options);
        m.mount();
        const json before = stat_json(m.store());
        if (round.name == "dict") {
            // The store holds well over dictionary_min: the trainer makes
            // one from what it holds before this round's files are written.
            const json d = wait_for_stat(
                m.store(), [](const json& x) { return field(x, "space", "dictionaries") == 1; },
                kBackgroundDeadline);
            REQUIRE(field(d, "space", "dictionaries") == 1);
        }
        for (int i = 0; i < 3; ++i) {
            const std::string name = round.name + std::to_string(i);
            files[name] = text_like(512 * kKiB, ++seed);
            write_file(m.path(name), files[name]);
        }
        m.unmount();
        const json after = stat_json(m.store());
        const std::uint64_t content =
            field(after, "space", "content_bytes") - field(before, "space", "content_bytes");
        const std::uint64_t stored =
            field(after, "space", "stored_bytes") - field(before, "space", "stored_bytes");
        INFO("the round's files: " << content << " bytes of content stored in " << stored);
        CHECK(content == 3 * 512 * kKiB);
        rounds_stored += stored;
        if (round.name == "raw")
            CHECK(stored == content);
        else
            CHECK(static_cast<double>(content) / static_cast<double>(stored) > 1.2);
    }
    m.mount();
    check_files_read_back(m, files);
    m.unmount();
    // Nothing was stored anew: the store holds what each round stored.
    const std::uint64_t mixed_stored = field(stat_json(m.store()), "space", "stored_bytes");
    CHECK(mixed_stored == rounds_stored);

    // Idle, the store is compacted for its chunks stored below zstd:19, and
    // the raw chunks of the segment it compacts are stored anew as well.
    m.set_options({"mode=inline", "compression=zstd:19", "compression_background=zstd:19"});
    m.mount();
    const std::uint64_t clearly_below = mixed_stored * 8 / 10;
    const json v = wait_for_stat(
        m.store(), [&](const json& x) { return field(x, "space", "stored_bytes") < clearly_below; },
        kBackgroundDeadline);
    INFO("daemon log: " << m.daemon_log());
    INFO("stored " << mixed_stored << " bytes before, " << field(v, "space", "stored_bytes")
                   << " now");
    CHECK(field(v, "space", "stored_bytes") < clearly_below);
    check_files_read_back(m, files);
    m.remount();
    check_files_read_back(m, files);
    m.unmount();
    check_scrub_clean(m.store());
}
