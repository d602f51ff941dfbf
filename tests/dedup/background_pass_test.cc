// BackgroundPass: how many dirty records one batch takes. Speed is a duty
// cycle (a batch, then a rest), so below full speed a batch shrinks with
// it: a whole batch of small records holds their files' locks for up to a
// second, and a steady writer lost whole seconds at speed 0.05.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "dedup/background_pass.h"

using namespace hiodsfs;
using namespace std::chrono_literals;

namespace {

// Hands out records without end, and notes how many each take asked for.
class CountingTarget : public DedupTarget {
public:
    Status take_dirty(std::size_t max, std::vector<DirtyRecord>* out) override {
        std::lock_guard l(mu_);
        asked_.push_back(max);
        for (std::size_t i = 0; i < max; ++i) out->push_back(DirtyRecord{++seq_, 2, seq_ * 4096, 4096});
        cv_.notify_all();
        return Status::ok();
    }
    Status rechunk(InodeId, std::uint64_t, std::uint64_t) override { return Status::ok(); }
    Status finish_dirty(const std::vector<DirtyRecord>&) override { return Status::ok(); }
    Status set_aside(const std::vector<DirtyRecord>&, const Status& why) override { return why; }

    // The sizes the first n takes asked for (waits up to a minute for them).
    std::vector<std::size_t> first(std::size_t n) {
        std::unique_lock l(mu_);
        cv_.wait_for(l, 60s, [&] { return asked_.size() >= n; });
        return std::vector<std::size_t>(asked_.begin(), asked_.begin() + std::min(n, asked_.size()));
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::size_t> asked_;
    std::uint64_t seq_ = 0;
};

std::size_t batch_at(double speed) {
    CountingTarget target;
    BackgroundPass pass(&target, [speed] { return speed; }, 1);
    pass.start();
    const auto asked = target.first(2);
    pass.stop();
    REQUIRE(asked.size() == 2);
    CHECK(asked[0] == asked[1]);
    return asked[0];
}

}  // namespace

TEST_CASE("the pass takes whole batches at full speed, and batches that shrink with the speed below it",
          "[dedup][pass]") {
    CHECK(batch_at(1.0) == 256);
    CHECK(batch_at(0.5) == 128);
    CHECK(batch_at(0.25) == 64);
    CHECK(batch_at(0.03) == 8);  // never fewer than 8
}
