// WriteErrors: writes that were acknowledged and then lost (a held-back
// write whose metadata could not be applied), per file, told the way Linux
// tells a writeback error (errseq_t, one per address_space): every open
// file that was open when writes were lost is told once, at its own flush
// or fsync, so one process's close cannot take the error from another; a
// file opened later is told only of a loss no open file was told of yet.
// Open files hold a WriteErrorCursor (include/hiodsfs/engine.h).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "hiodsfs/engine.h"
#include "hiodsfs/status.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

class WriteErrors {
public:
    // Writes of ino were lost, for the reason why.
    void record(InodeId ino, const Status& why);
    // What a file opened now starts from: the last loss if an open file was
    // told of it, else nothing, so that the first to ask is told.
    WriteErrorCursor sample(InodeId ino);
    // EIO if writes of ino were lost since *seen, which then moves on.
    Status check(InodeId ino, WriteErrorCursor* seen);
    // No open file or kernel reference is left: a loss some file was told
    // of need not be kept (sample() would start a new file past it anyway);
    // one nobody was told of stays for the next opener.
    void forget_if_told(InodeId ino);
    // The file is gone.
    void forget(InodeId ino);

private:
    struct Loss {
        std::uint64_t seq = 0;  // stamp of the last loss, unique in this engine
        bool told = false;      // some open file was told of it
        Status why;
    };
    std::mutex mu_;
    std::uint64_t last_seq_ = 0;
    std::unordered_map<InodeId, Loss> losses_;
};

}  // namespace hiodsfs
