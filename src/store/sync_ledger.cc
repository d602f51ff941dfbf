#include "store/sync_ledger.h"

#include <algorithm>

namespace hiodsfs {

SyncLedger::Pending SyncLedger::pending() const {
    Pending p;
    p.files.assign(dirty_.begin(), dirty_.end());
    p.dir_gen = dir_gen_;
    p.need_dir = dir_gen_ != dir_synced_gen_;
    return p;
}

void SyncLedger::synced(const Pending& p, const SegmentPosition& position) {
    for (const auto& [id, d] : p.files) {
        auto it = dirty_.find(id);
        if (it != dirty_.end() && it->second.gen == d.gen) dirty_.erase(it);
    }
    dir_synced_gen_ = std::max(dir_synced_gen_, p.dir_gen);
    durable_ = std::max(durable_, position);
}

}  // namespace hiodsfs
