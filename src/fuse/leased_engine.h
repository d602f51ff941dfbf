// LeasedEngine: the engine as the RADOS lock's lease thread reaches it. The
// thread stops the store when the lock is lost for good and, after a
// lapse, asks whether the pool is as the store left it: both use the
// engine's metadata, which Engine::close() resets. So the daemon clears
// this before it closes the engine; clear() waits for a call in progress,
// and every later call finds no engine.
// Thread-safety: all methods may be called from several threads at once.
#pragma once

#include <cerrno>
#include <mutex>
#include <string>

#include "hiodsfs/engine.h"

namespace hiodsfs::fuse {

class LeasedEngine {
public:
    void set(Engine* engine) {
        std::lock_guard guard(mu_);
        engine_ = engine;
    }
    // Waits for a call in progress; none reaches the engine after.
    void clear() { set(nullptr); }
    // The lock is lost for good: the store answers EIO from now on.
    void stop(const std::string& why) {
        std::lock_guard guard(mu_);
        if (engine_ != nullptr) engine_->stop(why);
    }
    // Held again after a lapse: whether the pool is as the store left it.
    Status check_tier_unchanged() {
        std::lock_guard guard(mu_);
        if (engine_ == nullptr) return Status::error(ESHUTDOWN, "the store was closed");
        return engine_->check_tier_unchanged();
    }

private:
    std::mutex mu_;
    Engine* engine_ = nullptr;
};

}  // namespace hiodsfs::fuse
