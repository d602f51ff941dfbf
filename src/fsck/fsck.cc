// run_fsck(): opens the store (open_store.h), runs the Checker (checker.h) over it in one
// metadata operation, commits what it repaired or flagged, and after a repair
// checks the result again.
#include "fsck/fsck.h"

#include <algorithm>
#include <memory>
#include <string>

#include "engine/encryption.h"
#include "engine/key_slot.h"
#include "engine/store_layout.h"
#include "fsck/checker.h"
#include "fsck/open_store.h"
#include "meta/dictionaries.h"
#include "meta/meta_store.h"

namespace hiodsfs {

std::size_t FsckReport::unrepaired() const {
    return static_cast<std::size_t>(
        std::count_if(problems.begin(), problems.end(), [](const FsckProblem& p) { return !p.repaired; }));
}

std::size_t FsckReport::repairable() const {
    return static_cast<std::size_t>(std::count_if(problems.begin(), problems.end(), [](const FsckProblem& p) {
        return !p.repaired && p.repairable;
    }));
}

int FsckReport::exit_code() const {
    if (problems.empty()) return 0;
    return unrepaired() == 0 ? 1 : 4;
}

std::string fsck_verdict(const FsckOptions& o, const FsckReport& r) {
    const std::string store = (o.tier != nullptr ? o.tier->describe() : o.store) + ": ";
    const std::string given = o.tier != nullptr ? o.tier->describe() + " --cache-dir " + o.store : o.store;
    const std::size_t found = r.problems.size(), left = r.unrepaired(), fixable = r.repairable();
    const std::string n = std::to_string(found) + " problem(s) found";
    if (found == 0) return store + "clean";
    if (left == 0) return store + n + ", all repaired";
    const std::string lost = "the ERROR lines name the files each affects: restore those from a backup";
    if (fixable == 0)
        return store + n + ", " + std::to_string(left) + " left uncorrected: they cannot be repaired without "
                       "losing data (" + lost + ")";
    std::string v = store + n + ", " + std::to_string(left) + " left uncorrected (check only): hiodsfs-fsck --repair " +
                    given + " repairs " + std::to_string(fixable);
    if (fixable < left)
        v += "; the other " + std::to_string(left - fixable) + " cannot be repaired without losing data (" + lost + ")";
    return v;
}

Status run_fsck(const FsckOptions& options, FsckReport* report) {
    *report = FsckReport{};
    fsck::OpenStore s;
    fsck::FormatFinding format;
    DictionarySet dicts;
    HIODSFS_TRY(fsck::open_store(options, &s, &format, &report->notes));
    // An encrypted store is checked with its key, or not at all: without
    // it every chunk would look damaged.
    std::unique_ptr<ChunkCipher> cipher;
    const StoreEncryption& encryption = format.write.encryption;
    const bool keyed = options.key != nullptr || options.passphrase != nullptr;
    if (encryption.on() && !keyed)
        return Status::error(EACCES, "store " + options.store + " is encrypted: give its key with --key-file FILE "
                                     "or --key ask (nothing was checked)");
    if (!encryption.on() && keyed)
        return Status::error(EINVAL, "store " + options.store + " is not encrypted, and a key was given");
    if (encryption.on())
        HIODSFS_TRY(open_store_key({s.dir->env(), options.store}, encryption, options.key.get(),
                                   options.passphrase.get(), &cipher));
    const bool fix_format = options.repair && format.repairable;
    if (!format.problem.empty()) report->problems.push_back(FsckProblem{format.problem, fix_format, format.repairable});
    {
        std::unique_ptr<Txn> t;
        HIODSFS_TRY(s.meta->begin(&t));
        // A damaged dictionary cannot be repaired: the scrub names the
        // files whose chunks need it.
        StoredDictionaries stored;
        HIODSFS_TRY(load_dictionaries(*t, &dicts, &stored, DictionarySealing{encryption.on(), cipher.get()}));
        for (const std::string& line : stored.damaged)
            report->problems.push_back(FsckProblem{
                line + ": the chunks stored with it cannot be read (--scrub names their files)",
                false, false});
        fsck::Checker c(*t, *s.segs, &dicts, cipher.get(), s.dir->env(), options, options.repair, options.scrub,
                        report);
        HIODSFS_TRY(c.run());
        if (options.tier != nullptr) HIODSFS_TRY(fsck::note_superseded_objects(options.tier, report));
        if (!options.repair && format.add_copy)
            report->notes.push_back(
                "the metadata holds no copy of FORMAT (a store an older hiodsfs made); "
                "--repair or the next read-write mount adds it");
        // A scrub that flagged nothing commits nothing (not even the fsync
        // log's records it applied to check the state after them).
        if (!options.repair && c.flagged() == 0) return Status::ok();
        if (fix_format || (options.repair && format.add_copy && format.problem.empty()))
            HIODSFS_TRY(write_format_copy(*t, format.write));
        HIODSFS_TRY(t->commit());
    }
    HIODSFS_TRY(s.meta->commit_group(nullptr));
    // FORMAT after the copy it is made from is durable. The fsync log's
    // mark (StoreFormat::log_open) goes too: its records are applied.
    if (fix_format || format.write.log_open) {
        StoreFormat clean = format.write;
        clean.log_open = false;
        HIODSFS_TRY(write_store_format(s.dir->env(), options.store, clean));
    }
    // A scrub's flags are all it writes: its report stands as found.
    if (!options.repair || report->problems.empty()) return Status::ok();

    // Check the result again; whatever it finds was not repaired. (The
    // repair may have made a segment.)
    HIODSFS_TRY(fsck::open_segments(options, s));
    FsckReport again;
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(s.meta->begin(&t));
    FsckOptions plain = options;
    plain.progress = nullptr;
    fsck::Checker c(*t, *s.segs, &dicts, cipher.get(), s.dir->env(), plain, false, false, &again);
    HIODSFS_TRY(c.run());
    if (report->unrepaired() == 0) {
        for (auto& p : again.problems) report->problems.push_back(FsckProblem{"after repair: " + p.what, false});
    }
    return Status::ok();
}

}  // namespace hiodsfs
