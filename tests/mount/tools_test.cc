// Ordinary tools on the mount: rsync -aHAX, git, tar. Every check that
// reads data back does so after a remount, so it is the daemon's read path
// that answers, not the page cache.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "mount_fixture.h"

using namespace hiodsfs::mt;

namespace {

void set_mtime(const std::string& path, time_t sec, long nsec) {
    const timespec t[2] = {{0, UTIME_OMIT}, {sec, nsec}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0);
}

void set_xattr(const std::string& path, const std::string& name, const std::string& value) {
    int r = ::lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0);
    INFO("setxattr " << path << " " << name << ": " << std::strerror(errno));
    REQUIRE(r == 0);
}

void setfacl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"setfacl"};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = run(argv);
    INFO("setfacl: " << r.describe());
    REQUIRE(r.ok());
}

// A tree with what backups meet: files from 0 B to `big` bytes, hard links,
// symlinks, a FIFO, user xattrs, POSIX ACLs, sparse files, odd names,
// special mode bits, other owners and nanosecond mtimes.
void make_tree(const std::string& root, std::uint64_t big) {
    make_dir(root);
    std::uint64_t seed = 1000;
    const std::uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 65535, 65536, kMiB + 13, 10 * kMiB};
    for (std::uint64_t size : sizes) {
        write_file(root + "/size-" + std::to_string(size), random_bytes(size, ++seed));
    }
    write_file(root + "/big", random_bytes(big, ++seed));
    write_file(root + "/zeros", std::string(8 * kMiB, '\0'));
    {
        const std::string block = random_bytes(256 * kKiB, ++seed);
        std::string rep;
        for (int i = 0; i < 16; ++i) rep += block;
        write_file(root + "/repeated", rep);
    }
    {
        // Sparse: data at 0 and at 20 MiB, 40 MiB long.
        const std::string f = root + "/sparse";
        int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        const std::string a = random_bytes(kMiB, ++seed);
        CHECK(::pwrite(fd, a.data(), a.size(), 0) == static_cast<ssize_t>(a.size()));
        CHECK(::pwrite(fd, a.data(), 1000, static_cast<off_t>(20 * kMiB)) == 1000);
        CHECK(::ftruncate(fd, static_cast<off_t>(40 * kMiB)) == 0);
        ::close(fd);
    }

    make_dir(root + "/links");
    make_dir(root + "/links/sub");
    write_file(root + "/links/h1", random_bytes(100 * kKiB, ++seed));
    REQUIRE(::link((root + "/links/h1").c_str(), (root + "/links/h2").c_str()) == 0);
    REQUIRE(::link((root + "/links/h1").c_str(), (root + "/links/sub/h3").c_str()) == 0);
    REQUIRE(::link((root + "/links/h1").c_str(), (root + "/hl-other").c_str()) == 0);
    write_file(root + "/links/empty1", "");
    REQUIRE(::link((root + "/links/empty1").c_str(), (root + "/links/empty2").c_str()) == 0);

    make_dir(root + "/sym");
    REQUIRE(::symlink("../size-1", (root + "/sym/rel").c_str()) == 0);
    REQUIRE(::symlink("/etc/hostname", (root + "/sym/abs").c_str()) == 0);
    REQUIRE(::symlink("nowhere/at/all", (root + "/sym/dangling").c_str()) == 0);
    REQUIRE(::symlink("../links", (root + "/sym/dir").c_str()) == 0);
    REQUIRE(::symlink("name with spaces \xe2\x9c\x93", (root + "/sym/odd target").c_str()) == 0);
    REQUIRE(::mkfifo((root + "/fifo").c_str(), 0640) == 0);

    make_dir(root + "/xattr");
    write_file(root + "/xattr/file", "has xattrs");
    set_xattr(root + "/xattr/file", "user.a", "alpha");
    std::string bin;
    for (int i = 0; i < 256; ++i) bin += static_cast<char>(i);
    set_xattr(root + "/xattr/file", "user.binary", bin);
    set_xattr(root + "/xattr/file", "user.big", random_bytes(3000, ++seed));
    set_xattr(root + "/xattr/file", "user.empty", "");
    set_xattr(root + "/xattr", "user.dir", "on a directory");

    make_dir(root + "/acl");
    write_file(root + "/acl/file", "acl");
    setfacl({"-m", "u:65534:rw,g:65534:r", root + "/acl/file"});
    make_dir(root + "/acl/dir");
    setfacl({"-m", "u:65534:rwx", root + "/acl/dir"});
    setfacl({"-d", "-m", "u:65534:rx,g::rwx", root + "/acl/dir"});

    make_dir(root + "/names");
    std::string utf8_255;
    for (int i = 0; i < 127; ++i) utf8_255 += "\xc3\xa9";
    utf8_255 += "z";
    for (const std::string& n :
         {std::string("with space"), std::string("new\nline"), std::string("tab\there"),
          std::string("\xc3\xbctf-8 \xe2\x9c\x93 \xe5\x90\x8d\xe5\x89\x8d"), std::string(255, 'n'),
          utf8_255, std::string("-dash"), std::string(" leading"), std::string("trailing "),
          std::string(".hidden"), std::string("back\\slash"), std::string("quote'\"`$(x)"),
          std::string("*?[glob]"), std::string("\x01\x7f ctl")}) {
        write_file(root + "/names/" + n, "name: " + n);
    }
    make_dir(root + "/names/dir with space");
    write_file(root + "/names/dir with space/inner", "inner");

    make_dir(root + "/deep");
    std::string d = root + "/deep";
    for (char c = 'a'; c <= 'l'; ++c) {
        d += "/";
        d += c;
        make_dir(d);
    }
    write_file(d + "/leaf", "deep leaf");
    make_dir(root + "/emptydir");

    make_dir(root + "/modes");
    write_file(root + "/modes/private", "p", 0600);
    write_file(root + "/modes/exec", "#!/bin/sh\n", 0755);
    write_file(root + "/modes/suid", "s", 0755);
    REQUIRE(::chmod((root + "/modes/private").c_str(), 0600) == 0);
    REQUIRE(::chmod((root + "/modes/exec").c_str(), 0755) == 0);
    REQUIRE(::chmod((root + "/modes/suid").c_str(), 04755) == 0);
    make_dir(root + "/modes/closed", 0700);
    make_dir(root + "/modes/sticky", 0755);
    REQUIRE(::chmod((root + "/modes/sticky").c_str(), 01777) == 0);
    make_dir(root + "/modes/setgid", 0755);
    REQUIRE(::chmod((root + "/modes/setgid").c_str(), 02775) == 0);
    if (is_root()) {
        write_file(root + "/modes/nobody", "owned by 65534");
        REQUIRE(::chown((root + "/modes/nobody").c_str(), 65534, 65534) == 0);
        REQUIRE(::chown((root + "/modes/closed").c_str(), 1234, 5678) == 0);
        REQUIRE(::lchown((root + "/sym/rel").c_str(), 4321, 8765) == 0);
    }

    // Distinct nanosecond mtimes on everything, children before their
    // directory (creating a child changes its directory's mtime). Old times
    // also keep rsync from skipping a directory whose mtime is within the
    // same second as the copy's (it compares directories to the second).
    static long counter;
    counter = 0;
    nftw(
        root.c_str(),
        [](const char* p, const struct stat*, int, FTW*) {
            ++counter;
            const timespec t[2] = {{0, UTIME_OMIT},
                                   {1400000000 + counter * 3607, (counter * 7919 + 1) % 1000000000}};
            return ::utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW);
        },
        32, FTW_DEPTH | FTW_PHYS);
    set_mtime(root + "/size-1", 1234567890, 123456789);
    set_mtime(root + "/big", 1600000000, 999999999);
    REQUIRE(counter > 40);
}

struct CompareOptions {
    bool dir_mtime = true;
    bool symlink_mtime = true;
};

void list_names(const std::string& dir, std::vector<std::string>* out) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out->push_back(n);
    }
    closedir(d);
}

std::map<std::string, std::string> all_xattrs(const std::string& path) {
    std::map<std::string, std::string> out;
    std::string names(65536, '\0');
    ssize_t n = ::llistxattr(path.c_str(), names.data(), names.size());
    for (ssize_t i = 0; i < n;) {
        std::string name(names.data() + i);
        i += static_cast<ssize_t>(name.size()) + 1;
        if (name.starts_with("security.")) continue;
        std::string v(65536, '\0');
        ssize_t vn = ::lgetxattr(path.c_str(), name.c_str(), v.data(), v.size());
        v.resize(vn < 0 ? 0 : static_cast<std::size_t>(vn));
        out[name] = v;
    }
    return out;
}

std::string printable(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o;
}

// Everything that differs between two trees, in words; empty when equal in
// names, types, modes, owners, sizes, contents, link targets, mtimes (ns),
// xattrs (ACLs included) and hard-link structure.
std::vector<std::string> compare_trees(const std::string& a, const std::string& b,
                                       CompareOptions opt = {}) {
    std::vector<std::string> problems;
    std::map<ino_t, ino_t> a_to_b, b_to_a;
    std::size_t entries = 0;
    auto problem = [&](const std::string& rel, const std::string& what) {
        if (problems.size() < 50) problems.push_back(printable(rel) + ": " + what);
    };
    std::function<void(const std::string&)> walk = [&](const std::string& rel) {
        std::vector<std::string> na, nb;
        list_names(a + rel, &na);
        list_names(b + rel, &nb);
        std::set<std::string> sa(na.begin(), na.end()), sb(nb.begin(), nb.end());
        if (nb.size() != sb.size()) problem(rel, "a name is listed twice in the copy");
        for (const auto& n : sb)
            if (!sa.count(n)) problem(rel + "/" + n, "only in the copy");
        for (const auto& n : sa) {
            const std::string r = rel + "/" + n;
            ++entries;
            if (!sb.count(n)) {
                problem(r, "missing in the copy");
                continue;
            }
            struct stat x{}, y{};
            if (::lstat((a + r).c_str(), &x) != 0 || ::lstat((b + r).c_str(), &y) != 0) {
                problem(r, std::string("lstat failed: ") + std::strerror(errno));
                continue;
            }
            if ((x.st_mode & S_IFMT) != (y.st_mode & S_IFMT)) {
                problem(r, "file type differs");
                continue;
            }
            if ((x.st_mode & 07777) != (y.st_mode & 07777)) {
                std::ostringstream m;
                m << "mode " << std::oct << (x.st_mode & 07777) << " vs " << (y.st_mode & 07777);
                problem(r, m.str());
            }
            if (x.st_uid != y.st_uid || x.st_gid != y.st_gid) {
                problem(r, "owner " + std::to_string(x.st_uid) + ":" + std::to_string(x.st_gid) +
                               " vs " + std::to_string(y.st_uid) + ":" + std::to_string(y.st_gid));
            }
            const bool is_dir = S_ISDIR(x.st_mode), is_lnk = S_ISLNK(x.st_mode);
            if ((!is_dir || opt.dir_mtime) && (!is_lnk || opt.symlink_mtime) &&
                (x.st_mtim.tv_sec != y.st_mtim.tv_sec || x.st_mtim.tv_nsec != y.st_mtim.tv_nsec)) {
                problem(r, "mtime " + std::to_string(x.st_mtim.tv_sec) + "." +
                               std::to_string(x.st_mtim.tv_nsec) + " vs " +
                               std::to_string(y.st_mtim.tv_sec) + "." +
                               std::to_string(y.st_mtim.tv_nsec));
            }
            if (!is_dir && x.st_size != y.st_size) {
                problem(r, "size " + std::to_string(x.st_size) + " vs " + std::to_string(y.st_size));
            }
            if (!is_dir && x.st_nlink != y.st_nlink) {
                problem(r, "nlink " + std::to_string(x.st_nlink) + " vs " + std::to_string(y.st_nlink));
            }
            if (!is_dir && x.st_nlink > 1) {
                auto [it, fresh] = a_to_b.emplace(x.st_ino, y.st_ino);
                auto [jt, fresh2] = b_to_a.emplace(y.st_ino, x.st_ino);
                if (it->second != y.st_ino || jt->second != x.st_ino)
                    problem(r, "hard-link structure differs");
                (void)fresh;
                (void)fresh2;
            }
            if (S_ISREG(x.st_mode)) {
                std::string c = compare_files(a + r, b + r);
                if (!c.empty()) problem(r, c);
            } else if (is_lnk) {
                char t1[8192], t2[8192];
                ssize_t l1 = ::readlink((a + r).c_str(), t1, sizeof t1);
                ssize_t l2 = ::readlink((b + r).c_str(), t2, sizeof t2);
                if (l1 != l2 || l1 < 0 || std::memcmp(t1, t2, static_cast<std::size_t>(l1)) != 0)
                    problem(r, "symlink target differs");
            } else if (S_ISCHR(x.st_mode) || S_ISBLK(x.st_mode)) {
                if (x.st_rdev != y.st_rdev) problem(r, "rdev differs");
            }
            auto xa = all_xattrs(a + r), xb = all_xattrs(b + r);
            if (xa != xb) {
                std::string names;
                for (auto& [k, v] : xa) names += " " + k;
                names += " vs";
                for (auto& [k, v] : xb) names += " " + k;
                problem(r, "xattrs differ:" + names);
            }
            if (is_dir) walk(r);
        }
    };
    walk("");
    if (entries < 10) problems.push_back("suspiciously few entries: " + std::to_string(entries));
    return problems;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x + "\n";
    return s;
}

CmdResult rsync(const std::vector<std::string>& extra, const std::string& from, const std::string& to) {
    std::vector<std::string> argv = {"rsync", "-aHAX", "--numeric-ids"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(from + "/");
    argv.push_back(to + "/");
    return run(argv);
}

// The diff -r output, without the lines diff prints for FIFOs (it cannot
// compare them; compare_trees checks their type and mode).
std::string diff_r(const std::string& a, const std::string& b) {
    CmdResult d = run({"diff", "-r", "--no-dereference", a, b});
    std::istringstream in(d.out);
    std::string line, rest;
    while (std::getline(in, line)) {
        if (line.find(" is a fifo while file ") != std::string::npos) continue;
        rest += line + "\n";
    }
    if (d.status > 1) rest += "diff failed: " + d.describe();
    return rest;
}

std::uint64_t big_file_size() {
    return static_cast<std::uint64_t>(env_long("HIODSFS_TREE_BIG_MIB", 64)) * kMiB + 4097;
}

}  // namespace

TEST_CASE("rsync -aHAX of a varied tree round-trips exactly", "[tools][rsync]") {
    MountFixture fx;
    const std::string src = fx.scratch("tree");
    make_tree(src, big_file_size());
    {
        // The reference: the same rsync onto the backing file system.
        const std::string ref = fx.scratch("ref-dst");
        CmdResult r = rsync({}, src, ref);
        INFO("rsync onto the backing file system (reference): " << r.describe());
        REQUIRE(r.ok());
        const auto problems = compare_trees(src, ref);
        INFO("compare_trees (reference):\n" << join(problems));
        REQUIRE(problems.empty());
        remove_tree(ref);
    }
    const std::string dst = fx.path("dst");
    CmdResult r = rsync({}, src, dst);
    INFO("rsync into the mount: " << r.describe());
    REQUIRE(r.ok());
    fx.remount();

    r = rsync({"-c", "--dry-run", "--itemize-changes"}, src, dst);
    INFO("rsync -c --dry-run --itemize-changes after remount: " << r.describe());
    CHECK(r.ok());
    CHECK(r.out.empty());
    const auto problems = compare_trees(src, dst);
    INFO("compare_trees:\n" << join(problems));
    CHECK(problems.empty());
    const std::string d = diff_r(src, dst);
    INFO("diff -r --no-dereference:\n" << d);
    CHECK(d.empty());
}

TEST_CASE("a second rsync of an unchanged tree transfers and stores nothing", "[tools][rsync]") {
    MountFixture fx({"mode=inline"});  // no background pass changing counters meanwhile
    const std::string src = fx.scratch("tree");
    make_tree(src, big_file_size());
    const std::string dst = fx.path("dst");
    CmdResult r = rsync({}, src, dst);
    INFO("first rsync: " << r.describe());
    REQUIRE(r.ok());
    const auto before = fx.counters_between_mounts();
    INFO("counters after the first rsync: " << describe(before));
    CHECK(before.logical_bytes >= big_file_size());

    r = rsync({"--stats"}, src, dst);
    INFO("second rsync: " << r.describe());
    REQUIRE(r.ok());
    CHECK(r.out.find("Number of regular files transferred: 0\n") != std::string::npos);
    CHECK(r.out.find("Total transferred file size: 0 bytes\n") != std::string::npos);
    fx.unmount();
    const auto after = fx.counters();
    INFO("counters after the second rsync: " << describe(after));
    CHECK(after.stored_bytes == before.stored_bytes);
    CHECK(after.logical_bytes == before.logical_bytes);
    CHECK(after.chunk_count == before.chunk_count);
    CHECK(after.inode_count == before.inode_count);
}

namespace {

CmdResult git(const MountFixture& fx, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {"HOME=" + fx.scratch("home"), "GIT_CONFIG_NOSYSTEM=1",
                      "GIT_AUTHOR_NAME=Mount Test", "GIT_AUTHOR_EMAIL=mt@example.invalid",
                      "GIT_COMMITTER_NAME=Mount Test", "GIT_COMMITTER_EMAIL=mt@example.invalid",
                      "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"});
}

#define REQUIRE_GIT(fx, ...)                                  \
    do {                                                      \
        CmdResult _g = git(fx, __VA_ARGS__);                  \
        INFO("git " << #__VA_ARGS__ << ": " << _g.describe()); \
        REQUIRE(_g.ok());                                     \
    } while (0)

std::string git_out(const MountFixture& fx, const std::vector<std::string>& args) {
    CmdResult g = git(fx, args);
    INFO("git: " << g.describe());
    REQUIRE(g.ok());
    return g.out;
}

}  // namespace

TEST_CASE("git clone into the mount: fsck --full and status are clean", "[tools][git]") {
    MountFixture fx;
    make_dir(fx.scratch("home"));
    const std::string repo = fx.scratch("repo");
    REQUIRE_GIT(fx, {"init", "-q", "-b", "main", repo});
    make_dir(repo + "/src");
    write_file(repo + "/README", "hello\n");
    write_file(repo + "/src/a.c", "int main(void) { return 0; }\n");
    write_file(repo + "/blob.bin", random_bytes(300 * kKiB, 71));
    REQUIRE_GIT(fx, {"-C", repo, "add", "-A"});
    REQUIRE_GIT(fx, {"-C", repo, "commit", "-q", "-m", "first"});
    write_file(repo + "/README", "hello\nworld\n");
    REQUIRE_GIT(fx, {"-C", repo, "mv", "src/a.c", "src/main.c"});
    REQUIRE_GIT(fx, {"-C", repo, "commit", "-q", "-a", "-m", "second"});
    REQUIRE_GIT(fx, {"-C", repo, "rm", "-q", "blob.bin"});
    std::string text;
    for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i) + "\n";
    write_file(repo + "/big.txt", text);
    REQUIRE_GIT(fx, {"-C", repo, "add", "big.txt"});
    REQUIRE_GIT(fx, {"-C", repo, "commit", "-q", "-m", "third"});
    REQUIRE_GIT(fx, {"-C", repo, "tag", "v1"});

    const std::string clone = fx.path("clone");
    REQUIRE_GIT(fx, {"clone", "-q", "--no-hardlinks", repo, clone});
    REQUIRE_GIT(fx, {"-C", clone, "fsck", "--full", "--strict"});
    CHECK(git_out(fx, {"-C", clone, "status", "--porcelain"}).empty());
    CHECK(git_out(fx, {"-C", clone, "rev-list", "--count", "HEAD"}) == "3\n");
    CHECK(read_file(clone + "/big.txt") == text);

    // Work inside the mount: commit, check out old history, repack.
    write_file(clone + "/src/main.c", "int main(void) { return 1; }\n");
    REQUIRE_GIT(fx, {"-C", clone, "commit", "-q", "-a", "-m", "fourth, in the mount"});
    REQUIRE_GIT(fx, {"-C", clone, "checkout", "-q", "HEAD~3"});
    CHECK(exists(clone + "/blob.bin"));
    CHECK(exists(clone + "/src/a.c"));
    REQUIRE_GIT(fx, {"-C", clone, "checkout", "-q", "main"});
    CHECK_FALSE(exists(clone + "/blob.bin"));
    REQUIRE_GIT(fx, {"-C", clone, "gc", "-q", "--prune=now"});
    REQUIRE_GIT(fx, {"-C", clone, "fsck", "--full", "--strict"});
    const std::string head = git_out(fx, {"-C", clone, "rev-parse", "HEAD"});

    fx.remount();
    INFO("after remount");
    REQUIRE_GIT(fx, {"-C", clone, "fsck", "--full", "--strict"});
    CHECK(git_out(fx, {"-C", clone, "status", "--porcelain"}).empty());
    CHECK(git_out(fx, {"-C", clone, "rev-parse", "HEAD"}) == head);
    CHECK(git_out(fx, {"-C", clone, "rev-list", "--count", "HEAD"}) == "4\n");
    CHECK(read_file(clone + "/big.txt") == text);
}

TEST_CASE("tar -x into the mount compares identical", "[tools][tar]") {
    MountFixture fx;
    const std::string tree = fx.scratch("tree");
    make_tree(tree, 3 * kMiB + 5);
    const std::string archive = fx.scratch("tree.tar");
    const std::vector<std::string> meta = {"--xattrs", "--xattrs-include=*", "--acls",
                                           "--numeric-owner"};
    auto tar = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {"tar"};
        argv.insert(argv.end(), meta.begin(), meta.end());
        argv.insert(argv.end(), args.begin(), args.end());
        return run(argv, {"LC_ALL=C"});
    };
    CmdResult r = tar({"-cf", archive, "-C", tree, "."});
    INFO("tar -c: " << r.describe());
    REQUIRE(r.ok());
    for (const auto& root : ext4_and_mount(fx, "untar")) {
        INFO(root.where);
        r = tar({"-xpf", archive, "-C", root.dir});
        INFO("tar -x: " << r.describe());
        REQUIRE(r.ok());
        r = tar({"-df", archive, "-C", root.dir});
        INFO("tar -d: " << r.describe());
        CHECK(r.ok());
        const auto problems = compare_trees(tree, root.dir);
        INFO("compare_trees:\n" << join(problems));
        CHECK(problems.empty());
    }
    fx.remount();
    INFO("after remount");
    r = tar({"-df", archive, "-C", fx.path("untar")});
    INFO("tar -d: " << r.describe());
    CHECK(r.ok());
    const auto problems = compare_trees(tree, fx.path("untar"));
    INFO("compare_trees:\n" << join(problems));
    CHECK(problems.empty());
    const std::string d = diff_r(tree, fx.path("untar"));
    INFO("diff -r:\n" << d);
    CHECK(d.empty());
}
