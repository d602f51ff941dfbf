// SegmentReadCounter: an Env for the engine tests that counts the bytes
// read from each segment file, so a test can tell which segments a piece of
// work read (compression_test.cc, deferred_test.cc).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hiodsfs/env.h"

namespace hiodsfs::test {

class SegmentReadCounter final : public Env {
public:
    explicit SegmentReadCounter(Env* base) : base_(base) {}

    Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
        std::unique_ptr<File> f;
        HIODSFS_TRY(base_->open(path, mode, &f));
        if (path.size() > 4 && path.compare(path.size() - 4, 4, ".seg") == 0)
            f = std::make_unique<Counted>(std::move(f), this, path);
        *out = std::move(f);
        return Status::ok();
    }
    Status unlink(const std::string& p) override { return base_->unlink(p); }
    Status rename(const std::string& a, const std::string& b) override { return base_->rename(a, b); }
    Status mkdir(const std::string& p) override { return base_->mkdir(p); }
    Status list_dir(const std::string& p, std::vector<std::string>* n) override { return base_->list_dir(p, n); }
    bool exists(const std::string& p) override { return base_->exists(p); }
    Status sync_dir(const std::string& p) override { return base_->sync_dir(p); }

    // Segment files read since the last reset, with the bytes read of each.
    std::map<std::string, std::uint64_t> reads() {
        std::lock_guard l(mu_);
        return reads_;
    }
    std::uint64_t total() {
        std::lock_guard l(mu_);
        std::uint64_t n = 0;
        for (const auto& [path, bytes] : reads_) n += bytes;
        return n;
    }
    void reset() {
        std::lock_guard l(mu_);
        reads_.clear();
    }

private:
    class Counted final : public File {
    public:
        Counted(std::unique_ptr<File> f, SegmentReadCounter* env, std::string path)
            : f_(std::move(f)), env_(env), path_(std::move(path)) {}
        Status pwrite(const void* d, std::size_t n, std::uint64_t off) override { return f_->pwrite(d, n, off); }
        Status pread(void* d, std::size_t n, std::uint64_t off, std::size_t* got) override {
            const Status st = f_->pread(d, n, off, got);
            env_->count(path_, *got);
            return st;
        }
        Status preadv(const struct iovec* iov, int count, std::uint64_t off, std::size_t* got) override {
            const Status st = f_->preadv(iov, count, off, got);
            env_->count(path_, *got);
            return st;
        }
        Status sync() override { return f_->sync(); }
        Status size(std::uint64_t* out) override { return f_->size(out); }
        Status truncate(std::uint64_t n) override { return f_->truncate(n); }

    private:
        std::unique_ptr<File> f_;
        SegmentReadCounter* env_;
        std::string path_;
    };
    void count(const std::string& path, std::size_t n) {
        std::lock_guard l(mu_);
        reads_[path] += n;
    }

    Env* const base_;
    std::mutex mu_;
    std::map<std::string, std::uint64_t> reads_;
};

}  // namespace hiodsfs::test
