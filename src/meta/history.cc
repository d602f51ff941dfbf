#include "meta/history.h"

#include <algorithm>
#include <string>

namespace hiodsfs {

namespace {
constexpr std::size_t kMaxPrunePerCall = 64;

bool decode(std::string_view k, std::string_view v, HistoryEntry* e) {
    if (k.size() != 8) return false;
    e->time_ns = get_be64(k);
    return from_bytes(v, &e->r);
}
}  // namespace

Status append_history(Txn& t, const HistoryEntry& e, std::uint64_t retention_ns) {
    HIODSFS_TRY(t.put(Db::kHistory, be64(e.time_ns), as_bytes(e.r)));
    if (e.time_ns <= retention_ns) return Status::ok();
    const std::uint64_t cutoff = e.time_ns - retention_ns;
    std::vector<std::string> old;
    {
        Cursor c = t.cursor(Db::kHistory);
        for (bool ok = c.first(); ok && old.size() < kMaxPrunePerCall; ok = c.next()) {
            if (c.key().size() == 8 && get_be64(c.key()) >= cutoff) break;
            old.emplace_back(c.key());
        }
        HIODSFS_TRY(c.status());
    }
    for (const auto& k : old) HIODSFS_TRY(t.del(Db::kHistory, k));
    return Status::ok();
}

Status read_history_tail(Txn& t, std::size_t max, std::vector<HistoryEntry>* out) {
    out->clear();
    Cursor c = t.cursor(Db::kHistory);
    for (bool ok = c.last(); ok && out->size() < max; ok = c.prev()) {
        HistoryEntry e;
        if (decode(c.key(), c.value(), &e)) out->push_back(e);
    }
    HIODSFS_TRY(c.status());
    std::reverse(out->begin(), out->end());
    return Status::ok();
}

Status read_history_daily(Txn& t, std::size_t days, std::vector<HistoryEntry>* out) {
    out->clear();
    Cursor c = t.cursor(Db::kHistory);
    bool ok = c.last();
    while (ok && out->size() < days) {
        HistoryEntry e;
        if (!decode(c.key(), c.value(), &e)) {
            ok = c.prev();
            continue;
        }
        out->push_back(e);
        // The last sample of the previous day with samples: the one before
        // the first key of this day.
        const std::uint64_t day_start = e.time_ns / kNsPerDay * kNsPerDay;
        ok = c.seek(be64(day_start)) ? c.prev() : c.last();
        if (ok && c.key().size() == 8 && get_be64(c.key()) >= day_start) ok = false;
    }
    HIODSFS_TRY(c.status());
    std::reverse(out->begin(), out->end());
    return Status::ok();
}

}  // namespace hiodsfs
