// Env::posix(): the POSIX Env every store file goes through.

#include "hiodsfs/env.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "store_test_util.h"

namespace hiodsfs {
namespace {

using test::TempDir;

TEST_CASE("posix env: write, read back, size, truncate", "[env]") {
    TempDir tmp;
    Env* env = Env::posix();
    std::unique_ptr<File> f;
    REQUIRE_OK(env->open(tmp / "a", OpenMode::kReadWrite, &f));

    std::mt19937_64 rng(1);
    auto data = test::random_bytes(rng, 3u << 20);  // several kernel write chunks
    REQUIRE_OK(f->pwrite(data.data(), data.size(), 4096));
    std::uint64_t size = 0;
    REQUIRE_OK(f->size(&size));
    REQUIRE(size == 4096 + data.size());

    std::vector<char> back(data.size());
    std::size_t got = 0;
    REQUIRE_OK(f->pread(back.data(), back.size(), 4096, &got));
    REQUIRE(got == data.size());
    REQUIRE(back == data);

    // The hole before the data reads as zeros; a read past EOF is short.
    std::vector<char> hole(4096, 'x');
    REQUIRE_OK(f->pread(hole.data(), hole.size(), 0, &got));
    REQUIRE(got == 4096);
    REQUIRE(std::all_of(hole.begin(), hole.end(), [](char c) { return c == 0; }));
    REQUIRE_OK(f->pread(back.data(), 100, size - 10, &got));
    REQUIRE(got == 10);
    REQUIRE_OK(f->pread(back.data(), 100, size + 10, &got));
    REQUIRE(got == 0);

    REQUIRE_OK(f->sync());
    REQUIRE_OK(f->truncate(10));
    REQUIRE_OK(f->size(&size));
    REQUIRE(size == 10);
    REQUIRE(std::filesystem::file_size(tmp / "a") == 10);
}

// Restores the file size limit and SIGXFSZ handling when a test ends.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
        old_handler_ = ::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of dying
        struct rlimit lim = saved_;
        lim.rlim_cur = bytes;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
    }
    ~FileSizeLimit() {
        ::setrlimit(RLIMIT_FSIZE, &saved_);
        ::signal(SIGXFSZ, old_handler_);
    }

private:
    struct rlimit saved_ {};
    sighandler_t old_handler_ = SIG_DFL;
};

TEST_CASE("posix env: a partial write is continued, and its failure reported", "[env]") {
    TempDir tmp;
    std::unique_ptr<File> f;
    REQUIRE_OK(Env::posix()->open(tmp / "p", OpenMode::kReadWrite, &f));
    std::vector<char> data(20000, 'p');
    Status st;
    {
        // The kernel writes up to the limit and returns a short count; the
        // retry for the rest then fails with EFBIG.
        FileSizeLimit limit(10000);
        st = f->pwrite(data.data(), data.size(), 0);
    }
    REQUIRE(st.err() == EFBIG);
    REQUIRE(st.message().find("pwrite " + (tmp / "p")) != std::string::npos);
    REQUIRE(st.message().find("offset 10000") != std::string::npos);
    REQUIRE(std::filesystem::file_size(tmp / "p") == 10000);
    REQUIRE_OK(f->pwrite(data.data(), data.size(), 0));
    REQUIRE(std::filesystem::file_size(tmp / "p") == 20000);
}

TEST_CASE("posix env: open modes and their errors", "[env]") {
    TempDir tmp;
    Env* env = Env::posix();
    std::unique_ptr<File> f;

    Status st = env->open(tmp / "missing", OpenMode::kRead, &f);
    REQUIRE(st.err() == ENOENT);
    // The message names the operation and the path.
    REQUIRE(st.message().find("open") != std::string::npos);
    REQUIRE(st.message().find(tmp / "missing") != std::string::npos);

    // Store files hold file contents: private to the owner even with umask 0.
    const mode_t mask = ::umask(0);
    REQUIRE_OK(env->open(tmp / "new", OpenMode::kCreateNew, &f));
    REQUIRE_OK(env->mkdir(tmp / "dir"));
    ::umask(mask);
    struct stat sb;
    REQUIRE(::stat((tmp / "new").c_str(), &sb) == 0);
    REQUIRE((sb.st_mode & 0777) == 0600);
    REQUIRE(::stat((tmp / "dir").c_str(), &sb) == 0);
    REQUIRE((sb.st_mode & 0777) == 0700);
    // The message names the reason too.
    st = env->open(tmp / "missing", OpenMode::kRead, &f);
    REQUIRE(st.message() == "open " + (tmp / "missing") + ": No such file or directory");

    st = env->open(tmp / "new", OpenMode::kCreateNew, &f);
    REQUIRE(st.err() == EEXIST);

    // kReadWrite opens an existing file without truncating it.
    REQUIRE_OK(env->open(tmp / "new", OpenMode::kReadWrite, &f));
    REQUIRE_OK(f->pwrite("hello", 5, 0));
    f.reset();
    REQUIRE_OK(env->open(tmp / "new", OpenMode::kReadWrite, &f));
    std::uint64_t size = 0;
    REQUIRE_OK(f->size(&size));
    REQUIRE(size == 5);

    // Writing through a read-only handle fails with the path in the message.
    REQUIRE_OK(env->open(tmp / "new", OpenMode::kRead, &f));
    st = f->pwrite("x", 1, 0);
    REQUIRE(st.err() == EBADF);
    REQUIRE(st.message().find("pwrite " + (tmp / "new")) != std::string::npos);
}

TEST_CASE("posix env: files are opened close-on-exec", "[env]") {
    TempDir tmp;
    std::unique_ptr<File> f;
    REQUIRE_OK(Env::posix()->open(tmp / "c", OpenMode::kReadWrite, &f));
    // Find our descriptor through /proc and look at its flags.
    int found = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(e.path(), ec);
        if (ec || target != tmp / "c") continue;
        const int fd = std::stoi(e.path().filename().string());
        const int flags = ::fcntl(fd, F_GETFD);
        REQUIRE(flags >= 0);
        REQUIRE((flags & FD_CLOEXEC) != 0);
        ++found;
    }
    REQUIRE(found == 1);
    f.reset();  // and closing releases it
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        REQUIRE(std::filesystem::read_symlink(e.path(), ec) != tmp / "c");
    }
}

TEST_CASE("posix env: directories, rename, unlink", "[env]") {
    TempDir tmp;
    Env* env = Env::posix();
    REQUIRE_OK(env->mkdir(tmp / "d"));
    REQUIRE_OK(env->mkdir(tmp / "d"));  // exists: fine
    REQUIRE(env->exists(tmp / "d"));

    std::unique_ptr<File> f;
    REQUIRE_OK(env->open(tmp / "d/x", OpenMode::kReadWrite, &f));
    REQUIRE_OK(env->open(tmp / "d/y", OpenMode::kReadWrite, &f));
    Status st = env->mkdir(tmp / "d/x");  // a file of that name is an error
    REQUIRE(st.err() == ENOTDIR);

    std::vector<std::string> names;
    REQUIRE_OK(env->list_dir(tmp / "d", &names));
    std::sort(names.begin(), names.end());
    REQUIRE(names == std::vector<std::string>{"x", "y"});

    REQUIRE_OK(env->rename(tmp / "d/x", tmp / "d/z"));
    REQUIRE(!env->exists(tmp / "d/x"));
    REQUIRE(env->exists(tmp / "d/z"));
    st = env->rename(tmp / "d/x", tmp / "d/w");
    REQUIRE(st.err() == ENOENT);
    REQUIRE(st.message().find(tmp / "d/x") != std::string::npos);

    REQUIRE_OK(env->unlink(tmp / "d/z"));
    REQUIRE(!env->exists(tmp / "d/z"));
    st = env->unlink(tmp / "d/z");
    REQUIRE(st.err() == ENOENT);
    REQUIRE(st.message().find("unlink") != std::string::npos);

    REQUIRE_OK(env->sync_dir(tmp / "d"));
    st = env->sync_dir(tmp / "d/y");  // not a directory
    REQUIRE(st.err() == ENOTDIR);
    st = env->list_dir(tmp / "nope", &names);
    REQUIRE(st.err() == ENOENT);
}

}  // namespace
}  // namespace hiodsfs
