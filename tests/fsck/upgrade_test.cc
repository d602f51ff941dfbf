// hiodsfs-fsck --upgrade on stores written by hiodsfs of formats 1, 2 and 3:
// the daemon refuses them with the command to run; the upgrade keeps every
// file; an upgrade stopped at any step (as a crash would) finishes when run
// again.
#include "fsck/upgrade.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "../engine/engine_test_util.h"
#include "chunk/fingerprint.h"
#include "engine/store_layout.h"
#include "fsck/fsck.h"
#include "hiodsfs/env.h"
#include "meta/keys.h"
#include "meta/meta_store.h"
#include "meta/records.h"
#include "store_fixture.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

struct ToolRun {
    int code = -1;
    std::string out;
};

ToolRun run_tool(const std::string& args) {
    ToolRun r;
    FILE* p = ::popen((std::string(HIODSFS_FSCK_BIN) + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return r;
}

std::string format_text(const std::string& store) {
    std::ifstream in(store + "/FORMAT");
    return std::string(std::istreambuf_iterator<char>(in), {});
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

struct OldStore {
    TempDir dir;
    StoreFixture fixture;
    explicit OldStore(int format) { REQUIRE(unpack_store_fixture(dir.path(), format, &fixture)); }
    std::string store() const { return dir.path() + "/store"; }
    // Where the upgrade sets the old metadata aside.
    std::string set_aside() const { return store() + "/meta.format" + std::to_string(fixture.format); }

    EngineOptions options() const {
        StoreFormat format;
        bool found = false;
        REQUIRE(read_store_format(Env::posix(), store(), &format, &found).is_ok());
        REQUIRE(found);
        EngineOptions o = options_for(store(), format.chunking);
        o.background_threads = 0;  // the test runs the pass itself
        return o;
    }
};

InodeId resolve(Engine& e, const std::string& path) {
    InodeId at = kRootInode;
    std::size_t from = 0;
    while (from <= path.size()) {
        std::size_t slash = path.find('/', from);
        if (slash == std::string::npos) slash = path.size();
        Attr a;
        Status st = e.lookup(at, path.substr(from, slash - from), &a);
        INFO(path << ": " << st.to_string());
        REQUIRE(st.is_ok());
        at = a.ino;
        from = slash + 1;
    }
    return at;
}

// Every file of the manifest reads back as it was written, through the engine.
void check_files(Engine& e, const StoreFixture& f) {
    for (const ManifestEntry& m : f.entries) {
        INFO(m.path);
        const InodeId ino = resolve(e, m.path);
        Attr a;
        REQUIRE(e.getattr(ino, &a).is_ok());
        CHECK(a.mode == m.mode);
        CHECK(a.nlink == m.nlink);
        CHECK(a.mtime.tv_sec == m.mtime_s);
        CHECK(a.mtime.tv_nsec == static_cast<long>(m.mtime_ns));
        if (S_ISREG(m.mode)) {
            CHECK(a.size == m.size);
            const auto data = read_all(e, ino);
            CHECK(thread_sha256().digest(data.data(), data.size()).hex() == m.what);
        } else if (S_ISLNK(m.mode)) {
            std::string target;
            REQUIRE(e.readlink(ino, &target).is_ok());
            CHECK(target == m.what);
        }
    }
    for (const XattrEntry& x : f.xattrs) {
        INFO(x.path << " " << x.name);
        std::string value;
        REQUIRE(e.getxattr(resolve(e, x.path), x.name, &value).is_ok());
        CHECK(value == x.value);
    }
}

// Writes a record into the old store's metadata as it is.
void put_old_record(const std::string& store, Db db, std::string_view key, std::string_view value) {
    std::unique_ptr<MetaStore> m;
    REQUIRE(MetaStore::open(store + "/meta", 1ull << 30, false, &m).is_ok());
    std::unique_ptr<Txn> t;
    REQUIRE(m->begin(&t).is_ok());
    REQUIRE(t->put(db, key, value).is_ok());
    REQUIRE(t->commit().is_ok());
    t.reset();
    REQUIRE(m->commit_group(nullptr).is_ok());
}

}  // namespace

TEST_CASE("a store of an older format is refused with the upgrade command, and upgraded keeps every file",
          "[fsck][upgrade]") {
    const int format = GENERATE(1, 2, 3);
    INFO("format " << format);
    const std::string v = std::to_string(format), now = std::to_string(kFormatVersion);
    OldStore s(format);
    std::unique_ptr<Engine> e;
    Status st = Engine::open(s.options(), &e);
    CHECK(st.err() == EPROTO);
    CHECK(st.message().find("format version " + v + ", older than this hiodsfs's " + now) != std::string::npos);
    CHECK(st.message().find("hiodsfs-fsck --upgrade " + s.store()) != std::string::npos);
    ToolRun check = run_tool("'" + s.store() + "'");
    CHECK(check.code == 8);
    CHECK(check.out.find("hiodsfs-fsck --upgrade") != std::string::npos);
    CHECK(format_text(s.store()).find("format " + v + "\n") != std::string::npos);  // refused, untouched

    ToolRun up = run_tool("--upgrade '" + s.store() + "'");
    INFO(up.out);
    CHECK(up.code == 0);
    CHECK(up.out.find("from format version " + v + " to " + now) != std::string::npos);
    CHECK(up.out.find("clean") != std::string::npos);
    CHECK(format_text(s.store()).find("format " + now + "\n") != std::string::npos);
    CHECK_FALSE(exists(s.set_aside()));
    CHECK_FALSE(exists(s.store() + "/meta.upgrade"));

    e = open_engine(s.options());
    check_files(*e, s.fixture);
    // The raw chunks of the deferred generation (a file and its copy, which
    // format 1 never queued; format 2 queued them) are fingerprinted now,
    // and old content written again shares the converted index's chunks.
    SpaceCounters before;
    REQUIRE(e->counters(&before).is_ok());
    CHECK(before.raw_bytes > 0);
    REQUIRE(e->run_background().is_ok());
    REQUIRE(e->counters(&before).is_ok());
    CHECK(before.raw_bytes == 0);
    Attr copy = make_file(*e, "random-again");
    write_all(*e, copy.ino, 0, read_all(*e, resolve(*e, "dir/random")));
    write_all(*e, make_file(*e, "deferred-again").ino, 0, read_all(*e, resolve(*e, "deferred")));
    SpaceCounters after;
    REQUIRE(e->counters(&after).is_ok());
    CHECK(after.stored_bytes == before.stored_bytes);
    CHECK(after.logical_bytes > before.logical_bytes);
    REQUIRE(e->close().is_ok());
    e.reset();
    CHECK(check_invariants(s.store()).empty());

    ToolRun again = run_tool("--upgrade '" + s.store() + "'");
    CHECK(again.code == 0);
    CHECK(again.out.find("already has format version " + now) != std::string::npos);
}

TEST_CASE("an upgrade keeps every field of every inode", "[fsck][upgrade]") {
    const int format = GENERATE(1, 2, 3);
    INFO("format " << format);
    OldStore s(format);
    // Every inode of the old store as the upgrade reads it, then of the
    // new one as format 4 decodes it.
    auto inodes = [&](bool upgraded) {
        std::map<InodeId, InodeRecord> out;
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(s.store() + "/meta", 1ull << 30, true, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        Cursor c = t->cursor(Db::kInodes);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeId ino = 0;
            if (format < 3 && !upgraded) {
                REQUIRE(c.key().size() == 8);
                ino = get_be64(c.key());
            } else {
                REQUIRE(parse_key_u64(c.key(), &ino));
            }
            InodeRecord r;
            std::string_view tail;
            INFO("inode " << ino);
            REQUIRE((upgraded ? decode_inode_tail(c.value(), &r, &tail)
                              : decode_old_inode(format, c.value(), &r, &tail)));
            out[ino] = r;
        }
        REQUIRE(c.status().is_ok());
        return out;
    };
    const auto before = inodes(false);
    UpgradeOptions o;
    o.store = s.store();
    UpgradeReport r;
    REQUIRE(upgrade_store(o, &r).is_ok());
    CHECK(r.damaged_records == 0);
    const auto after = inodes(true);
    CHECK(after.size() == before.size());
    for (const auto& [ino, rec] : before) {
        INFO("inode " << ino);
        auto it = after.find(ino);
        REQUIRE(it != after.end());
        CHECK(it->second == rec);
    }
    if (format < 3) return;
    // What make-format3-store set, read through the engine: the fields
    // format 4 stores only when they are not their default.
    auto e = open_engine(s.options());
    Attr a;
    REQUIRE(e->getattr(resolve(*e, "null-device"), &a).is_ok());
    CHECK(a.rdev == makedev(1, 3));
    REQUIRE(e->getattr(resolve(*e, "many-chunks"), &a).is_ok());
    CHECK(a.atime.tv_sec == 981173106);  // 2001-02-03 04:05:06.7 UTC
    CHECK(a.atime.tv_nsec == 700000000);
    REQUIRE(e->getattr(resolve(*e, "sparse"), &a).is_ok());
    CHECK(a.blocks * 512 < a.size);  // 4 bytes written into 256 KiB of hole
    CHECK(a.blocks > 0);
    REQUIRE(e->getattr(resolve(*e, "dir/sub"), &a).is_ok());
    CHECK(before.at(a.ino).parent == resolve(*e, "dir"));
    REQUIRE(e->close().is_ok());
}

TEST_CASE("an upgrade stopped after any step finishes when run again", "[fsck][upgrade]") {
    const int format = GENERATE(1, 2, 3);
    const char* step = GENERATE("copied", "old set aside", "new in place", "format written");
    INFO("format " << format << ", stopped after: " << step);
    OldStore s(format);
    UpgradeOptions o;
    o.store = s.store();
    o.after_step = [&](std::string_view name) {
        return name == step ? Status::error(EINTR, "stopped after " + std::string(name)) : Status::ok();
    };
    UpgradeReport r;
    REQUIRE(upgrade_store(o, &r).err() == EINTR);

    std::unique_ptr<Engine> e;
    Status st = Engine::open(s.options(), &e);
    if (std::string_view(step) == "format written") {
        CHECK(st.is_ok());  // the new metadata is in place; the old one waits to be removed
        e.reset();
    } else {
        CHECK(st.err() == EPROTO);  // still the old format: refused, whichever directory holds what
        CHECK(st.message().find("hiodsfs-fsck --upgrade") != std::string::npos);
    }

    o.after_step = nullptr;
    REQUIRE(upgrade_store(o, &r).is_ok());
    CHECK(r.resumed == (std::string_view(step) != "copied"));
    CHECK_FALSE(exists(s.set_aside()));
    CHECK_FALSE(exists(s.store() + "/meta.upgrade"));
    CHECK(check_invariants(s.store()).empty());
    e = open_engine(s.options());
    check_files(*e, s.fixture);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("an upgrade to format 2 left unfinished by an older hiodsfs is made again", "[fsck][upgrade]") {
    // The older hiodsfs stopped after setting the format-1 metadata aside,
    // with its format-2 copy beside it or already in place: that copy is
    // not put in place as format 3, the upgrade starts over from meta.format1.
    const char* where = GENERATE("meta.upgrade", "meta");
    INFO("the format-2 copy is in " << where);
    OldStore s(1);
    OldStore other(2);  // a format-2 environment to stand for the old copy
    std::filesystem::rename(s.store() + "/meta", s.set_aside());
    std::filesystem::rename(other.store() + "/meta", s.store() + "/" + where);
    UpgradeOptions o;
    o.store = s.store();
    UpgradeReport r;
    REQUIRE(upgrade_store(o, &r).is_ok());
    CHECK_FALSE(r.resumed);
    CHECK_FALSE(exists(s.set_aside()));
    CHECK_FALSE(exists(s.store() + "/meta.upgrade"));
    CHECK(check_invariants(s.store()).empty());
    auto e = open_engine(s.options());
    check_files(*e, s.fixture);
    REQUIRE(e->close().is_ok());
}

TEST_CASE("an upgrade refuses a store in use and copies a damaged record for fsck to name",
          "[fsck][upgrade]") {
    const int format = GENERATE(1, 2, 3);
    INFO("format " << format);
    OldStore s(format);
    SECTION("in use") {
        std::unique_ptr<StoreDir> dir;
        REQUIRE(StoreDir::open(s.store(), StoreDirOptions{}, &dir).is_ok());
        std::unique_ptr<StoreLock> held;
        REQUIRE(StoreLock::acquire(*dir, true, 0, &held).is_ok());
        UpgradeOptions o;
        o.store = s.store();
        UpgradeReport r;
        Status st = upgrade_store(o, &r);
        CHECK(st.err() == EBUSY);
        CHECK(st.message().find("unmount it before upgrading") != std::string::npos);
        CHECK(format_text(s.store()).find("format " + std::to_string(format) + "\n") != std::string::npos);
    }
    // A damaged record is counted by the upgrade, copied, and named by fsck.
    auto upgrade_damaged = [&](Db db, std::string_view key, std::string_view value) {
        put_old_record(s.store(), db, key, value);
        UpgradeOptions o;
        o.store = s.store();
        UpgradeReport r;
        REQUIRE(upgrade_store(o, &r).is_ok());
        CHECK(r.damaged_records == 1);
        ToolRun check = run_tool("'" + s.store() + "'");
        CHECK(check.code == 4);
        return check.out;
    };
    // Inode keys: 8 bytes before format 3, then as long as the number needs.
    auto inode_key = [&](InodeId ino) { return format < 3 ? be64(ino) : key_u64(ino); };
    SECTION("a damaged inode record") {
        const std::string out = upgrade_damaged(Db::kInodes, inode_key(999), "short");
        CHECK(out.find("inode 999") != std::string::npos);
    }
    SECTION("a damaged inode record of a file with extents") {
        // Its block at offset 0 cannot go into the record: the upgrade
        // leaves it in the extents database, and fsck names the inode.
        if (format == 1) return;  // format 1's dirents are fixed structs; format 2 covers this
        InodeId ino = 0;
        {
            std::unique_ptr<MetaStore> m;
            REQUIRE(MetaStore::open(s.store() + "/meta", 1ull << 30, true, &m).is_ok());
            std::unique_ptr<Txn> t;
            REQUIRE(m->begin(&t).is_ok());
            std::string_view v;
            bool found = false;
            const std::string key = format < 3 ? be64(kRootInode) + "shifted" : key_u64_str(kRootInode, "shifted");
            REQUIRE(t->get(Db::kDirents, key, &v, &found).is_ok());
            DirentValue d;
            REQUIRE((found && decode(v, &d)));
            ino = d.ino;
        }
        const std::string out = upgrade_damaged(Db::kInodes, inode_key(ino), "short");
        CHECK(out.find("inode " + std::to_string(ino)) != std::string::npos);
    }
    SECTION("a damaged key") {
        // Not 8 bytes: no chunk id in it. Copied so that no format-3 reader
        // takes it for one (a leading 0xff).
        const std::string out = upgrade_damaged(Db::kChunks, std::string("\x01\x05", 2), "junk");
        CHECK(out.find("chunk record block with a damaged key") != std::string::npos);
        ToolRun repair = run_tool("--repair '" + s.store() + "'");
        INFO(repair.out);
        CHECK(run_tool("'" + s.store() + "'").code == 0);
    }
    SECTION("not a store, or a newer one") {
        UpgradeOptions o;
        o.store = s.dir.path();
        UpgradeReport r;
        CHECK(upgrade_store(o, &r).err() == ENOENT);
        std::ofstream(s.store() + "/FORMAT") << "hiodsfs store\nformat 9\nchunking cdc:2048/8192/32768\n";
        o.store = s.store();
        Status st = upgrade_store(o, &r);
        CHECK(st.err() == EPROTO);
        CHECK(st.message().find("format version 9") != std::string::npos);
    }
}

TEST_CASE("an encrypted store is current: --upgrade leaves it as it is", "[fsck][upgrade][encryption]") {
    TempDir dir;
    EngineOptions eo = options_for(dir.store(), kCdc);
    std::array<std::uint8_t, StoreKey::kBytes> key{};
    key[0] = 7;
    eo.key = std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(key));
    {
        auto e = open_engine(eo);
        write_synced(*e, "f", std::vector<std::uint8_t>(5000, 'x'));
    }
    const std::string before = format_text(dir.store());
    UpgradeOptions o;
    o.store = dir.store();
    UpgradeReport r;
    REQUIRE(upgrade_store(o, &r).is_ok());
    CHECK(r.already_current);
    CHECK(r.to_version == kEncryptedFormatVersion);
    CHECK(format_text(dir.store()) == before);
}
