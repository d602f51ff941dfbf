// The store directory's layout (src/engine/store_layout.cc) on its own: the
// FORMAT record's text and its parse, which versions this program opens,
// the durable write, the lock, and the modes it makes private. The engine
// tests (trust_test, fsync_log_test) and fsck's upgrade test show them in use.
#include "engine/store_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>

#include "engine_test_util.h"
#include "meta/records.h"

using namespace hiodsfs;
using hiodsfs::test::mode_of;
using hiodsfs::test::TempDir;

namespace {

StoreFormat cdc_format() {
    StoreFormat f;
    f.version = kFormatVersion;
    f.chunking = ChunkingParams{};
    return f;
}

std::unique_ptr<StoreDir> open_dir(const std::string& path) {
    std::unique_ptr<StoreDir> dir;
    REQUIRE(StoreDir::open(path, StoreDirOptions{}, &dir).is_ok());
    return dir;
}

}  // namespace

TEST_CASE("FORMAT's text parses back to the same record", "[engine][store_layout]") {
    StoreFormat f = cdc_format();
    for (bool log_open : {false, true}) {
        for (const char* tier : {"", "rados:pool/store"}) {
            f.log_open = log_open;
            f.tier = tier;
            StoreFormat back;
            REQUIRE(parse_store_format(store_format_text(f), "FORMAT", &back).is_ok());
            CHECK(back.version == f.version);
            CHECK(back.log_open == log_open);
            CHECK(back.tier == tier);
            CHECK(back.chunking == f.chunking);
            CHECK(same_format(f, back));
        }
    }
    // An open fsync log is a version no older hiodsfs takes for its own.
    f.log_open = true;
    f.tier = "";
    CHECK(store_format_text(f).find("format " + std::to_string(kFormatVersion + kLogOpenVersionOffset) + "\n") !=
          std::string::npos);
}

TEST_CASE("a text that is not a format record is refused with its name", "[engine][store_layout]") {
    const std::string good = store_format_text(cdc_format());
    const std::string chunking_line = good.substr(good.find("chunking "));
    for (const std::string& bad : {std::string(""), std::string("format 5\n") + chunking_line,  // no magic line
                                   std::string("hiodsfs store\n") + chunking_line,            // no version
                                   std::string("hiodsfs store\nformat x\n") + chunking_line,  // version not a number
                                   std::string("hiodsfs store\nformat 5\n")}) {              // no chunking
        StoreFormat out;
        const Status st = parse_store_format(bad, "/srv/store/FORMAT", &out);
        INFO(bad);
        CHECK(st.err() == EUCLEAN);
        CHECK(st.message() == "/srv/store/FORMAT is not a hiodsfs format record");
    }
    StoreFormat out;
    const Status st = parse_store_format("hiodsfs store\nformat 5\nchunking cdc:1:2:3\n", "FORMAT", &out);
    CHECK(st.err() == EUCLEAN);
    CHECK(st.message().rfind("FORMAT: bad chunking line: ", 0) == 0);
}

TEST_CASE("only the versions this program knows open; older ones are sent to --upgrade", "[engine][store_layout]") {
    StoreFormat f = cdc_format();
    for (std::uint32_t v = kOldestOpenableFormat; v <= kFormatVersion; ++v) {
        f.version = v;
        CHECK(check_format_version("/s", f).is_ok());
    }
    f.version = kOldestOpenableFormat - 1;
    Status old = check_format_version("/s", f);
    CHECK(old.err() == EPROTO);
    CHECK(old.message().find("hiodsfs-fsck --upgrade /s") != std::string::npos);
    f.version = kEncryptedFormatVersion;
    CHECK(check_format_version("/s", f).is_ok());
    f.version = kEncryptedFormatVersion + 1;
    Status newer = check_format_version("/s", f);
    CHECK(newer.err() == EPROTO);
    CHECK(newer.message() == "store /s has format version " + std::to_string(kEncryptedFormatVersion + 1) +
                                 "; this hiodsfs reads formats 4 to 6");

    // Different chunking is a different store; the tier line is not compared.
    StoreFormat a = cdc_format(), b = cdc_format();
    b.chunking = ChunkingParams::fixed(4096);
    CHECK_FALSE(same_format(a, b));
    b = a;
    b.tier = "rados:p/s";
    CHECK(same_format(a, b));
}

TEST_CASE("FORMAT is written through a new file, never one found in its place", "[engine][store_layout]") {
    TempDir dir;
    const std::string victim = dir.path() + "/victim";
    { std::ofstream(victim) << "keep me"; }
    // A link where the temporary file goes: replaced, not written through.
    REQUIRE(::symlink(victim.c_str(), (dir.path() + "/FORMAT.tmp").c_str()) == 0);
    const StoreFormat f = cdc_format();
    REQUIRE(write_store_format(Env::posix(), dir.path(), f).is_ok());
    std::ifstream in(victim);
    std::string kept;
    std::getline(in, kept);
    CHECK(kept == "keep me");

    StoreFormat back;
    bool exists = false;
    REQUIRE(read_store_format(Env::posix(), dir.path(), &back, &exists).is_ok());
    CHECK(exists);
    CHECK(same_format(f, back));
    CHECK(::access((dir.path() + "/FORMAT.tmp").c_str(), F_OK) != 0);

    TempDir empty;
    REQUIRE(read_store_format(Env::posix(), empty.path(), &back, &exists).is_ok());
    CHECK_FALSE(exists);
}

TEST_CASE("the store lock keeps a second holder out", "[engine][store_layout]") {
    TempDir dir;
    auto store = open_dir(dir.path());
    std::unique_ptr<StoreLock> first, second;
    REQUIRE(StoreLock::acquire(*store, true, 0, &first).is_ok());
    CHECK(StoreLock::acquire(*store, true, 0, &second).err() == EBUSY);
    CHECK(StoreLock::acquire(*store, false, 0, &second).err() == EBUSY);
    first.reset();
    REQUIRE(StoreLock::acquire(*store, false, 0, &first).is_ok());
    CHECK(StoreLock::acquire(*store, false, 0, &second).is_ok());  // readers share it
    std::unique_ptr<StoreLock> writer;
    CHECK(StoreLock::acquire(*store, true, 0, &writer).err() == EBUSY);
}

TEST_CASE("a lock file that is a link is refused, not followed", "[engine][store_layout]") {
    TempDir dir, elsewhere;
    const std::string target = elsewhere.path() + "/someone-elses";
    { std::ofstream(target) << "x"; }
    REQUIRE(::symlink(target.c_str(), (dir.path() + "/lock").c_str()) == 0);
    auto store = open_dir(dir.path());
    std::unique_ptr<StoreLock> lock;
    CHECK_FALSE(StoreLock::acquire(*store, true, 0, &lock).is_ok());
    std::ifstream in(target);
    std::string kept;
    std::getline(in, kept);
    CHECK(kept == "x");  // nothing was written through the link
}

TEST_CASE("the store's files and folders are made private, links left alone", "[engine][store_layout]") {
    TempDir dir, elsewhere;
    const std::string outside = elsewhere.path() + "/outside";
    { std::ofstream(outside) << "x"; }
    REQUIRE(::chmod(outside.c_str(), 0644) == 0);
    REQUIRE(::mkdir((dir.path() + "/segments").c_str(), 0755) == 0);
    { std::ofstream(dir.path() + "/segments/00000001") << "data"; }
    REQUIRE(::chmod((dir.path() + "/segments/00000001").c_str(), 0644) == 0);
    REQUIRE(::symlink(outside.c_str(), (dir.path() + "/segments/link").c_str()) == 0);

    auto store = open_dir(dir.path());
    REQUIRE(make_store_private(*store).is_ok());
    CHECK(mode_of(dir.path() + "/segments") == 0700);
    CHECK(mode_of(dir.path() + "/segments/00000001") == 0600);
    CHECK(mode_of(outside) == 0644);  // through the link: untouched
}

TEST_CASE("an encrypted store's FORMAT: its line parses back, comes with format 6 only, and is compared",
          "[engine][store_layout][encryption]") {
    StoreFormat f = cdc_format();
    f.version = kEncryptedFormatVersion;
    f.encryption.cipher = StoreEncryption::kCipher;
    f.encryption.id = std::string(32, 'a');
    f.encryption.check = std::string(64, '0');
    const std::string text = store_format_text(f);
    CHECK(text.find("format 6\n") != std::string::npos);
    CHECK(text.find("encryption xaes-256-gcm id=" + f.encryption.id + " check=" + f.encryption.check + "\n") !=
          std::string::npos);
    StoreFormat back;
    REQUIRE(parse_store_format(text, "FORMAT", &back).is_ok());
    CHECK(back.encryption == f.encryption);
    CHECK(same_format(f, back));
    // A store made before XAES-256-GCM keeps its AES-256-GCM line.
    StoreFormat legacy = f, legacy_back;
    legacy.encryption.cipher = StoreEncryption::kAesGcmCipher;
    REQUIRE(parse_store_format(store_format_text(legacy), "FORMAT", &legacy_back).is_ok());
    CHECK(legacy_back.encryption.cipher == "aes-256-gcm");
    CHECK_FALSE(same_format(f, legacy_back));
    // Stripped of its line, or given another key check, it is another store.
    StoreFormat stripped = f;
    stripped.encryption = StoreEncryption{};
    CHECK_FALSE(same_format(f, stripped));
    StoreFormat other = f;
    other.encryption.check = std::string(64, '1');
    CHECK_FALSE(same_format(f, other));
    // A line without format 6, format 6 without a line, a cipher this
    // program does not know, and a malformed line are refused.
    const std::size_t at = text.find("chunking ");
    const std::string chunking_line = text.substr(at, text.find('\n', at) + 1 - at);
    const std::string plain5 = "hiodsfs store\nformat 5\n" + chunking_line;
    const std::string line = text.substr(text.find("encryption "));
    StoreFormat out;
    CHECK(parse_store_format(plain5 + line, "FORMAT", &out).err() == EUCLEAN);
    out = StoreFormat{};
    CHECK(parse_store_format("hiodsfs store\nformat 6\n" + chunking_line, "FORMAT", &out).err() == EUCLEAN);
    out = StoreFormat{};
    Status st = parse_store_format("hiodsfs store\nformat 6\n" + chunking_line + "encryption chacha20 id=" +
                                       f.encryption.id + " check=" + f.encryption.check + "\n",
                                   "FORMAT", &out);
    CHECK(st.err() == EPROTO);
    CHECK(st.message().find("chacha20") != std::string::npos);
    for (const std::string& bad : {std::string("encryption aes-256-gcm id=xyz check=") + f.encryption.check,
                                   "encryption aes-256-gcm id=" + f.encryption.id,
                                   "encryption aes-256-gcm id=" + f.encryption.id + " check=" + f.encryption.check +
                                       " more"}) {
        INFO(bad);
        out = StoreFormat{};
        CHECK(parse_store_format("hiodsfs store\nformat 6\n" + chunking_line + bad + "\n", "FORMAT", &out).err() ==
              EUCLEAN);
    }
}
