// Encryption at rest through a real mount (-o key_file=FILE,
// docs/architecture.md "Encryption at rest"): what is written through the
// mount appears nowhere in the store; identical files are stored once;
// hiodsfs-fsck checks the store with --key-file and refuses without it;
// hiodsfs-stat shows its figures; a wrong key, a missing one and a key file
// others may read are each refused with one line, the store untouched; a
// damaged chunk reads as EIO and fsck names its file. A store made with
// key=ask opens with its passphrase on standard input, and keeps every file
// through hiodsfs-fsck --change-key.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"
#include "stat_util.h"

using namespace hiodsfs;
using namespace hiodsfs::mt;
using namespace std::chrono_literals;

namespace {

const std::string kMarker = "MOUNT-MARKER-8d3a61";

// A 32-byte key file of the given mode (owned by whoever runs the test).
std::string key_file(const std::string& dir, const std::string& name, std::uint64_t seed, mode_t mode = 0600) {
    const std::string path = dir + "/" + name;
    write_file(path, random_bytes(32, seed), mode);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    return path;
}

// Every file under dir whose bytes hold s.
std::vector<std::string> files_holding(const std::string& dir, const std::string& s) {
    std::vector<std::string> found;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
        if (!f.is_regular_file()) continue;
        if (read_file(f.path().string()).find(s) != std::string::npos) found.push_back(f.path().string());
    }
    return found;
}

std::string marked(std::size_t n, std::uint64_t seed) {
    std::string s = text_like(n, seed);
    for (std::size_t at = 0; at + kMarker.size() < s.size(); at += 1013) s.replace(at, kMarker.size(), kMarker);
    return s;
}

// The store's names, sizes, modes and times, and FORMAT: a refused start
// changes none (but the lock file, which every start writes its pid into).
std::string tree_of(const std::string& dir) {
    return sh("cd " + shq(dir) + " && find . ! -name lock -printf '%p %s %m %T@\\n' | sort && cat FORMAT").out;
}

// The errno of the first read of path that fails (0: it reads whole).
int read_error(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    std::vector<char> buf(1 << 16);
    int err = 0;
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0) err = errno;
        if (n <= 0) break;
    }
    ::close(fd);
    return err;
}

// A daemon start refused: exit 1, one line that says expect, no mount.
void check_refused(const CmdResult& r, const std::string& expect, const std::string& mnt) {
    INFO(r.describe());
    CHECK_FALSE(r.timed_out);
    CHECK(r.status == 1);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(expect) != std::string::npos);
    CHECK_FALSE(mounted_at(mnt));
}

struct Unmounter {
    std::string mnt;
    ~Unmounter() {
        if (mounted_at(mnt)) run({"fusermount3", "-uz", mnt});
    }
};

}  // namespace

TEST_CASE("an encrypted store through a mount: no written byte shows in the store, copies are stored once, "
          "fsck and stat work with the key",
          "[mount][encryption]") {
    TempDir keys;
    const std::string key = key_file(keys.path(), "store.key", 101);
    {
        // The search finds the marker where it is: in a plain store.
        MountFixture plain({"compression=none"});
        write_file(plain.path("one"), marked(256 * 1024, 77));
        plain.unmount();
        CHECK_FALSE(files_holding(plain.store(), kMarker).empty());
    }
    for (const std::string mode : {"inline", "deferred"}) {
        INFO("mode=" << mode);
        MountFixture m({"mode=" + mode, "key_file=" + key});
        const std::string text = marked(3 * kMiB, 77);
        write_file(m.path("one"), text);
        write_file(m.path("two"), text);
        const std::string small = kMarker + " in a small file\n";
        write_file(m.path("small"), small);
        fsync_path(m.path("one"));
        REQUIRE(wait_drained(m.store(), 120s));
        m.remount();
        CHECK(read_file(m.path("one")) == text);
        CHECK(read_file(m.path("two")) == text);
        CHECK(read_file(m.path("small")) == small);
        m.unmount();
        CHECK(files_holding(m.store(), kMarker).empty());
        CHECK(read_file(m.store() + "/FORMAT").find("encryption xaes-256-gcm") != std::string::npos);
        const CmdResult scrub = run({HIODSFS_FSCK_BIN, m.store(), "--scrub", "--key-file", key});
        INFO(scrub.describe());
        CHECK(scrub.status == 0);
        const CmdResult keyless = run({HIODSFS_FSCK_BIN, m.store()});
        INFO(keyless.describe());
        CHECK(keyless.status == 8);
        CHECK(line_count(keyless.err) == 1);
        CHECK(keyless.err.find("--key-file") != std::string::npos);
        // Stored once: the keyed fingerprints deduplicate as plain ones do.
        const nlohmann::json v = stat_json(m.store());
        CHECK(v.at("encryption") == "xaes-256-gcm");
        CHECK_FALSE(v.contains("key_checked"));
        CHECK(field(v, "space", "logical_bytes") == 2 * text.size() + small.size());
        CHECK(field(v, "space", "content_bytes") == text.size() + small.size());
        // hiodsfs-stat checks a key when given one, as the daemon would, and
        // says so; another key is refused in one line.
        CHECK(stat_json(m.store(), true, {"--key-file", key}).value("key_checked", false));
        const std::string other = key_file(keys.path(), "other.key", 102);
        const CmdResult refused = run({HIODSFS_STAT_BIN, "--key-file", other, m.store()});
        INFO(refused.describe());
        CHECK(refused.status == 1);
        CHECK(line_count(refused.err) == 1);
        CHECK(refused.err.find("not this store's key") != std::string::npos);
        m.mount();
        CHECK(stat_json(m.mnt(), true, {"--key-file", key}).value("key_checked", false));
        CHECK(run({HIODSFS_STAT_BIN, "--key-file", other, m.mnt()}).status == 1);
        m.unmount();
    }
}

TEST_CASE("a wrong key, a missing key, a loose key file and a key for a plain store are refused with one line, "
          "the store untouched",
          "[mount][encryption]") {
    TempDir keys;
    const std::string key = key_file(keys.path(), "right.key", 201);
    const std::string wrong = key_file(keys.path(), "wrong.key", 202);
    const std::string loose = key_file(keys.path(), "loose.key", 201, 0644);
    const std::string short_key = keys.path() + "/short.key";
    write_file(short_key, "too short", 0600);
    MountFixture m({"key_file=" + key});
    write_file(m.path("f"), marked(64 * 1024, 5));
    m.unmount();
    MountFixture plain;
    write_file(plain.path("f"), "plain");
    plain.unmount();
    const std::string bin = daemon_binary();
    struct Case {
        const char* what;
        std::string store;
        std::vector<std::string> options;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {"a wrong key", m.store(), {"-o", "key_file=" + wrong}, "not this store's key"},
        {"no key", m.store(), {}, "key_file="},
        {"a key file others may read", m.store(), {"-o", "key_file=" + loose}, "chmod 600"},
        {"a key file of the wrong size", m.store(), {"-o", "key_file=" + short_key}, "not a key's 32"},
        {"a key file that is not there", m.store(), {"-o", "key_file=" + keys.path() + "/none.key"}, "none.key"},
        {"a key for a plain store", plain.store(), {"-o", "key_file=" + key}, "not encrypted"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        const std::string before = tree_of(c.store);
        Unmounter guard{m.mnt()};
        std::vector<std::string> argv{bin, c.store, m.mnt(), "-f"};
        argv.insert(argv.end(), c.options.begin(), c.options.end());
        check_refused(run(argv, {}, 20s), c.expect, m.mnt());
        CHECK(tree_of(c.store) == before);
    }
    // The right key still opens it.
    m.mount();
    CHECK(read_file(m.path("f")) == marked(64 * 1024, 5));
}

TEST_CASE("a damaged chunk of an encrypted store reads as EIO, and fsck names its file", "[mount][encryption]") {
    TempDir keys;
    const std::string key = key_file(keys.path(), "store.key", 301);
    MountFixture m({"mode=inline", "compression=none", "key_file=" + key});
    const std::string data = random_bytes(2 * kMiB, 31);
    write_file(m.path("victim"), data);
    m.unmount();
    // A byte in the middle of the first segment: inside a sealed chunk.
    std::string segment;
    for (const auto& f : std::filesystem::directory_iterator(m.store() + "/segments"))
        if (segment.empty() || f.path().string() < segment) segment = f.path().string();
    REQUIRE_FALSE(segment.empty());
    flip_byte(segment, std::filesystem::file_size(segment) / 2);
    m.mount();
    CHECK(read_error(m.path("victim")) == EIO);
    m.unmount();
    const CmdResult scrub = run({HIODSFS_FSCK_BIN, m.store(), "--scrub", "--key-file", key});
    INFO(scrub.describe());
    CHECK(scrub.status != 0);
    CHECK(scrub.out.find("/victim") != std::string::npos);
}

TEST_CASE("a store made with key=ask: the passphrase on standard input opens it, a wrong one is refused, and a new "
          "one keeps every file",
          "[mount][encryption]") {
    TempDir answers;
    auto answer = [&](const std::string& name, const std::string& lines) {
        const std::string path = answers.path() + "/" + name;
        write_file(path, lines, 0600);
        return path;
    };
    MountFixture m({"key=ask"}, false);
    m.set_stdin(answer("first", "first words\n"));
    m.mount();
    const std::string text = marked(2 * kMiB, 31);
    write_file(m.path("one"), text);
    write_file(m.path("two"), text);
    m.unmount();
    CHECK(files_holding(m.store(), kMarker).empty());
    CHECK(std::filesystem::exists(m.store() + "/KEYSLOT"));
    // A wrong passphrase, none, and key=ask beside a key file: one line each,
    // exit 1, the store untouched.
    const std::string bin = daemon_binary();
    const std::string before = tree_of(m.store());
    struct Case {
        const char* what;
        std::string input;
        std::string options;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {"a wrong passphrase", answer("wrong", "first wordz\n"), "key=ask", "passphrase is not this store's"},
        {"an empty input", answer("empty", ""), "key=ask", "end of input"},
        {"no passphrase", answer("none", "first words\n"), "ro", "key=ask"},
        {"key=ask and a key file", answer("both", "first words\n"), "key=ask,key_file=/nonexistent", "exclude"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        Unmounter guard{m.mnt()};
        const CmdResult r = sh(shq(bin) + " " + shq(m.store()) + " " + shq(m.mnt()) + " -f -o " + shq(c.options) +
                                   " < " + shq(c.input),
                               20s);
        check_refused(r, c.expect, m.mnt());
        CHECK(tree_of(m.store()) == before);
    }
    // A new passphrase, given while the store is mounted.
    m.mount();
    const CmdResult changed = sh(shq(HIODSFS_FSCK_BIN) + " --change-key " + shq(m.store()) + " --key ask < " +
                                 shq(answer("change", "first words\nsecond words\n")));
    INFO(changed.describe());
    CHECK(changed.status == 0);
    m.unmount();
    m.set_stdin(answer("second", "second words\n"));
    m.mount();
    CHECK(read_file(m.path("one")) == text);
    CHECK(read_file(m.path("two")) == text);
    m.unmount();
    Unmounter guard{m.mnt()};
    const CmdResult old = sh(shq(bin) + " " + shq(m.store()) + " " + shq(m.mnt()) + " -f -o key=ask < " +
                             shq(answer("old", "first words\n")), 20s);
    CHECK(old.status == 1);
    CHECK(old.err.find("passphrase is not this store's") != std::string::npos);
    const CmdResult scrub = sh(shq(HIODSFS_FSCK_BIN) + " " + shq(m.store()) + " --scrub --key ask < " +
                               shq(answer("check", "second words\n")));
    INFO(scrub.describe());
    CHECK(scrub.status == 0);
    // hiodsfs-stat tries the passphrase without reading a chunk.
    const CmdResult stat_new = sh(shq(HIODSFS_STAT_BIN) + " --no-color --key ask " + shq(m.store()) + " < " +
                                  shq(answer("stat", "second words\n")));
    INFO(stat_new.describe());
    CHECK(stat_new.status == 0);
    CHECK(stat_new.out.find("xaes-256-gcm (the key given opens it)") != std::string::npos);
    const CmdResult stat_old = sh(shq(HIODSFS_STAT_BIN) + " --key ask " + shq(m.store()) + " < " +
                                  shq(answer("stat-old", "first words\n")));
    CHECK(stat_old.status == 1);
    CHECK(line_count(stat_old.err) == 1);
    CHECK(stat_old.err.find("passphrase is not this store's") != std::string::npos);
}
