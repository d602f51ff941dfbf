// MemoryTier: a SegmentTier in memory for the tests of the store and the
// engine, whose puts and gets fail with a chosen errno while told to, and
// whose metadata objects (the journal, snapshots) fail writes on their own.
// It models the fence of a RADOS store too: take_over() is another holder
// taking the store (a new epoch, segment ids past every earlier holder's
// reserved ones) that fences every earlier holder, as the OSDs' blocklist
// does: what an earlier holder writes from then on is refused (ESHUTDOWN),
// whatever that holder believes. Holders share the objects.
// Thread-safety: every method takes the shared mutex.
#pragma once

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hiodsfs/segment_tier.h"

namespace hiodsfs::test {

// What the holders of one memory tier share: the pool.
struct MemoryPool {
    std::mutex mu;
    std::map<SegmentId, std::vector<char>> objects;
    std::map<std::string, std::vector<char>> named;  // metadata objects
    std::uint32_t epoch = 1;                         // the holder that has the store now
    SegmentId reserved = 0;                          // the highest id any holder reserved
};

// Segments in memory; puts and gets fail with `fail_errno` while it is set.
class MemoryTier : public SegmentTier {
public:
    MemoryTier() : MemoryTier(std::make_shared<MemoryPool>(), 1, 1) {}

    // Another holder takes the store: every earlier one is fenced.
    std::unique_ptr<MemoryTier> take_over() {
        std::lock_guard lock(mu);
        ++pool_->epoch;
        return std::unique_ptr<MemoryTier>(
            new MemoryTier(pool_, pool_->epoch, pool_->reserved + 1));
    }
    bool fenced() {
        std::lock_guard lock(mu);
        return epoch_ < pool_->epoch;
    }
    // How many metadata objects' names start with prefix.
    std::size_t named_with_prefix(const std::string& prefix) {
        std::lock_guard lock(mu);
        std::size_t n = 0;
        for (const auto& [name, bytes] : named) n += name.rfind(prefix, 0) == 0 ? 1 : 0;
        return n;
    }

    std::string describe() const override { return "memory tier"; }
    std::uint32_t epoch() const override { return epoch_; }
    SegmentId first_new_segment() const override { return first_; }
    Status reserve_segment(SegmentId id) override {
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        if (id < first_)
            return Status::error(EINVAL, "memory tier: segment id below this holder's");
        pool_->reserved = std::max(pool_->reserved, id);
        return Status::ok();
    }
    Status put(SegmentId id, const void* data, std::size_t len) override {
        if (before_put) before_put(id);
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        if (fail_errno != 0) return Status::error(fail_errno, "memory tier: put refused");
        const char* p = static_cast<const char*>(data);
        objects[id].assign(p, p + len);
        ++puts;
        return Status::ok();
    }
    Status get(SegmentId id, std::vector<char>* out) override {
        std::lock_guard lock(mu);
        if (fail_errno != 0) return Status::error(fail_errno, "memory tier: get refused");
        auto it = objects.find(id);
        if (it == objects.end()) return Status::error(ENOENT, "memory tier: no segment");
        *out = it->second;
        return Status::ok();
    }
    Status get_range(SegmentId id, std::uint64_t offset, std::size_t len, std::vector<char>* out) override {
        std::lock_guard lock(mu);
        if (fail_errno != 0) return Status::error(fail_errno, "memory tier: get refused");
        auto it = objects.find(id);
        if (it == objects.end()) return Status::error(ENOENT, "memory tier: no segment");
        const std::vector<char>& o = it->second;
        const std::size_t from = static_cast<std::size_t>(std::min<std::uint64_t>(offset, o.size()));
        const std::size_t n = std::min(len, o.size() - from);
        out->assign(o.begin() + static_cast<std::ptrdiff_t>(from), o.begin() + static_cast<std::ptrdiff_t>(from + n));
        ++range_gets;
        return Status::ok();
    }
    Status put_range(SegmentId id, std::uint64_t offset, const void* data, std::size_t len) override {
        if (before_range) before_range(id);
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        if (fail_errno != 0) return Status::error(fail_errno, "memory tier: put refused");
        std::vector<char>& o = objects[id];
        if (o.size() < offset + len) o.resize(offset + len);
        const char* p = static_cast<const char*>(data);
        std::copy(p, p + len, o.begin() + static_cast<std::ptrdiff_t>(offset));
        ++ranges;
        return Status::ok();
    }
    Status remove(SegmentId id) override {
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        return objects.erase(id) != 0 ? Status::ok() : Status::error(ENOENT, "memory tier: no segment");
    }
    Status put_object(const std::string& name, const void* data, std::size_t len) override {
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        if (object_fail_errno != 0) return Status::error(object_fail_errno, "memory tier: write refused");
        const char* p = static_cast<const char*>(data);
        named[name].assign(p, p + len);
        return Status::ok();
    }
    Status append_object(const std::string& name, const void* data, std::size_t len) override {
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        const char* p = static_cast<const char*>(data);
        if (object_fail_errno != 0) {
            // A timeout after the write: it landed, the client cannot know.
            if (failed_appends_land) named[name].insert(named[name].end(), p, p + len);
            return Status::error(object_fail_errno, "memory tier: append refused");
        }
        named[name].insert(named[name].end(), p, p + len);
        return Status::ok();
    }
    Status get_object(const std::string& name, std::vector<char>* out) override {
        std::lock_guard lock(mu);
        auto it = named.find(name);
        if (it == named.end()) return Status::error(ENOENT, "memory tier: no object " + name);
        *out = it->second;
        return Status::ok();
    }
    Status remove_object(const std::string& name) override {
        std::lock_guard lock(mu);
        HIODSFS_TRY(writable());
        return named.erase(name) != 0 ? Status::ok() : Status::error(ENOENT, "memory tier: no object " + name);
    }
    Status list_objects(const std::string& prefix, std::vector<std::string>* out) override {
        std::lock_guard lock(mu);
        out->clear();
        for (const auto& [name, bytes] : named)
            if (name.rfind(prefix, 0) == 0) out->push_back(name);
        return Status::ok();
    }
    void set_objects_failing(int err) {
        std::lock_guard lock(mu);
        object_fail_errno = err;
    }
    Status list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) override {
        std::lock_guard lock(mu);
        out->clear();
        for (const auto& [id, bytes] : objects) out->emplace_back(id, bytes.size());
        return Status::ok();
    }
    void set_failing(int err) {
        std::lock_guard lock(mu);
        fail_errno = err;
    }
    bool holds(SegmentId id) {
        std::lock_guard lock(mu);
        return objects.count(id) != 0;
    }

    // Called (without mu) before a whole put or a range put: a test's way
    // to hold one back while something else happens. Set before use.
    std::function<void(SegmentId)> before_put, before_range;

private:
    std::shared_ptr<MemoryPool> pool_;  // before the references into it

public:
    std::mutex& mu;
    std::map<SegmentId, std::vector<char>>& objects;
    std::map<std::string, std::vector<char>>& named;  // metadata objects
    int fail_errno = 0;
    int object_fail_errno = 0;
    bool failed_appends_land = false;  // appends that fail (object_fail_errno) are made all the same
    int puts = 0;
    int ranges = 0;
    int range_gets = 0;

private:
    MemoryTier(std::shared_ptr<MemoryPool> pool, std::uint32_t epoch, SegmentId first)
        : pool_(std::move(pool)),
          mu(pool_->mu),
          objects(pool_->objects),
          named(pool_->named),
          epoch_(epoch),
          first_(first) {}
    // mu held: a holder the store was taken from is refused, as the OSDs
    // refuse a blocklisted client.
    Status writable() const {
        if (epoch_ >= pool_->epoch) return Status::ok();
        return Status::error(ESHUTDOWN, "memory tier: holder of epoch " + std::to_string(epoch_) +
                                            " was fenced (the store's holder is of epoch " +
                                            std::to_string(pool_->epoch) + ")");
    }

    std::uint32_t epoch_;
    SegmentId first_;
};

}  // namespace hiodsfs::test
