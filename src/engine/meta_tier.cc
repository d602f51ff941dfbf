#include "engine/meta_tier.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <tuple>

#include "chunk/fingerprint.h"
#include "engine/store_layout.h"

namespace hiodsfs {
namespace {

constexpr const char* kJournalPrefix = "journal.";
constexpr const char* kSnapshotPrefix = "meta.";  // snapshot parts
constexpr const char* kManifestPrefix = "manifest.";
constexpr const char* kOldManifest = "meta";  // the manifest of a store before holder epochs
constexpr const char* kManifestMagic = "hiodsfs metadata snapshot";

std::string hex16(std::uint64_t v) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

std::string hex8(std::uint32_t v) {
    char buf[12];
    std::snprintf(buf, sizeof buf, "%08" PRIx32, v);
    return buf;
}

// Hex digits only, exactly `digits` of them.
bool parse_hex(const std::string& s, std::size_t digits, std::uint64_t* out) {
    if (s.size() != digits || s.find_first_not_of("0123456789abcdef") != std::string::npos)
        return false;
    *out = std::strtoull(s.c_str(), nullptr, 16);
    return true;
}

// "P1.P2...." after `prefix`, split at the dots.
bool split_name(const std::string& name, const std::string& prefix,
                std::vector<std::string>* fields) {
    if (name.compare(0, prefix.size(), prefix) != 0) return false;
    fields->clear();
    std::string rest = name.substr(prefix.size());
    for (std::size_t at = 0;;) {
        const std::size_t dot = rest.find('.', at);
        fields->push_back(rest.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
        if (dot == std::string::npos) return true;
        at = dot + 1;
    }
}

// Epoch 0 names the objects of a store before holder epochs (format 1).
std::string part_name(std::uint64_t seq, std::uint32_t epoch, std::size_t part) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04zx", part);
    return kSnapshotPrefix + hex16(seq) + (epoch == 0 ? "" : "." + hex8(epoch)) + "." + buf;
}

// "meta.<16 hex seq>[.<8 hex epoch>].<4 hex part>".
bool parse_part_name(const std::string& name, std::uint64_t* seq, std::uint32_t* epoch) {
    std::vector<std::string> f;
    std::uint64_t e = 0, part = 0;
    if (!split_name(name, kSnapshotPrefix, &f) || (f.size() != 2 && f.size() != 3)) return false;
    if (!parse_hex(f[0], 16, seq) || !parse_hex(f.back(), 4, &part)) return false;
    if (f.size() == 3 && !parse_hex(f[1], 8, &e)) return false;
    *epoch = static_cast<std::uint32_t>(e);
    return true;
}

std::string manifest_name(std::uint32_t epoch, std::uint64_t seq) {
    return epoch == 0 ? kOldManifest : kManifestPrefix + hex8(epoch) + "." + hex16(seq);
}

// "journal.<16 hex first seq>[.<8 hex epoch>]" -> its first seq and epoch.
bool parse_journal_name(const std::string& name, std::uint64_t* first, std::uint32_t* epoch) {
    std::vector<std::string> f;
    std::uint64_t e = 0;
    if (!split_name(name, kJournalPrefix, &f) || (f.size() != 1 && f.size() != 2)) return false;
    if (!parse_hex(f[0], 16, first) || (f.size() == 2 && !parse_hex(f[1], 8, &e))) return false;
    *epoch = static_cast<std::uint32_t>(e);
    return true;
}

// The journal's objects by (first seq, epoch): of two that start at one
// seq, the later holder's supersedes the other.
struct JournalObject {
    std::uint64_t first = 0;
    std::uint32_t epoch = 0;
    std::string name;
    bool operator<(const JournalObject& o) const {
        return std::tie(first, epoch) < std::tie(o.first, o.epoch);
    }
};

Status journal_objects(SegmentTier* tier, std::vector<JournalObject>* out) {
    std::vector<std::string> names;
    HIODSFS_TRY(tier->list_objects(kJournalPrefix, &names));
    out->clear();
    for (const std::string& n : names) {
        JournalObject o;
        o.name = n;
        if (parse_journal_name(n, &o.first, &o.epoch)) out->push_back(o);
    }
    std::sort(out->begin(), out->end());
    return Status::ok();
}

struct Manifest {
    std::uint32_t epoch = 0;  // of its holder, from its name
    std::uint64_t seq = 0;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> parts;  // size, crc32c
};

std::string encode_manifest(const Manifest& m) {
    std::string out = std::string(kManifestMagic) + "\nseq " + std::to_string(m.seq) + "\n";
    for (const auto& [size, crc] : m.parts) out += "part " + std::to_string(size) + " " + std::to_string(crc) + "\n";
    return out;
}

bool decode_manifest(const std::string& text, Manifest* m) {
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != kManifestMagic) return false;
    bool have_seq = false;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string key;
        f >> key;
        if (key == "seq") {
            have_seq = static_cast<bool>(f >> m->seq);
        } else if (key == "part") {
            std::uint64_t size = 0;
            std::uint32_t crc = 0;
            if (!(f >> size >> crc)) return false;
            m->parts.emplace_back(size, crc);
        }
    }
    return have_seq && !m->parts.empty();
}

// The newest manifest: of the newest holder that wrote one, its newest
// (a holder's late write of an older one of its own is passed over), or
// the manifest of a store before holder epochs.
Status get_manifest(SegmentTier* tier, Manifest* m, bool* found) {
    std::vector<std::string> names;
    HIODSFS_TRY(tier->list_objects(kManifestPrefix, &names));
    std::string name = kOldManifest;
    std::uint32_t epoch = 0;
    std::uint64_t seq = 0;
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
        std::vector<std::string> f;
        std::uint64_t e = 0;
        if (split_name(*it, kManifestPrefix, &f) && f.size() == 2 && parse_hex(f[0], 8, &e) &&
            parse_hex(f[1], 16, &seq)) {
            name = *it;
            epoch = static_cast<std::uint32_t>(e);
            break;
        }
    }
    std::vector<char> bytes;
    Status st = tier->get_object(name, &bytes);
    *found = st.is_ok();
    if (st.err() == ENOENT) return Status::ok();
    HIODSFS_TRY(st);
    m->epoch = epoch;
    if (!decode_manifest(std::string(bytes.begin(), bytes.end()), m) ||
        (epoch != 0 && m->seq != seq))
        return Status::error(EUCLEAN, "the metadata snapshot manifest " + name + " in " +
                                          tier->describe() + " does not parse");
    return Status::ok();
}

// The snapshot's parts, each checked, into the file `path` (one part in
// memory at a time), synced.
Status fetch_snapshot(Env* env, SegmentTier* tier, const Manifest& m, const std::string& path) {
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(path, OpenMode::kReadWrite, &f));
    HIODSFS_TRY(f->truncate(0));
    std::vector<char> part;
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
        const std::string name = part_name(m.seq, m.epoch, i);
        HIODSFS_TRY(tier->get_object(name, &part));
        if (part.size() != m.parts[i].first || crc32c(part.data(), part.size()) != m.parts[i].second)
            return Status::error(EUCLEAN, "metadata snapshot " + name + " in " + tier->describe() +
                                              " fails its check");
        HIODSFS_TRY(f->pwrite(part.data(), part.size(), at));
        at += part.size();
    }
    return f->sync();
}

}  // namespace

std::string journal_object_name(std::uint64_t first_seq, std::uint32_t epoch) {
    return kJournalPrefix + hex16(first_seq) + (epoch == 0 ? "" : "." + hex8(epoch));
}

Status TierJournal::write(std::uint64_t seq, std::string_view record) {
    std::lock_guard lock(mu_);
    const bool fresh = object_.empty() || object_bytes_ >= kJournalObjectBytes;
    const std::string object = fresh ? journal_object_name(seq, tier_->epoch()) : object_;
    Status st = tier_->append_object(object, record.data(), record.size());
    if (!st) {
        std::vector<JournalRecord> recs;
        std::size_t end = 0;
        decode_journal(record, &recs, &end);
        if (recs.size() == 1) failed_.push_back(Attempt{seq, std::string(recs[0].super), recs[0].ops.size()});
        return st;
    }
    failed_.clear();
    if (fresh) {
        object_ = object;
        object_bytes_ = 0;
    }
    object_bytes_ += record.size();
    since_snapshot_ += record.size();
    last_seq_ = seq;
    return Status::ok();
}

std::uint64_t TierJournal::bytes_since_snapshot() {
    std::lock_guard lock(mu_);
    return since_snapshot_;
}

std::string TierJournal::current_object() {
    std::lock_guard lock(mu_);
    return object_;
}

std::uint64_t TierJournal::last_seq() {
    std::lock_guard lock(mu_);
    return last_seq_;
}

void TierJournal::snapshot_taken() {
    std::lock_guard lock(mu_);
    since_snapshot_ = 0;
}

Status TierJournal::check_unchanged(std::uint64_t committed) {
    std::uint64_t snapshot = 0;
    bool have_snapshot = false;
    HIODSFS_TRY(snapshot_seq(tier_, &snapshot, &have_snapshot));
    if (have_snapshot && snapshot > committed)
        return Status::error(ESTALE, tier_->describe() + " holds a metadata snapshot of record " +
                                         std::to_string(snapshot) + ", past this client's last commit (" +
                                         std::to_string(committed) + ")");
    std::vector<std::vector<char>> bytes;
    std::vector<JournalRecord> recs;
    std::uint64_t last = 0;
    HIODSFS_TRY(read_journal(tier_, committed, &bytes, &recs, &last));
    std::lock_guard lock(mu_);
    for (const JournalRecord& r : recs) {
        bool mine = false;
        for (const Attempt& a : failed_) mine = mine || (a.seq == r.seq && a.super == r.super && a.ops_bytes == r.ops.size());
        if (!mine)
            return Status::error(ESTALE, tier_->describe() + "'s metadata journal holds record " +
                                             std::to_string(r.seq) + ", which this client did not write");
    }
    return Status::ok();
}

Status read_journal(SegmentTier* tier, std::uint64_t after, std::vector<std::vector<char>>* bytes,
                    std::vector<JournalRecord>* out, std::uint64_t* last,
                    std::vector<std::uint32_t>* epochs) {
    std::vector<JournalObject> objects;
    HIODSFS_TRY(journal_objects(tier, &objects));
    *last = after;
    for (std::size_t k = 0; k < objects.size(); ++k) {
        // Records at or past the next object's first are an earlier run's
        // (or an earlier holder's) appends that landed late: the next
        // object has those seqs.
        const std::uint64_t next_first = k + 1 < objects.size() ? objects[k + 1].first : UINT64_MAX;
        if (next_first <= after + 1) continue;  // wholly before what is wanted
        bytes->emplace_back();
        Status st = tier->get_object(objects[k].name, &bytes->back());
        if (st.err() == ENOENT) continue;  // removed by a snapshot meanwhile
        HIODSFS_TRY(st);
        const std::string_view data(bytes->back().data(), bytes->back().size());
        std::vector<JournalRecord> recs;
        std::size_t end = 0;
        decode_journal(data, &recs, &end);
        if (end < data.size() && k + 1 < objects.size()) {
            return Status::error(EUCLEAN, "journal object " + objects[k].name + " in " +
                                              tier->describe() + " is damaged at byte " +
                                              std::to_string(end) +
                                              ": the records after it cannot be replayed");
        }
        for (const JournalRecord& r : recs) {
            if (r.seq >= next_first) continue;
            // A commit whose append failed is written again under the same
            // seq with everything since; an attempt that landed anyway
            // holds a prefix of its changes, so the longest record of a
            // seq is the one, whatever order they landed in. (One holder's
            // retries: another holder's records are in objects of its own.)
            if (r.seq == *last && !out->empty() && out->back().seq == r.seq) {
                if (r.ops.size() > out->back().ops.size()) out->back() = r;
                continue;
            }
            if (r.seq <= *last) continue;
            if (r.seq != *last + 1) {
                return Status::error(EUCLEAN, "the journal in " + tier->describe() + " has no record " +
                                                  std::to_string(*last + 1) + " (the next is " +
                                                  std::to_string(r.seq) + ")");
            }
            out->push_back(r);
            if (epochs != nullptr) epochs->push_back(objects[k].epoch);
            *last = r.seq;
        }
    }
    return Status::ok();
}

Status snapshot_seq(SegmentTier* tier, std::uint64_t* seq, bool* found, std::uint32_t* epoch) {
    Manifest m;
    HIODSFS_TRY(get_manifest(tier, &m, found));
    *seq = m.seq;
    if (epoch != nullptr) *epoch = m.epoch;
    return Status::ok();
}

Status tier_has_metadata(SegmentTier* tier, bool* found) {
    *found = false;
    for (const char* prefix :
         {kManifestPrefix, kOldManifest /* "meta" and "meta.*" */, kJournalPrefix}) {
        std::vector<std::string> names;
        HIODSFS_TRY(tier->list_objects(prefix, &names));
        *found = *found || !names.empty();
    }
    return Status::ok();
}

Status recover_metadata(Env* env, SegmentTier* tier, const std::string& meta_dir, std::uint64_t map_bytes,
                        std::string* summary) {
    Manifest m;
    bool have_snapshot = false;
    HIODSFS_TRY(get_manifest(tier, &m, &have_snapshot));
    HIODSFS_TRY(env->mkdir(meta_dir));
    if (have_snapshot) HIODSFS_TRY(fetch_snapshot(env, tier, m, meta_dir + "/data.mdb"));
    std::vector<std::vector<char>> bytes;
    std::vector<JournalRecord> recs;
    std::uint64_t last = 0;
    HIODSFS_TRY(read_journal(tier, m.seq, &bytes, &recs, &last));
    // Mapped as large as the snapshot and the journal can make it, not
    // map_bytes' terabyte: this copy is closed once recovered, and where
    // address space is scarce (a sanitizer, ulimit -v) a terabyte fails.
    std::uint64_t need = 256ull << 20;
    struct stat snap {};
    if (have_snapshot && ::stat((meta_dir + "/data.mdb").c_str(), &snap) == 0)
        need += 2 * static_cast<std::uint64_t>(snap.st_size);
    for (const auto& b : bytes) need += 4 * static_cast<std::uint64_t>(b.size());
    std::unique_ptr<MetaStore> meta;
    MetaStoreOptions o;
    o.map_bytes = std::min(map_bytes, need);
    HIODSFS_TRY(MetaStore::open(meta_dir, o, &meta));
    if (meta->committed_journal_seq() != m.seq)
        return Status::error(EUCLEAN, "metadata snapshot in " + tier->describe() + " is of record " +
                                          std::to_string(meta->committed_journal_seq()) + ", its manifest says " +
                                          std::to_string(m.seq));
    if (!have_snapshot && (recs.empty() || recs.front().seq != 1))
        return Status::error(EUCLEAN, tier->describe() + " has no metadata snapshot and its journal does not "
                                                         "start at record 1");
    for (const JournalRecord& r : recs) HIODSFS_TRY(meta->replay(r));
    *summary = (have_snapshot ? "snapshot of record " + std::to_string(m.seq) : std::string("no snapshot")) +
               ", " + std::to_string(recs.size()) + " journal records replayed (up to record " +
               std::to_string(last) + ")";
    return Status::ok();
}

Status recover_store_dir(Env* env, SegmentTier* tier, const std::string& dir, std::uint64_t map_bytes,
                         std::string* summary) {
    // What an interrupted recovery (or creation) may have left; nothing
    // else, and nothing of it acknowledged that the tier does not hold.
    std::vector<std::string> names;
    HIODSFS_TRY(env->list_dir(dir, &names));
    for (const auto& n : names) {
        if (n == "." || n == ".." || n == "lock") continue;
        if (n != "meta" && n != "meta.recover" && n != "segments" && n != "status.json" && n != "FORMAT.tmp" &&
            n != "snapshot.tmp")
            return Status::error(EEXIST, "store " + dir + " is not empty and is not a hiodsfs store");
        std::error_code ec;
        std::filesystem::remove_all(dir + "/" + n, ec);
        if (ec) return Status::error(ec.value(), "removing " + dir + "/" + n + ": " + ec.message());
    }
    std::string text;
    Status st = get_format(tier, &text);
    if (!st)
        return Status::error(st.err() == ENOENT ? EUCLEAN : st.err(),
                             tier->describe() + " holds metadata of a store but not its format record: " + st.message());
    StoreFormat format;
    HIODSFS_TRY(parse_store_format(text, tier->describe() + " format record", &format));
    const std::string staging = dir + "/meta.recover";
    st = recover_metadata(env, tier, staging, map_bytes, summary);
    if (!st) return Status::error(st.err(), "recovering " + tier->describe() + " into " + dir + ": " + st.message());
    if (::rename(staging.c_str(), (dir + "/meta").c_str()) != 0)
        return Status::from_errno(errno, "rename " + staging);
    HIODSFS_TRY(env->sync_dir(dir));
    return write_store_format(env, dir, format);
}

Status catch_up_from_tier(SegmentTier* tier, MetaStore& meta, const std::string& store_dir,
                          CatchUp* out) {
    *out = CatchUp{};
    const std::uint64_t local = meta.committed_journal_seq();
    Manifest m;
    bool have_snapshot = false;
    HIODSFS_TRY(get_manifest(tier, &m, &have_snapshot));
    std::vector<std::vector<char>> bytes;
    std::vector<JournalRecord> recs;
    std::vector<std::uint32_t> epochs;
    std::uint64_t last = 0;
    Status st = read_journal(tier, local, &bytes, &recs, &last, &epochs);
    const std::string older = "cache_dir " + store_dir + " holds an older copy of the store than " + tier->describe() +
                              " (its journal record " + std::to_string(local) + ", ";
    const std::string hint = "): move it aside and mount with an empty cache_dir to recover the store from " +
                             tier->describe();
    if (st.err() == EUCLEAN && have_snapshot && m.seq > local)
        return Status::error(EUCLEAN, older + "the pool's snapshot " + std::to_string(m.seq) + hint);
    HIODSFS_TRY(st);
    // (read_journal returns records from local + 1 on, or none.)
    if (recs.empty() && have_snapshot && m.seq > local)
        return Status::error(EUCLEAN, older + "the pool's snapshot " + std::to_string(m.seq) + hint);
    // The holder that wrote this directory's own last record, when the
    // journal still has it (0 when unknown).
    std::uint32_t own_epoch = 0;
    bool own_known = false;
    if (local > 0) {
        std::vector<std::vector<char>> b2;
        std::vector<JournalRecord> r2;
        std::vector<std::uint32_t> e2;
        std::uint64_t l2 = 0;
        Status mine = read_journal(tier, local - 1, &b2, &r2, &l2, &e2);
        if (mine && !r2.empty() && r2.front().seq == local) {
            own_epoch = e2.front();
            own_known = true;
        }
        if (recs.empty()) {
            // Nothing after ours: the tier must hold ours, or a copy of the
            // store made elsewhere (or a pool that lost records) would be
            // written over.
            HIODSFS_TRY(mine);
            const std::uint64_t newest = std::max(have_snapshot ? m.seq : 0, l2);
            if (newest < local) {
                return Status::error(
                    EUCLEAN, "cache_dir " + store_dir + " holds journal record " +
                                 std::to_string(local) + " of the store, but " + tier->describe() +
                                 " only " + std::to_string(newest) +
                                 ": it is another copy of the store; mount with an empty cache_dir "
                                 "to use " +
                                 tier->describe() + "'s");
            }
        }
    }
    for (std::size_t i = 0; i < recs.size(); ++i) {
        HIODSFS_TRY(meta.replay(recs[i]));
        if (!own_known || epochs[i] != own_epoch) out->foreign = true;
    }
    out->replayed = recs.size();
    return Status::ok();
}

Status put_snapshot(Env* env, SegmentTier* tier, MetaStore& meta, TierJournal* journal,
                    const std::string& tmp_path, bool closing, std::uint64_t* seq, std::uint64_t part_bytes) {
    HIODSFS_TRY(meta.snapshot(tmp_path, seq));
    struct Remover {
        Env* env;
        std::string path;
        ~Remover() { (void)env->unlink(path); }
    } remove_tmp{env, tmp_path};
    std::unique_ptr<File> f;
    HIODSFS_TRY(env->open(tmp_path, OpenMode::kRead, &f));
    Manifest m;
    m.seq = *seq;
    m.epoch = tier->epoch();
    std::vector<char> part(static_cast<std::size_t>(part_bytes));
    for (std::uint64_t at = 0;;) {
        std::size_t got = 0;
        HIODSFS_TRY(f->pread(part.data(), part.size(), at, &got));
        if (got == 0 && at > 0) break;
        HIODSFS_TRY(tier->put_object(part_name(*seq, m.epoch, m.parts.size()), part.data(), got));
        m.parts.emplace_back(got, crc32c(part.data(), got));
        at += got;
        if (got < part.size()) break;
    }
    const std::string manifest = encode_manifest(m);
    HIODSFS_TRY(tier->put_object(manifest_name(m.epoch, m.seq), manifest.data(), manifest.size()));
    if (journal != nullptr) journal->snapshot_taken();

    // The manifest names the new snapshot: what it supersedes can go, and
    // at close the current journal object too. A failure here only leaves
    // objects a later snapshot deletes.
    std::vector<std::string> names;
    if (superseded_objects(tier, *seq, m.epoch, &names))
        for (const std::string& n : names) (void)tier->remove_object(n);
    if (closing && journal != nullptr && !journal->current_object().empty() && journal->last_seq() <= *seq)
        (void)tier->remove_object(journal->current_object());
    return Status::ok();
}

Status superseded_objects(SegmentTier* tier, std::uint64_t seq, std::uint32_t epoch,
                          std::vector<std::string>* out) {
    out->clear();
    std::vector<std::string> names;
    // Parts ("meta.*"), and the manifest before epochs ("meta").
    HIODSFS_TRY(tier->list_objects(kOldManifest, &names));
    for (const std::string& n : names) {
        std::uint64_t part_seq = 0;
        std::uint32_t part_epoch = 0;
        if (n == kOldManifest) {
            if (epoch != 0) out->push_back(n);
        } else if (parse_part_name(n, &part_seq, &part_epoch) &&
                   !(part_seq == seq && part_epoch == epoch)) {
            out->push_back(n);
        }
    }
    HIODSFS_TRY(tier->list_objects(kManifestPrefix, &names));
    const std::string mine = manifest_name(epoch, seq);
    for (const std::string& n : names)
        if (n != mine) out->push_back(n);
    std::vector<JournalObject> objects;
    HIODSFS_TRY(journal_objects(tier, &objects));
    for (std::size_t k = 0; k + 1 < objects.size(); ++k)
        if (objects[k + 1].first <= seq + 1) out->push_back(objects[k].name);
    return Status::ok();
}

Status put_format(SegmentTier* tier, const std::string& text) {
    return tier->put_object(kFormatObject, text.data(), text.size());
}

Status get_format(SegmentTier* tier, std::string* text) {
    std::vector<char> bytes;
    HIODSFS_TRY(tier->get_object(kFormatObject, &bytes));
    text->assign(bytes.begin(), bytes.end());
    return Status::ok();
}

}  // namespace hiodsfs
