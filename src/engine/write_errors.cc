#include "engine/write_errors.h"

#include <cerrno>

namespace hiodsfs {

void WriteErrors::record(InodeId ino, const Status& why) {
    std::lock_guard<std::mutex> g(mu_);
    // A new stamp for every loss: a cursor that holds an older one is told,
    // and stamps never repeat, even for a file forgotten and seen again.
    losses_[ino] = Loss{++last_seq_, false, why};
}

WriteErrorCursor WriteErrors::sample(InodeId ino) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = losses_.find(ino);
    if (it == losses_.end() || !it->second.told) return WriteErrorCursor{};
    return WriteErrorCursor{it->second.seq};
}

Status WriteErrors::check(InodeId ino, WriteErrorCursor* seen) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = losses_.find(ino);
    if (it == losses_.end() || seen->seen == it->second.seq) return Status::ok();
    it->second.told = true;
    seen->seen = it->second.seq;
    return Status::error(EIO, "writes acknowledged earlier were lost: " + it->second.why.message());
}

void WriteErrors::forget_if_told(InodeId ino) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = losses_.find(ino);
    if (it != losses_.end() && it->second.told) losses_.erase(it);
}

void WriteErrors::forget(InodeId ino) {
    std::lock_guard<std::mutex> g(mu_);
    losses_.erase(ino);
}

}  // namespace hiodsfs
