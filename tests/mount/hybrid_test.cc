// Deferred and hybrid deduplication through a real mount: the background
// pass deduplicates what deferred mode wrote raw, converging to what inline
// mode stores; its queue survives an unmount and a kill -9.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "mount_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;

namespace {

struct TestFile {
    std::string name, data;
};

// Unique data, an exact copy, a copy with bytes inserted near the start,
// and a file of mixed new and repeated blocks.
std::vector<TestFile> dataset() {
    std::string base = random_bytes(12 * kMiB, 101);
    std::string shifted = base;
    shifted.insert(7000, random_bytes(333, 5));
    std::string mixed = random_bytes(2 * kMiB, 7) + base.substr(kMiB, 3 * kMiB) + random_bytes(kMiB, 8);
    return {{"base", base}, {"copy", base}, {"shifted", shifted}, {"mixed", mixed}};
}

void write_synced(const std::string& path, const std::string& data) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    for (std::size_t off = 0; off < data.size();) {
        ssize_t n = ::write(fd, data.data() + off, std::min<std::size_t>(data.size() - off, 256 * kKiB));
        REQUIRE(n > 0);
        off += static_cast<std::size_t>(n);
    }
    REQUIRE(::fsync(fd) == 0);
    REQUIRE(::close(fd) == 0);
}

void check_contents(const MountFixture& m, const std::vector<TestFile>& files) {
    for (const auto& f : files) {
        INFO(f.name);
        CHECK(read_file(m.path(f.name)) == f.data);
    }
}

// Each thread's name and nice value (/proc/PID/task/*/stat's 19th field);
// a thread that ends meanwhile is left out.
std::multimap<std::string, int> thread_nices(pid_t pid) {
    std::multimap<std::string, int> out;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::string name = read_file_or_empty(t.path().string() + "/comm");
        const std::string stat = read_file_or_empty(t.path().string() + "/stat");
        const std::size_t close = stat.rfind(')');
        if (name.empty() || close == std::string::npos) continue;
        if (name.back() == '\n') name.pop_back();
        std::istringstream fields(stat.substr(close + 1));
        std::string field;
        for (int i = 3; i <= 19 && (fields >> field); ++i) {
        }
        out.emplace(name, std::stoi(field));
    }
    return out;
}

}  // namespace

TEST_CASE("deferred writes are deduplicated in the background and match inline's stored bytes",
          "[mount][hybrid]") {
    auto files = dataset();
    SpaceCounters inline_c, deferred_c;
    // Without the writeback cache requests arrive in application order, so
    // inline mode cuts the canonical chunks this compares against (with it,
    // the kernel may send one file's pages out of order and inline then
    // stores slightly more than the background pass does).
    {
        MountFixture m({"mode=inline", "control_interval=200", "no_writeback_cache"});
        for (const auto& f : files) write_synced(m.path(f.name), f.data);
        m.unmount();
        inline_c = m.counters();
    }
    MountFixture m({"mode=deferred", "control_interval=200", "no_writeback_cache"});
    for (const auto& f : files) write_synced(m.path(f.name), f.data);
    INFO("daemon log: " << m.daemon_log());
    REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));
    m.unmount();
    deferred_c = m.counters();
    INFO("inline: " << describe(inline_c) << "\ndeferred: " << describe(deferred_c));
    CHECK(deferred_c.backlog_records == 0);
    CHECK(deferred_c.raw_bytes == 0);
    CHECK(deferred_c.logical_bytes == inline_c.logical_bytes);
    double diff = std::abs(double(deferred_c.stored_bytes) - double(inline_c.stored_bytes));
    CHECK(diff <= 0.01 * double(inline_c.stored_bytes));
    // Duplicates really were shared: far less stored than written.
    CHECK(deferred_c.stored_bytes < deferred_c.logical_bytes * 6 / 10);
    m.mount();
    check_contents(m, files);
}

TEST_CASE("the dirty queue survives an unmount and drains at the next mount", "[mount][hybrid]") {
    auto files = dataset();
    // No background workers: the queue is certain to be full at unmount.
    MountFixture m({"mode=deferred", "background_threads=0", "control_interval=200"});
    for (const auto& f : files) write_synced(m.path(f.name), f.data);
    m.unmount();
    SpaceCounters before = m.counters();
    INFO(describe(before));
    CHECK(before.backlog_records > 0);
    CHECK(before.raw_bytes > 0);
    m.set_options({"mode=inline", "control_interval=200"});
    m.mount();
    REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));
    check_contents(m, files);
    m.unmount();
    SpaceCounters after = m.counters();
    CHECK(after.backlog_records == 0);
    CHECK(after.stored_bytes < before.stored_bytes);
    m.mount();
    check_contents(m, files);
}

TEST_CASE("kill -9 in the middle of a backlog loses nothing fsynced; the queue resumes",
          "[mount][hybrid][crash]") {
    auto files = dataset();
    MountFixture m({"mode=deferred", "background_threads=1", "control_interval=200"});
    for (const auto& f : files) write_synced(m.path(f.name), f.data);
    // The pass is working on the queue now; kill the daemon under it.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    m.crash();
    m.set_options({"mode=hybrid", "control_interval=200"});
    m.mount();
    REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));
    check_contents(m, files);
    m.remount();
    check_contents(m, files);
}

// A file the pass sweeps at once, whole: 64 MiB written in deferred mode
// with the pass off (background_threads=0), then a mount with it on. From
// that mount on, step() is called every 2 ms, as a log file's appends or a
// copy's hole lookups come, until status.json's `counter` (a request served
// beside a sweep, or a sweep that stopped for one) moves. A pass that runs
// during the write would leave a tail of unknown size (none, at times, under
// ASan), and steps far apart could all miss it. If the pass drains the file
// first, all of it is done again, at most five times. Then the pass drains
// it, and it must read back as `data` (step may append to it).
static void step_beside_sweep(MountFixture& m, std::string* data, const std::string& counter,
                              const std::function<void(int fd)>& step) {
    const std::vector<std::string> options = m.options();
    std::vector<std::string> pass_off = options;
    pass_off.push_back("background_threads=0");
    auto yielded = [&] { return status_field(m.store(), counter) >= 1; };
    auto drained = [&] {
        return status_field(m.store(), "backlog_records") == 0 && status_field(m.store(), "raw_bytes") == 0;
    };
    int steps = 0, rounds = 0;
    for (; rounds < 5 && !yielded(); ++rounds) {
        m.unmount();
        m.set_options(pass_off);
        m.mount();
        write_synced(m.path("big"), *data);
        m.unmount();
        m.set_options(options);
        m.mount();
        int fd = ::open(m.path("big").c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        // status.json is rewritten every control interval: a drained file
        // is believed after a second.
        const auto earliest_drained = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (std::chrono::steady_clock::now() < deadline && !yielded() &&
               (std::chrono::steady_clock::now() < earliest_drained || !drained())) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            step(fd);
            ++steps;
        }
        REQUIRE(::close(fd) == 0);
    }
    INFO(steps << " steps in " << rounds << " rounds; sweeps stopped early: "
               << status_field(m.store(), "sweeps_yielded"));
    CHECK(yielded());
    REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));
    CHECK(read_file(m.path("big")) == *data);
}

// The background pass re-cuts a file under its stream lock, for seconds when
// the file is large. fsync and close (FUSE's flush) of that file need none
// of its work, so they do not wait for it; the daemon counts them in
// status.json ("syncs_beside_sweep"), and the file reads back whole.
TEST_CASE("fsync and close of a file the pass is sweeping do not wait for the sweep", "[mount][hybrid]") {
    std::string data = random_bytes(64 * kMiB, 31);
    MountFixture m({"mode=deferred", "control_interval=200"});
    step_beside_sweep(m, &data, "syncs_beside_sweep", [&](int) {
        int fd = ::open(m.path("big").c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::fsync(fd) == 0);
        REQUIRE(::close(fd) == 0);
    });
}

// A write, or an lseek, of a file the pass is sweeping waits for the
// sweep's lock; the sweep lets it in at its next 1 MiB piece instead of
// after the whole re-cut (docs/benchmarks.md: 1.9-2.8 s for the first
// append after a 1 GiB write).
TEST_CASE("a write to a file the pass is sweeping makes the sweep yield", "[mount][hybrid]") {
    std::string data = random_bytes(64 * kMiB, 32);
    MountFixture m({"mode=deferred", "control_interval=200", "no_writeback_cache"});
    int appends = 0;
    step_beside_sweep(m, &data, "sweeps_yielded_to_requests", [&](int fd) {
        const std::string piece = random_bytes(4096, 1000 + appends++);
        REQUIRE(::write(fd, piece.data(), piece.size()) == static_cast<ssize_t>(piece.size()));
        data += piece;
    });
}

// cp and tar look for holes with SEEK_DATA and SEEK_HOLE. With the
// writeback cache the daemon answers the first lseek ENOSYS and the kernel
// never sends another (vfs.cc), so this mount has none.
TEST_CASE("an lseek of a file the pass is sweeping makes the sweep yield", "[mount][hybrid]") {
    std::string data = random_bytes(64 * kMiB, 33);
    MountFixture m({"mode=deferred", "control_interval=200", "no_writeback_cache"});
    step_beside_sweep(m, &data, "sweeps_yielded_to_requests", [](int fd) {
        REQUIRE(::lseek(fd, 0, SEEK_DATA) == 0);
        REQUIRE(::lseek(fd, 0, SEEK_HOLE) == static_cast<off_t>(64 * kMiB));
    });
    // The daemon's count of requests by kind: the lseeks reached it.
    CHECK(status_field(m.store(), "lseek") > 0);
}

// A steady load that uses a small part of what the daemon can serve: 4 KiB
// writes a millisecond apart, one request each. HIODS's stress test (a gap
// under 3 ms) took it for a saturating one and kept the pass paused while
// the backlog grew; the spare-capacity throttle lets the pass run, so the
// backlog drains while the writer goes on.
TEST_CASE("a steady light load leaves the pass running: the backlog drains while it writes",
          "[mount][hybrid][spare]") {
    MountFixture m({"mode=deferred", "control_interval=200", "no_writeback_cache"});
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> written{0};
    std::atomic<int> write_error{0};
    std::thread writer([&] {
        const int fd = ::open(m.path("steady").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            write_error = errno;
            return;
        }
        std::string block(4096, '\0');
        for (std::uint64_t i = 0; !stop.load(); ++i) {
            fill_random(block.data(), block.size(), 7000 + i);
            const auto offset = static_cast<off_t>((i * 7919 % 4096) * 4096);
            if (::pwrite(fd, block.data(), block.size(), offset) != static_cast<ssize_t>(block.size())) {
                write_error = errno;
                break;
            }
            written.fetch_add(block.size());
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ::close(fd);
    });
    struct Seen {
        double background = 0;
        std::uint64_t backlog = 0, written = 0;
        std::string regime;
    };
    std::vector<Seen> seen;
    bool drained_while_writing = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!drained_while_writing && write_error.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const nlohmann::json s = nlohmann::json::parse(read_file_or_empty(m.store() + "/status.json"), nullptr, false);
        if (s.is_discarded() || !s.contains("background_bytes_per_s")) continue;  // replaced as we read
        const std::uint64_t before = written.load();
        Seen x{s["background_bytes_per_s"].get<double>(), s["backlog_bytes"].get<std::uint64_t>(), before,
               s.value("throttle_regime", std::string())};
        seen.push_back(x);
        // The pass processed data in the last interval, the backlog holds
        // under half of what was written, and the writer is still going
        // (a second of writes at least, and more after this sample).
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        drained_while_writing = x.background > 0 && x.written >= 1000 * 4096 && x.backlog * 2 < x.written &&
                                written.load() > before;
    }
    stop = true;
    writer.join();
    for (const Seen& x : seen)
        UNSCOPED_INFO("written " << x.written << ", backlog " << x.backlog << ", background " << x.background
                                 << " B/s (" << x.regime << ")");
    INFO("daemon log: " << m.daemon_log());
    CHECK(drained_while_writing);
    CHECK(write_error.load() == 0);
    REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));
}

namespace {

// Polls until the daemon's thread `name` runs at `nice` (60 s at most);
// every thread's name and nice value as last read.
std::multimap<std::string, int> wait_for_nice(pid_t pid, const std::string& name, int nice) {
    std::multimap<std::string, int> nices;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
        nices = thread_nices(pid);
        auto r = nices.find(name);
        if (r != nices.end() && r->second == nice) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < deadline);
    return nices;
}

std::string describe(const std::multimap<std::string, int>& nices) {
    std::string all;
    for (const auto& [name, nice] : nices) all += name + ":" + std::to_string(nice) + " ";
    return all;
}

}  // namespace

// The scheduler serves requests first: the pass, compaction and the
// trainer run at background_nice, the request threads at 0.
TEST_CASE("background work runs niced and requests do not; background_nice=0 runs it as requests",
          "[mount][hybrid][nice]") {
    for (const int want : {19, 0}) {
        INFO("background_nice " << want);
        // Given even where it is the default: the tests' fixture runs it at 0.
        MountFixture m({"mode=deferred", "control_interval=200", "background_nice=" + std::to_string(want)});
        write_synced(m.path("f"), random_bytes(8 * kMiB, 11));
        REQUIRE(wait_drained(m.store(), std::chrono::seconds(120)));  // the pass has run
        // Compaction steps on its own timer (a second when idle).
        const std::multimap<std::string, int> nices = wait_for_nice(m.daemon_pid(), "reclaim", want);
        INFO("threads: " << describe(nices));
        for (const char* background : {"dedup-pass", "reclaim"}) {
            CHECK(nices.count(background) == 1);
            for (auto [it, end] = nices.equal_range(background); it != end; ++it) CHECK(it->second == want);
        }
        for (const char* foreground : {"fuse-req", "committer", "seg-flusher", "mode-control"}) {
            CHECK(nices.count(foreground) >= 1);
            for (auto [it, end] = nices.equal_range(foreground); it != end; ++it) CHECK(it->second == 0);
        }
        // What the pass stored reads back.
        CHECK(read_file(m.path("f")) == random_bytes(8 * kMiB, 11));
        m.unmount();
    }
}

// Past the backlog's limit background work takes the CPU as requests do.
// No pass here (background_threads=0), so the backlog stays over the limit;
// the reclaimer goes by the same nice value as the pass.
TEST_CASE("background work runs niced below the backlog's limit and at nice 0 past it", "[mount][hybrid][nice]") {
    MountFixture m({"mode=deferred", "control_interval=200", "background_threads=0", "backlog_max=1M",
                    "background_nice=19"});
    std::multimap<std::string, int> nices = wait_for_nice(m.daemon_pid(), "reclaim", 19);
    {
        INFO("before any write: " << describe(nices));
        for (auto [it, end] = nices.equal_range("reclaim"); it != end; ++it) CHECK(it->second == 19);
    }
    write_synced(m.path("f"), random_bytes(4 * kMiB, 12));
    nices = wait_for_nice(m.daemon_pid(), "reclaim", 0);
    INFO("over the limit: " << describe(nices) << "; status.json: " << read_file_or_empty(m.store() + "/status.json"));
    CHECK(nices.count("reclaim") == 1);
    for (auto [it, end] = nices.equal_range("reclaim"); it != end; ++it) CHECK(it->second == 0);
    CHECK(status_field(m.store(), "backlog_bytes") > 1024 * 1024);
    m.unmount();
}
