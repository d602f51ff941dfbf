// Helpers of the hiodsfs-fsck tests: the binary run as a subprocess (its
// exit code and output), the store every test starts from (built through
// the engine, with ways to edit its metadata), and a byte flipped in a file.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../engine/engine_test_util.h"
#include "meta/chunk_table.h"

namespace hiodsfs::test {

struct Run {
    int code = -1;
    std::string out;  // stdout and stderr
};

// env: "K=V ..." for the shell to put in the binary's environment;
// redirect: "<FILE" and the like, for its standard input.
inline Run fsck(const std::vector<std::string>& args, const std::string& env = "", const std::string& redirect = "") {
    std::string cmd = env + " " + HIODSFS_FSCK_BIN;
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " " + redirect + " 2>&1";
    Run r;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return r;
}

inline bool has(const Run& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

// The store every test starts from: files with unique and shared chunks, a
// directory, a symlink, a hard link, an xattr.
struct Store {
    TempDir dir;
    InodeId a = 0, b = 0, c = 0, sub = 0;
    std::vector<std::uint8_t> a_data, b_data;

    Store() {
        std::mt19937_64 rng(42);
        auto o = options_for(dir.store(), ChunkingParams::fixed(4096));
        o.background_threads = 0;
        auto e = open_engine(o);
        a_data = random_bytes(rng, 64 * 1024);
        b_data = random_bytes(rng, 32 * 1024);
        a = make_file(*e, "a").ino;
        write_all(*e, a, 0, a_data);
        NewNode d;
        d.mode = S_IFDIR | 0755;
        Attr attr;
        REQUIRE(e->create(kRootInode, "dir", d, &attr).is_ok());
        sub = attr.ino;
        b = make_file(*e, "b", sub).ino;
        write_all(*e, b, 0, b_data);
        c = make_file(*e, "c", sub).ino;  // shares a's first 16 KiB
        write_all(*e, c, 0, std::vector<std::uint8_t>(a_data.begin(), a_data.begin() + 16384));
        NewNode s;
        s.mode = S_IFLNK | 0777;
        s.symlink_target = "a";
        REQUIRE(e->create(kRootInode, "s", s, &attr).is_ok());
        REQUIRE(e->link(b, kRootInode, "b-link", &attr).is_ok());
        REQUIRE(e->setxattr(a, "user.k", "v", 0).is_ok());
        REQUIRE(e->close().is_ok());
    }

    std::string path() const { return dir.store(); }

    // Runs fn on the store's metadata in one committed operation.
    void edit(const std::function<void(Txn&)>& fn) {
        std::unique_ptr<MetaStore> m;
        REQUIRE(MetaStore::open(path() + "/meta", 1ull << 32, false, &m).is_ok());
        std::unique_ptr<Txn> t;
        REQUIRE(m->begin(&t).is_ok());
        fn(*t);
        REQUIRE(t->commit().is_ok());
        t.reset();  // a Txn holds the store's lock until it goes
        REQUIRE(m->commit_group(nullptr).is_ok());
    }

    ExtentRecord extent(InodeId ino, std::uint64_t off) {
        ExtentRecord e;
        edit([&](Txn& t) { e = extent_at(t, ino, off); });
        return e;
    }

    ChunkRecord chunk(ChunkId id) {
        ChunkRecord r;
        edit([&](Txn& t) {
            bool found = false;
            REQUIRE(get_chunk(t, id, &r, &found).is_ok());
            REQUIRE(found);
        });
        return r;
    }

    std::string segment_file(SegmentId seg) const {
        char name[32];
        std::snprintf(name, sizeof name, "/segments/%08x.seg", seg);
        return path() + name;
    }

    std::unique_ptr<Engine> open() {
        auto o = options_for(path(), ChunkingParams::fixed(4096));
        o.background_threads = 0;
        return open_engine(o);
    }

    // The errno of reading ino's first 4 KiB (0: it reads).
    int read_error(InodeId ino) {
        auto e = open();
        std::vector<std::uint8_t> buf(4096);
        std::size_t got = 0;
        const int err = e->read(ino, 0, buf.size(), buf.data(), &got).err();
        REQUIRE(e->close().is_ok());
        return err;
    }

    std::vector<std::uint8_t> read(InodeId ino) {
        auto e = open();
        auto d = read_all(*e, ino);
        REQUIRE(e->close().is_ok());
        return d;
    }
};

inline void flip_byte(const std::string& file, std::uint64_t at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekg(static_cast<std::streamoff>(at));
    char ch = 0;
    f.read(&ch, 1);
    ch = static_cast<char>(ch ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&ch, 1);
    REQUIRE(f.good());
}

}  // namespace hiodsfs::test
