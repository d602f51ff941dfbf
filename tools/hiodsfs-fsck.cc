// hiodsfs-fsck STORE [--repair] [--scrub] [-n]: checks a store that is not
// mounted, repairs what can be repaired without losing data, and with
// --scrub re-reads every chunk. hiodsfs-fsck rados:POOL/STORE --cache-dir
// DIR checks a store whose sealed segments are RADOS objects, holding its
// RADOS lock meanwhile. hiodsfs-fsck --upgrade STORE converts a store of
// an older format; --change-key gives an encrypted store a new passphrase.
// Exit codes as e2fsck: 0 clean, 1 errors
// found and all repaired, 4 errors left uncorrected, 8 operational error.
// See docs/fsck.md and man/hiodsfs-fsck.8.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/credentials.h"
#include "cli/passphrase.h"
#include "common/name_escape.h"
#include "common/units.h"
#include "engine/encryption.h"
#include "fsck/change_key.h"
#include "fsck/fsck.h"
#include "fsck/tier_source.h"
#include "fsck/upgrade.h"
#include "store/rados_source.h"
#ifdef HIODSFS_HAVE_RADOS
#include "store/rados_tier.h"
#endif

namespace {

constexpr int kExitOperational = 8;
// How long a daemon of this host that was just unmounted, and still writes
// out what is left, is waited for (the daemon's own remount waits as long).
constexpr auto kReleaseWait = std::chrono::seconds(30);

const char* const kUsage =
    "usage: hiodsfs-fsck STORE [--repair] [--scrub] [-n] [--ceph-conf FILE]\n"
    "       hiodsfs-fsck rados:POOL/STORE --cache-dir DIR [--ceph-conf FILE] [--repair] [--scrub] "
    "[-n]\n"
    "       hiodsfs-fsck --upgrade STORE\n"
    "       hiodsfs-fsck --change-key STORE|rados:POOL/STORE (--key-file FILE | --key ask)\n"
    "  Checks a hiodsfs store (it must not be mounted). A store rados:POOL/STORE is checked\n"
    "  through its cache directory DIR (made, and filled from the pool, when empty), holding\n"
    "  the store's RADOS lock meanwhile; a STORE whose FORMAT names such a pool is the same.\n"
    "  --repair  fix what can be fixed without losing data (also -y)\n"
    "  --scrub   also re-read every chunk and verify its checksum and fingerprint; a chunk\n"
    "            that fails is flagged damaged (never shared by a write again) unless -n\n"
    "  -n        check only, change nothing (the default, but for --scrub's flags)\n"
    "  --upgrade convert a store of an older format to this version's, then check it\n"
    "  --chunking SPEC  the chunking the store was made with (fixed:SIZE or cdc:MIN/AVG/MAX), for\n"
    "            --repair to write a lost FORMAT record when the metadata holds no copy of it\n"
    "  --cache-dir DIR  the cache directory of rados:POOL/STORE\n"
    "  --ceph-conf FILE the Ceph cluster's configuration (default /etc/ceph/ceph.conf)\n"
    "  --key-file FILE  the key of an encrypted store (its chunks are opened and their keyed\n"
    "            fingerprints checked with it; an encrypted store is not checked without it)\n"
    "  --key ask  the same with the store's passphrase, asked for on the terminal, read from\n"
    "            standard input, or through systemd-ask-password\n"
    "  --change-key  give an encrypted store a new passphrase (asked for as --key ask is; on\n"
    "            standard input, the line after the current passphrase); only its key slot\n"
    "            is rewritten, and a local store may be mounted meanwhile (a RADOS store's\n"
    "            slot is in its pool, changed under its lock: not while it is mounted)\n"
    "  --unsafe-store-dir  check a store that another user owns or that group or others may write\n"
    "            (refused otherwise: they could replace its files while it is open)\n"
    "exit: 0 clean, 1 errors repaired, 4 errors left, 8 operational error\n";

// A progress line on stderr, at most five times a second, only on a terminal.
class Progress {
public:
    bool enabled = ::isatty(STDERR_FILENO) == 1;
    void update(std::string_view phase, std::uint64_t done, std::uint64_t total) {
        auto now = std::chrono::steady_clock::now();
        if (now - last_ < std::chrono::milliseconds(200) && done != total) return;
        last_ = now;
        unsigned pct = total ? static_cast<unsigned>(done * 100 / total) : 100;
        std::fprintf(stderr, "\r\033[Khiodsfs-fsck: %.*s %u%%", static_cast<int>(phase.size()),
                     phase.data(), pct);
        shown_ = true;
    }
    void clear() {
        if (shown_) std::fputs("\r\033[K", stderr);
        shown_ = false;
    }

private:
    std::chrono::steady_clock::time_point last_{};
    bool shown_ = false;
};

// A store given as rados:POOL/STORE, or a directory whose FORMAT names one.
struct RadosStore {
    std::string source;  // "rados:POOL/STORE"; empty for a local store
    std::string pool, name;
    std::string ceph_conf = hiodsfs::kDefaultCephConf;
};

// Which store the command line names: sets *dir (the directory to check)
// and, for a RADOS store, *out. Options that do not fit it are refused.
bool rados_store_of(const boost::program_options::variables_map& vm, std::string* dir, RadosStore* out,
                    std::string* error) {
    const std::string given = *dir;
    const bool cache_dir = vm.count("cache-dir") != 0;
    if (given.rfind("rados:", 0) == 0) {
        if (!hiodsfs::parse_rados_source(given, &out->pool, &out->name, error)) return false;
        if (!cache_dir || vm["cache-dir"].as<std::string>().empty()) {
            *error = given + " needs --cache-dir DIR: the local directory of its metadata and cache";
            return false;
        }
        out->source = given;
        *dir = vm["cache-dir"].as<std::string>();
    } else {
        if (cache_dir) {
            *error = "--cache-dir is for a store given as rados:POOL/STORE, not " + given;
            return false;
        }
        // A tier's name in FORMAT says where the segments are.
        const std::string tier = hiodsfs::rados_tier_of(hiodsfs::Env::posix(), given);
        if (!tier.empty()) {
            if (!hiodsfs::parse_rados_source(tier, &out->pool, &out->name, error)) return false;
            out->source = tier;
        }
    }
    if (vm.count("ceph-conf")) {
        if (out->source.empty()) {
            *error = "--ceph-conf is for a RADOS store; " + given + " keeps its segments in the directory itself";
            return false;
        }
        out->ceph_conf = vm["ceph-conf"].as<std::string>();
    }
    return true;
}

#ifdef HIODSFS_HAVE_RADOS
// Connects and takes the store's RADOS lock, as the daemon does (a mounted
// store is refused, naming its holder), so no daemon mounts it meanwhile.
hiodsfs::Status lock_rados_store(const RadosStore& rados, std::unique_ptr<hiodsfs::RadosTier>* out) {
    hiodsfs::RadosOptions ro;
    ro.conf_path = rados.ceph_conf;
    ro.client_id = hiodsfs::kDefaultCephId;
    ro.pool = rados.pool;
    ro.timeout = std::chrono::seconds(hiodsfs::kDefaultRadosTimeoutSeconds);
    auto say = [](const std::string& message) {
        std::fprintf(stderr, "hiodsfs-fsck: %s\n", hiodsfs::escape_line(message).c_str());
    };
    hiodsfs::Status st = hiodsfs::open_locked_tier(ro, rados.name, std::chrono::seconds(hiodsfs::kDefaultRadosLeaseSeconds),
                                                   kReleaseWait, say, say, out);
    if (st.err() == EBUSY) return hiodsfs::Status::error(EBUSY, st.message() + "; unmount it before running hiodsfs-fsck");
    return st;
}
#endif

// The key of an encrypted store from --key-file, or its passphrase with
// --key ask; false (after one line on stderr) if neither can be had.
bool store_credentials(const boost::program_options::variables_map& vm, const std::string& store,
                       std::shared_ptr<const hiodsfs::StoreKey>* key,
                       std::shared_ptr<const hiodsfs::Passphrase>* passphrase) {
    const auto given = [&](const char* name) { return vm.count(name) ? &vm[name].as<std::string>() : nullptr; };
    hiodsfs::cli::StoreCredentials c;
    const hiodsfs::Status st = hiodsfs::cli::read_store_credentials(given("key-file"), given("key"), store, &c);
    if (!st) {
        std::fprintf(stderr, "hiodsfs-fsck: %s\n", hiodsfs::escape_line(st.message()).c_str());
        return false;
    }
    *key = c.key;
    *passphrase = c.passphrase;
    return true;
}

// hiodsfs-fsck --change-key STORE: a new passphrase for the store. A RADOS
// store's slot is in its pool: changed there under the store's lock.
int change_key(const boost::program_options::variables_map& vm, const hiodsfs::FsckOptions& o) {
    if (o.repair || o.scrub || vm.count("upgrade") || vm.count("no-repair") || vm.count("cache-dir")) {
        std::fputs("hiodsfs-fsck: --change-key takes a store and its key only\n", stderr);
        return kExitOperational;
    }
    RadosStore rados;
    std::string error;
    const std::string tier_name = o.store.rfind("rados:", 0) == 0
                                      ? o.store
                                      : hiodsfs::rados_tier_of(hiodsfs::Env::posix(), o.store);
    if (!tier_name.empty()) {
        if (!hiodsfs::parse_rados_source(tier_name, &rados.pool, &rados.name, &error)) {
            std::fprintf(stderr, "hiodsfs-fsck: %s\n", error.c_str());
            return kExitOperational;
        }
        rados.source = tier_name;
        if (vm.count("ceph-conf")) rados.ceph_conf = vm["ceph-conf"].as<std::string>();
    } else if (vm.count("ceph-conf")) {
        std::fprintf(stderr, "hiodsfs-fsck: --ceph-conf is for a RADOS store; %s keeps its key slot itself\n",
                     hiodsfs::escape_line(o.store).c_str());
        return kExitOperational;
    }
    hiodsfs::ChangeKeyOptions co;
    co.store = o.store;
    co.any_store_owner = o.any_store_owner;
    co.key = o.key;
    co.passphrase = o.passphrase;
    if (co.key == nullptr && co.passphrase == nullptr) {
        std::fputs("hiodsfs-fsck: --change-key needs the store's key: --key-file FILE or --key ask\n", stderr);
        return kExitOperational;
    }
    hiodsfs::Passphrase fresh;
    hiodsfs::Status st = hiodsfs::cli::ask_passphrase("New passphrase for store " + o.store, true, &fresh);
    if (st) {
        co.new_passphrase = std::make_shared<const hiodsfs::Passphrase>(std::move(fresh));
        if (rados.source.empty()) {
            st = hiodsfs::change_store_key(co);
        } else {
#ifdef HIODSFS_HAVE_RADOS
            std::unique_ptr<hiodsfs::RadosTier> tier;
            st = lock_rados_store(rados, &tier);
            if (st) {
                st = hiodsfs::change_pool_store_key(tier.get(), co);
                const hiodsfs::Status unlocked = tier->unlock();
                if (!unlocked)
                    std::fprintf(stderr, "hiodsfs-fsck: %s (its lease ends by itself)\n", unlocked.message().c_str());
            }
#else
            st = hiodsfs::Status::error(ENOTSUP, rados.source + ": this hiodsfs-fsck was built without librados");
#endif
        }
    }
    if (!st) {
        std::fprintf(stderr, "hiodsfs-fsck: %s\n", hiodsfs::escape_line(st.message()).c_str());
        return kExitOperational;
    }
    std::printf("hiodsfs-fsck: %s: its passphrase is changed (its key slot rewritten; no chunk was)\n",
                hiodsfs::escape_line(o.store).c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    namespace po = boost::program_options;
    hiodsfs::FsckOptions o;
    po::options_description opts;
    opts.add_options()("repair,y", "")("scrub", "")("upgrade", "")("no-repair,n", "")(
        "chunking", po::value<std::string>())("cache-dir", po::value<std::string>())(
        "ceph-conf", po::value<std::string>())("key-file", po::value<std::string>())("key", po::value<std::string>())("change-key", "")("unsafe-store-dir", "")("help,h", "")("version", "")(
        "store", po::value<std::vector<std::string>>());
    po::positional_options_description pos;
    pos.add("store", -1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    } catch (const po::unknown_option& e) {
        std::fprintf(stderr, "hiodsfs-fsck: unknown option %s (see --help)\n", e.get_option_name().c_str());
        return kExitOperational;
    } catch (const po::error& e) {
        std::fprintf(stderr, "hiodsfs-fsck: %s (see --help)\n", e.what());
        return kExitOperational;
    }
    if (vm.count("help")) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (vm.count("version")) {
        std::printf("hiodsfs-fsck %s\n", HIODSFS_VERSION);
        return 0;
    }
    o.repair = vm.count("repair") != 0;
    o.scrub = vm.count("scrub") != 0;
    o.any_store_owner = vm.count("unsafe-store-dir") != 0;
    const bool dry_run = vm.count("no-repair") != 0;
    o.mark_bad_chunks = !dry_run;
    const auto stores = vm.count("store") ? vm["store"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (stores.size() > 1) {
        std::fprintf(stderr, "hiodsfs-fsck: one store only (got %s and %s)\n", stores[0].c_str(),
                     stores[1].c_str());
        return kExitOperational;
    }
    if (stores.empty() || stores[0].empty()) {
        std::fputs("hiodsfs-fsck: no store given (usage: hiodsfs-fsck STORE [--repair] [--scrub] [-n])\n",
                   stderr);
        return kExitOperational;
    }
    o.store = stores[0];
    if (!store_credentials(vm, o.store, &o.key, &o.passphrase)) return kExitOperational;
    if (vm.count("change-key")) return change_key(vm, o);
    if (vm.count("chunking")) {
        hiodsfs::Status parsed = hiodsfs::ChunkingParams::parse(vm["chunking"].as<std::string>(), &o.chunking);
        if (parsed) parsed = o.chunking.validate();
        if (!parsed) {
            std::fprintf(stderr, "hiodsfs-fsck: --chunking: %s\n", parsed.message().c_str());
            return kExitOperational;
        }
        o.chunking_given = true;
    }
    if (dry_run && o.repair) {
        std::fputs("hiodsfs-fsck: -n and --repair contradict each other\n", stderr);
        return kExitOperational;
    }
    RadosStore rados;
    std::string error;
    if (!rados_store_of(vm, &o.store, &rados, &error)) {
        std::fprintf(stderr, "hiodsfs-fsck: %s\n", error.c_str());
        return kExitOperational;
    }
    if (!rados.source.empty() && vm.count("upgrade")) {
        std::fprintf(stderr, "hiodsfs-fsck: --upgrade is for a local store, not %s\n", rados.source.c_str());
        return kExitOperational;
    }
#ifdef HIODSFS_HAVE_RADOS
    // Held until the end, whatever happens: its destructor releases it.
    std::unique_ptr<hiodsfs::RadosTier> tier;
    // An encrypted store's pool: its metadata objects are sealed (the key
    // is checked against the pool's FORMAT before any of them is read).
    std::unique_ptr<hiodsfs::ChunkCipher> pool_cipher;
    std::unique_ptr<hiodsfs::SealedTier> sealed_tier;
    if (!rados.source.empty()) {
        hiodsfs::Status locked = lock_rados_store(rados, &tier);
        // A passphrase unlocks the pool's key slot; the check goes on with the key.
        auto unlocked = std::make_shared<hiodsfs::StoreKey>();
        if (locked)
            locked = hiodsfs::open_sealed_tier(tier.get(), o.key.get(), o.passphrase.get(), &pool_cipher,
                                               &sealed_tier, nullptr, unlocked.get());
        if (locked && sealed_tier != nullptr && o.passphrase != nullptr) {
            o.key = std::move(unlocked);
            o.passphrase = nullptr;
        }
        if (!locked) {
            std::fprintf(stderr, "hiodsfs-fsck: %s\n",
                         hiodsfs::escape_line(locked.message()).c_str());
            return kExitOperational;
        }
        o.tier = sealed_tier != nullptr ? static_cast<hiodsfs::SegmentTier*>(sealed_tier.get()) : tier.get();
    }
#else
    if (!rados.source.empty()) {
        std::fprintf(stderr, "hiodsfs-fsck: %s: this hiodsfs-fsck was built without librados, so it cannot read RADOS "
                             "stores\n", rados.source.c_str());
        return kExitOperational;
    }
#endif

    if (vm.count("upgrade")) {
        if (o.repair || o.scrub || dry_run) {
            std::fputs("hiodsfs-fsck: --upgrade takes no other option\n", stderr);
            return kExitOperational;
        }
        hiodsfs::UpgradeOptions uo;
        uo.store = o.store;
        uo.any_store_owner = o.any_store_owner;
        hiodsfs::UpgradeReport ur;
        hiodsfs::Status up = hiodsfs::upgrade_store(uo, &ur);
        if (!up) {
            std::fprintf(stderr, "hiodsfs-fsck: %s\n", up.message().c_str());
            return kExitOperational;
        }
        if (ur.already_current) {
            std::printf("hiodsfs-fsck: %s already has format version %u\n", o.store.c_str(), ur.to_version);
        } else if (ur.resumed) {
            std::printf("hiodsfs-fsck: finished the interrupted upgrade of %s to format version %u\n",
                        o.store.c_str(), ur.to_version);
        } else {
            std::printf("hiodsfs-fsck: upgraded %s from format version %u to %u: %llu records, "
                        "metadata %s -> %s\n",
                        o.store.c_str(), ur.from_version, ur.to_version,
                        static_cast<unsigned long long>(ur.records),
                        hiodsfs::human_bytes(static_cast<double>(ur.bytes_before)).c_str(),
                        hiodsfs::human_bytes(static_cast<double>(ur.bytes_after)).c_str());
            if (ur.files_queued)
                std::printf("hiodsfs-fsck: %llu files with chunks not yet deduplicated are queued for "
                            "the background pass\n",
                            static_cast<unsigned long long>(ur.files_queued));
            if (ur.damaged_records)
                std::printf("hiodsfs-fsck: %llu records were damaged before the upgrade and are copied "
                            "as they were; the check below names them\n",
                            static_cast<unsigned long long>(ur.damaged_records));
        }
        std::fflush(stdout);
    }

    Progress progress;
    if (progress.enabled) {
        o.progress = [&](std::string_view phase, std::uint64_t done, std::uint64_t total) {
            progress.update(phase, done, total);
        };
    }
    const std::string checking = rados.source.empty() ? o.store : rados.source + " (cache " + o.store + ")";
    std::printf("hiodsfs-fsck: checking %s%s%s\n", hiodsfs::escape_line(checking).c_str(),
                o.repair ? " (repairing)" : " (read-only)", o.scrub ? " with scrub" : "");
    std::fflush(stdout);
    hiodsfs::FsckReport r;
    hiodsfs::Status st = hiodsfs::run_fsck(o, &r);
    progress.clear();
    if (!st) {
        std::fprintf(stderr, "hiodsfs-fsck: %s\n", hiodsfs::escape_line(st.message()).c_str());
        return kExitOperational;
    }
    // Names in them are escaped already (as ls -b does); this keeps each
    // line one line whatever else it quotes (a store path, a system's message).
    for (const auto& p : r.problems)
        std::printf("%s: %s\n", p.repaired ? "REPAIRED" : "ERROR",
                    hiodsfs::escape_line(p.what).c_str());
    for (const auto& n : r.notes) std::printf("note: %s\n", hiodsfs::escape_line(n).c_str());
    std::printf("checked %llu inodes, %llu entries, %llu extents, %llu chunks, %llu fingerprints, "
                "%llu dirty records, %llu xattrs, %llu segments",
                static_cast<unsigned long long>(r.inodes), static_cast<unsigned long long>(r.dirents),
                static_cast<unsigned long long>(r.extents), static_cast<unsigned long long>(r.chunks),
                static_cast<unsigned long long>(r.fingerprints), static_cast<unsigned long long>(r.dirty),
                static_cast<unsigned long long>(r.xattrs), static_cast<unsigned long long>(r.segments));
    if (o.scrub)
        std::printf("; scrubbed %llu chunks (%s)", static_cast<unsigned long long>(r.scrubbed_chunks),
                    hiodsfs::human_bytes(static_cast<double>(r.scrubbed_bytes)).c_str());
    std::printf("\n");
    std::printf("%s\n", hiodsfs::escape_line(hiodsfs::fsck_verdict(o, r)).c_str());
#ifdef HIODSFS_HAVE_RADOS
    if (tier) {
        hiodsfs::Status unlocked = tier->unlock();
        if (!unlocked) std::fprintf(stderr, "hiodsfs-fsck: %s (its lease ends by itself)\n", unlocked.message().c_str());
    }
#endif
    return r.exit_code();
}
