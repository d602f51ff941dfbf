// Quarantine: work of one file that the background pass or the reclaimer
// failed on, set aside so that the rest goes on (docs/architecture.md,
// "Work set aside"): a file whose bytes do not read must not stop the
// deduplication of every other, nor a missing chunk record every delete
// and compaction. The engine keeps what it set aside in the metadata (the
// dirty queue's set-aside records, marked orphans) and tries it again at
// the next read-write open; this says which failures are set aside, logs
// each file once per run, and keeps the last reason for status.json.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

class Quarantine {
public:
    enum class Work { kDedup, kDelete };

    explicit Quarantine(std::function<void(const std::string&)> log) : log_(std::move(log)) {}

    // Whether a failure of one file's work is set aside: not one that
    // passes by itself (no room, no memory), which is tried again as it
    // is. (A stopped store sets nothing aside either: the engine asks.)
    static bool set_aside(const Status& why);
    // What the record of set-aside work keeps as its reason (never empty).
    static std::string reason(const Status& why);
    // "deduplication of inode N: why" (status.json's quarantine_error).
    static std::string describe(Work work, InodeId ino, std::string_view why);
    // Work of ino was set aside for why: logged the first time this run.
    void note(Work work, InodeId ino, const std::string& why);
    // Whether work of ino was noted this run.
    bool noted(Work work, InodeId ino) const;
    // The last one noted, described; "" if none.
    std::string last() const;

private:
    std::function<void(const std::string&)> log_;
    mutable std::mutex mu_;
    std::set<std::pair<Work, InodeId>> logged_;
    std::string last_;
};

}  // namespace hiodsfs
