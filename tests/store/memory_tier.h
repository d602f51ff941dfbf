// MemoryTier: a SegmentTier in memory for the tests of the store and the
// engine, whose puts and gets fail with a chosen errno while told to.
// Thread-safety: every method takes its mutex.
#pragma once

#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hiodsfs/segment_tier.h"

namespace hiodsfs::test {

// Segments in memory; puts and gets fail with `fail_errno` while it is set.
class MemoryTier : public SegmentTier {
public:
    std::string describe() const override { return "memory tier"; }
    Status put(SegmentId id, const void* data, std::size_t len) override {
        std::lock_guard lock(mu);
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
    Status remove(SegmentId id) override {
        std::lock_guard lock(mu);
        return objects.erase(id) != 0 ? Status::ok() : Status::error(ENOENT, "memory tier: no segment");
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

    std::mutex mu;
    std::map<SegmentId, std::vector<char>> objects;
    int fail_errno = 0;
    int puts = 0;
};

}  // namespace hiodsfs::test
