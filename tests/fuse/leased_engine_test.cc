// The daemon's handle on the engine for the RADOS lease thread
// (src/fuse/leased_engine.h): clearing it waits for a call in progress (the
// thread asking, after a lapse, whether the pool is as the store left it),
// so Engine::close() never resets the metadata under that call; later
// calls find no engine.
#include "fuse/leased_engine.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "../store/memory_tier.h"
#include "../store/store_test_util.h"

namespace hiodsfs {
namespace {

using namespace std::chrono_literals;

// A tier whose listings wait, once armed, until released: a pool that
// answers slowly while the daemon unmounts.
class SlowTier : public test::MemoryTier {
public:
    Status list_objects(const std::string& prefix, std::vector<std::string>* out) override {
        {
            std::unique_lock lock(gate_mu_);
            if (armed_) {
                inside_ = true;
                gate_cv_.notify_all();
                gate_cv_.wait(lock, [&] { return released_; });
            }
        }
        return MemoryTier::list_objects(prefix, out);
    }
    void arm() {
        std::lock_guard lock(gate_mu_);
        armed_ = true;
    }
    void wait_inside() {
        std::unique_lock lock(gate_mu_);
        gate_cv_.wait(lock, [&] { return inside_; });
    }
    void release() {
        std::lock_guard lock(gate_mu_);
        released_ = true;
        gate_cv_.notify_all();
    }

private:
    std::mutex gate_mu_;
    std::condition_variable gate_cv_;
    bool armed_ = false, inside_ = false, released_ = false;
};

TEST_CASE(
    "leased engine: clearing waits for the lease thread's call in progress; later calls "
    "find no engine",
    "[fuse][lease]") {
    test::TempDir store;
    SlowTier tier;
    EngineOptions o;
    o.store_dir = store.path() + "/store";
    o.lmdb_map_bytes = 1ull << 30;
    o.background_commit = false;
    o.segments.tier = &tier;
    std::unique_ptr<Engine> engine;
    REQUIRE(Engine::open(o, &engine).is_ok());

    fuse::LeasedEngine leased;
    leased.set(engine.get());
    tier.arm();
    auto asked = std::async(std::launch::async, [&] { return leased.check_tier_unchanged(); });
    tier.wait_inside();
    // The daemon unmounts meanwhile: clearing waits for the call.
    auto cleared = std::async(std::launch::async, [&] { leased.clear(); });
    CHECK(cleared.wait_for(300ms) == std::future_status::timeout);
    tier.release();
    cleared.get();
    CHECK(asked.get().is_ok());
    // Closed after: the lease thread reaches nothing of it.
    REQUIRE(engine->close().is_ok());
    Status st = leased.check_tier_unchanged();
    CHECK(st.err() == ESHUTDOWN);
    leased.stop("the lock was lost");  // nothing to stop, and nothing touched
}

}  // namespace
}  // namespace hiodsfs
