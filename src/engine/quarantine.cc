#include "engine/quarantine.h"

#include <cerrno>

namespace hiodsfs {

bool Quarantine::set_aside(const Status& why) {
    switch (why.err()) {
        case 0:
        case ENOSPC:
        case EDQUOT:
        case ENOMEM:
        case EAGAIN:
        case EINTR:
            return false;
        default:
            return true;
    }
}

std::string Quarantine::reason(const Status& why) {
    return why.message().empty() ? "error " + std::to_string(why.err()) : why.message();
}

std::string Quarantine::describe(Work work, InodeId ino, std::string_view why) {
    return std::string(work == Work::kDedup ? "deduplication" : "freeing") + " of inode " +
           std::to_string(ino) + ": " + std::string(why);
}

void Quarantine::note(Work work, InodeId ino, const std::string& why) {
    bool first = false;
    {
        std::lock_guard<std::mutex> g(mu_);
        last_ = describe(work, ino, why);
        first = logged_.emplace(work, ino).second;
    }
    if (!first || !log_) return;
    if (work == Work::kDedup)
        log_("hiodsfs: the background pass set aside inode " + std::to_string(ino) +
             " (its raw bytes stay as written, tried again at the next mount): " + why);
    else
        log_(
            "hiodsfs: freeing deleted inode " + std::to_string(ino) +
            " is set aside (its space waits for the next mount, or hiodsfs-fsck --repair): " + why);
}

bool Quarantine::noted(Work work, InodeId ino) const {
    std::lock_guard<std::mutex> g(mu_);
    return logged_.count({work, ino}) != 0;
}

std::string Quarantine::last() const {
    std::lock_guard<std::mutex> g(mu_);
    return last_;
}

}  // namespace hiodsfs
