// FaultInjectionEnv: see store/fault_env.h for the durability model.

#include "store/fault_env.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <utility>

namespace hiodsfs {
namespace {

constexpr const char* kHiddenMarker = ".fienv-deleted-";

// One spelling per path, so "a//b/" and "a/b" share their bookkeeping.
std::string normalize(const std::string& path) {
    std::string p = std::filesystem::path(path).lexically_normal().string();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
}

std::string parent_of(const std::string& normalized) {
    std::string parent = std::filesystem::path(normalized).parent_path().string();
    return parent.empty() ? std::string(".") : parent;
}

bool is_hidden(const std::string& path) { return path.find(kHiddenMarker) != std::string::npos; }

Status stale_handle(const std::string& path) {
    return Status::error(
        EIO, "fault env: " + path + ": file handle opened before drop_unsynced() is dead");
}

}  // namespace

struct FaultInjectionEnv::Node {
    // One change to the file's data that is not yet durable, with what is
    // needed to undo it: the file size before it and the bytes it overwrote.
    struct Undo {
        bool is_truncate = false;
        std::uint64_t offset = 0;  // write: first byte; truncate: the new length
        std::uint64_t len = 0;     // write: bytes written
        std::uint64_t size_before = 0;
        std::string old;  // bytes at [offset, offset + old.size()) before the change
    };

    std::string path;  // current path in the base Env
    std::uint64_t size = 0;
    std::vector<Undo> log;  // oldest first; cleared by a successful sync
};

struct FaultInjectionEnv::EntryOp {
    enum Kind { kCreate, kRename, kUnlink } kind = kCreate;
    std::string path;    // create: the new file; rename: the target; unlink: the old name
    std::string from;    // rename: the source
    std::string hidden;  // unlink: where the file is kept; rename: the replaced target, if any
    std::set<std::string> dirs;  // directories that still need sync_dir
};

class FaultInjectionEnv::FaultFile final : public File {
public:
    FaultFile(FaultInjectionEnv* env, std::unique_ptr<File> base, std::shared_ptr<Node> node,
              std::uint64_t epoch)
        : env_(env), base_(std::move(base)), node_(std::move(node)), epoch_(epoch) {}

    Status pwrite(const void* data, std::size_t len, std::uint64_t offset) override {
        return env_->file_pwrite(this, data, len, offset);
    }
    Status pread(void* data, std::size_t len, std::uint64_t offset, std::size_t* got) override {
        if (stale()) {
            *got = 0;
            return stale_handle(node_->path);
        }
        return base_->pread(data, len, offset, got);
    }
    Status sync() override { return env_->file_sync(this); }
    void start_writeback(std::uint64_t offset, std::uint64_t len) override {
        env_->writeback_bytes_.fetch_add(len, std::memory_order_relaxed);
        base_->start_writeback(offset, len);
    }
    Status size(std::uint64_t* out) override {
        if (stale()) return stale_handle(node_->path);
        return base_->size(out);
    }
    Status truncate(std::uint64_t length) override { return env_->file_truncate(this, length); }

    bool stale() const { return epoch_ != env_->epoch_.load(); }
    File* base() { return base_.get(); }
    Node* node() { return node_.get(); }

private:
    FaultInjectionEnv* env_;
    std::unique_ptr<File> base_;
    std::shared_ptr<Node> node_;
    std::uint64_t epoch_;
};

FaultInjectionEnv::FaultInjectionEnv(Env* base) : base_(base) {}
FaultInjectionEnv::~FaultInjectionEnv() = default;

// ---------------------------------------------------------------- Env

Status FaultInjectionEnv::open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) {
    std::lock_guard lock(mu_);
    const std::string p = normalize(path);
    if (is_hidden(p)) return Status::error(ENOENT, "open " + p);
    const bool existed = mode != OpenMode::kRead && base_->exists(p);
    std::unique_ptr<File> base_file;
    HIODSFS_TRY(base_->open(p, mode, &base_file));
    std::shared_ptr<Node> node;
    HIODSFS_TRY(node_for(p, base_file.get(), &node));
    if (mode != OpenMode::kRead && !existed) {
        EntryOp op;
        op.kind = EntryOp::kCreate;
        op.path = p;
        op.dirs.insert(parent_of(p));
        pending_.push_back(std::move(op));
    }
    *out = std::make_unique<FaultFile>(this, std::move(base_file), std::move(node), epoch_.load());
    return Status::ok();
}

Status FaultInjectionEnv::unlink(const std::string& path) {
    std::lock_guard lock(mu_);
    const std::string p = normalize(path);
    if (is_hidden(p) || !base_->exists(p)) return Status::error(ENOENT, "unlink " + p);
    // Kept under a hidden name until the directory is synced, so a crash
    // before that can bring it back.
    const std::string hidden = hidden_name(p);
    Status st = base_->rename(p, hidden);
    if (!st) return Status::error(st.err(), "unlink " + p + ": " + st.message());
    move_node(p, hidden);
    EntryOp op;
    op.kind = EntryOp::kUnlink;
    op.path = p;
    op.hidden = hidden;
    op.dirs.insert(parent_of(p));
    pending_.push_back(std::move(op));
    return Status::ok();
}

Status FaultInjectionEnv::rename(const std::string& from, const std::string& to) {
    std::lock_guard lock(mu_);
    const std::string f = normalize(from);
    const std::string t = normalize(to);
    if (is_hidden(f) || is_hidden(t) || !base_->exists(f)) {
        return Status::error(ENOENT, "rename " + f + " to " + t);
    }
    if (f == t) return Status::ok();
    std::string hidden;
    if (base_->exists(t)) {
        // Keep the replaced file so an undone rename can restore it.
        hidden = hidden_name(t);
        Status st = base_->rename(t, hidden);
        if (!st) return Status::error(st.err(), "rename " + f + " to " + t + ": " + st.message());
        move_node(t, hidden);
    }
    Status st = base_->rename(f, t);
    if (!st) {
        if (!hidden.empty() && base_->rename(hidden, t)) move_node(hidden, t);
        return st;
    }
    move_node(f, t);
    EntryOp op;
    op.kind = EntryOp::kRename;
    op.path = t;
    op.from = f;
    op.hidden = hidden;
    op.dirs.insert(parent_of(f));
    op.dirs.insert(parent_of(t));
    pending_.push_back(std::move(op));
    return Status::ok();
}

Status FaultInjectionEnv::mkdir(const std::string& path) {
    std::lock_guard lock(mu_);
    return base_->mkdir(normalize(path));
}

Status FaultInjectionEnv::list_dir(const std::string& path, std::vector<std::string>* names) {
    std::lock_guard lock(mu_);
    HIODSFS_TRY(base_->list_dir(normalize(path), names));
    std::erase_if(*names, [](const std::string& n) { return is_hidden(n); });
    return Status::ok();
}

bool FaultInjectionEnv::exists(const std::string& path) {
    std::lock_guard lock(mu_);
    const std::string p = normalize(path);
    return !is_hidden(p) && base_->exists(p);
}

Status FaultInjectionEnv::sync_dir(const std::string& path) {
    std::lock_guard lock(mu_);
    const std::string d = normalize(path);
    if (take_sync_fault()) {
        last_injected_ = "fsync directory " + d + ": injected fault";
        return Status::error(sync_fault_err_, last_injected_);
    }
    if (forward_syncs_) HIODSFS_TRY(base_->sync_dir(d));
    Status result;
    std::vector<EntryOp> still_pending;
    for (EntryOp& op : pending_) {
        op.dirs.erase(d);
        if (op.dirs.empty()) {
            Status st = entry_durable(op);
            if (!st && result) result = st;
        } else {
            still_pending.push_back(std::move(op));
        }
    }
    pending_ = std::move(still_pending);
    return result;
}

// ---------------------------------------------------------------- files

void FaultInjectionEnv::set_before_write(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    before_write_ = std::move(hook);
}

Status FaultInjectionEnv::file_pwrite(FaultFile* f, const void* data, std::size_t len,
                                      std::uint64_t offset) {
    std::function<void()> hook;
    {
        std::lock_guard lock(mu_);
        hook = before_write_;
    }
    if (hook) hook();
    std::lock_guard lock(mu_);
    Node* node = f->node();
    if (f->stale()) return stale_handle(node->path);
    const std::string where = "pwrite " + node->path + " at offset " + std::to_string(offset);

    std::size_t to_write = len;
    Status injected;
    if (take_write_fault()) {
        switch (write_fault_kind_) {
            case WriteFault::kNoSpace:
                to_write = 0;
                injected = Status::error(ENOSPC, where + ": injected ENOSPC");
                break;
            case WriteFault::kIoError:
                to_write = 0;
                injected = Status::error(EIO, where + ": injected EIO");
                break;
            case WriteFault::kNotPermitted:
                to_write = 0;
                injected = Status::error(EPERM, where + ": injected EPERM");
                break;
            case WriteFault::kShortWrite:
                to_write = len / 2;
                injected = Status::error(EIO, where + ": injected short write (" +
                                                  std::to_string(to_write) + " of " +
                                                  std::to_string(len) + " bytes)");
                break;
        }
        last_injected_ = injected.message();
    }
    if (to_write == 0) return injected;

    Node::Undo undo;
    undo.offset = offset;
    undo.len = to_write;
    undo.size_before = node->size;
    if (offset < node->size) {
        // Overwrites durable-or-not bytes: remember them for the undo.
        const std::uint64_t n = std::min<std::uint64_t>(to_write, node->size - offset);
        undo.old.resize(n);
        std::size_t got = 0;
        HIODSFS_TRY(f->base()->pread(undo.old.data(), n, offset, &got));
        undo.old.resize(got);
    }
    // Consecutive appends merge into one entry: a crash keeps a byte prefix
    // of them either way, and the log stays small.
    if (undo.old.empty() && offset >= node->size && !node->log.empty()) {
        Node::Undo& last = node->log.back();
        if (!last.is_truncate && last.offset + last.len == offset && offset == node->size) {
            last.len += to_write;
            undo.len = 0;
        }
    }
    if (undo.len > 0) node->log.push_back(std::move(undo));

    Status st = f->base()->pwrite(data, to_write, offset);
    if (st) node->size = std::max<std::uint64_t>(node->size, offset + to_write);
    if (!injected.is_ok()) return injected;
    return st;
}

Status FaultInjectionEnv::file_sync(FaultFile* f) {
    std::lock_guard lock(mu_);
    Node* node = f->node();
    if (f->stale()) return stale_handle(node->path);
    if (take_sync_fault()) {
        last_injected_ = "fdatasync " + node->path + ": injected fault";
        return Status::error(sync_fault_err_, last_injected_);
    }
    if (forward_syncs_) HIODSFS_TRY(f->base()->sync());
    node->log.clear();
    return Status::ok();
}

Status FaultInjectionEnv::file_truncate(FaultFile* f, std::uint64_t length) {
    std::lock_guard lock(mu_);
    Node* node = f->node();
    if (f->stale()) return stale_handle(node->path);
    Node::Undo undo;
    undo.is_truncate = true;
    undo.offset = length;
    undo.size_before = node->size;
    if (length < node->size) {
        undo.old.resize(node->size - length);
        std::size_t got = 0;
        HIODSFS_TRY(f->base()->pread(undo.old.data(), undo.old.size(), length, &got));
        undo.old.resize(got);
    }
    node->log.push_back(std::move(undo));
    Status st = f->base()->truncate(length);
    if (st) node->size = length;
    return st;
}

// ---------------------------------------------------------------- faults

void FaultInjectionEnv::fail_write_at(std::uint64_t n, WriteFault kind, bool permanent) {
    std::lock_guard lock(mu_);
    write_fault_at_ = writes_ + n;
    write_fault_kind_ = kind;
    write_fault_permanent_ = permanent;
}

void FaultInjectionEnv::fail_sync_at(std::uint64_t n, int err, bool permanent) {
    std::lock_guard lock(mu_);
    sync_fault_at_ = syncs_ + n;
    sync_fault_err_ = err;
    sync_fault_permanent_ = permanent;
}

void FaultInjectionEnv::clear_faults() {
    std::lock_guard lock(mu_);
    write_fault_at_.reset();
    sync_fault_at_.reset();
}

std::uint64_t FaultInjectionEnv::write_count() const {
    std::lock_guard lock(mu_);
    return writes_;
}

std::uint64_t FaultInjectionEnv::writeback_bytes() const { return writeback_bytes_.load(); }

std::uint64_t FaultInjectionEnv::sync_count() const {
    std::lock_guard lock(mu_);
    return syncs_;
}

std::uint64_t FaultInjectionEnv::injected_faults() const {
    std::lock_guard lock(mu_);
    return injected_;
}

std::string FaultInjectionEnv::last_injected_fault() const {
    std::lock_guard lock(mu_);
    return last_injected_;
}

void FaultInjectionEnv::set_forward_syncs(bool forward) {
    std::lock_guard lock(mu_);
    forward_syncs_ = forward;
}

std::uint64_t FaultInjectionEnv::unsynced_bytes() const {
    std::lock_guard lock(mu_);
    std::uint64_t total = 0;
    for (const auto& [path, node] : nodes_) {
        for (const Node::Undo& u : node->log) total += u.is_truncate ? 0 : u.len;
    }
    return total;
}

bool FaultInjectionEnv::take_write_fault() {
    const std::uint64_t index = writes_++;
    if (!write_fault_at_) return false;
    const bool hit =
        index == *write_fault_at_ || (write_fault_permanent_ && index > *write_fault_at_);
    if (hit) ++injected_;
    return hit;
}

bool FaultInjectionEnv::take_sync_fault() {
    const std::uint64_t index = syncs_++;
    if (!sync_fault_at_) return false;
    const bool hit = index == *sync_fault_at_ || (sync_fault_permanent_ && index > *sync_fault_at_);
    if (hit) ++injected_;
    return hit;
}

// ---------------------------------------------------------------- bookkeeping

Status FaultInjectionEnv::node_for(const std::string& path, File* base_file,
                                   std::shared_ptr<Node>* out) {
    auto it = nodes_.find(path);
    if (it != nodes_.end()) {
        *out = it->second;
        return Status::ok();
    }
    auto node = std::make_shared<Node>();
    node->path = path;
    HIODSFS_TRY(base_file->size(&node->size));
    nodes_.emplace(path, node);
    *out = std::move(node);
    return Status::ok();
}

std::string FaultInjectionEnv::hidden_name(const std::string& path) {
    return path + kHiddenMarker + std::to_string(++hidden_counter_);
}

void FaultInjectionEnv::move_node(const std::string& from, const std::string& to) {
    auto it = nodes_.find(from);
    if (it == nodes_.end()) return;
    std::shared_ptr<Node> node = std::move(it->second);
    nodes_.erase(it);
    node->path = to;
    nodes_[to] = std::move(node);
}

Status FaultInjectionEnv::entry_durable(EntryOp& op) {
    // The unlink or replacement is now permanent: really delete the kept file.
    if (op.hidden.empty()) return Status::ok();
    nodes_.erase(op.hidden);
    return base_->unlink(op.hidden);
}

// ---------------------------------------------------------------- crash

Status FaultInjectionEnv::drop_unsynced(std::uint64_t seed) { return crash(seed, false); }

Status FaultInjectionEnv::drop_all_unsynced() { return crash(0, true); }

Status FaultInjectionEnv::crash(std::uint64_t seed, bool worst_case) {
    std::lock_guard lock(mu_);
    std::mt19937_64 rng(seed);
    auto pick = [&rng](std::uint64_t lo, std::uint64_t hi) {  // uniform in [lo, hi]
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    Status result;
    auto note = [&result](const Status& st) {
        if (!st && result) result = st;
    };

    // File data first, at the paths the files have now; std::map order keeps
    // the random choices reproducible for a seed.
    for (auto& [path, node] : nodes_) {
        if (node->log.empty()) continue;
        const std::size_t n = node->log.size();
        // Writes [0, keep) survive; write `keep` may survive in part.
        const std::size_t keep = worst_case ? 0 : pick(0, n);
        std::unique_ptr<File> file;
        Status st = base_->open(path, OpenMode::kReadWrite, &file);
        if (!st) {
            note(st);
            continue;
        }
        for (std::size_t i = n; i-- > keep;) {
            const Node::Undo& u = node->log[i];
            std::uint64_t kept = 0;  // bytes of this write that survive
            if (i == keep && !worst_case && !u.is_truncate) kept = pick(0, u.len - 1);
            if (kept < u.old.size()) {
                note(file->pwrite(u.old.data() + kept, u.old.size() - kept, u.offset + kept));
            }
            std::uint64_t length = u.size_before;
            if (kept > 0) length = std::max(length, u.offset + kept);
            note(file->truncate(length));
        }
        node->log.clear();
    }

    // Then directory entries: ops [0, keep) survive, the rest are undone
    // newest first so each undo sees the state its op left behind.
    const std::size_t m = pending_.size();
    const std::size_t keep = worst_case ? 0 : pick(0, m);
    for (std::size_t i = m; i-- > keep;) {
        const EntryOp& op = pending_[i];
        switch (op.kind) {
            case EntryOp::kCreate:
                note(base_->unlink(op.path));
                break;
            case EntryOp::kRename:
                note(base_->rename(op.path, op.from));
                if (!op.hidden.empty()) note(base_->rename(op.hidden, op.path));
                break;
            case EntryOp::kUnlink:
                note(base_->rename(op.hidden, op.path));
                break;
        }
    }
    for (std::size_t i = 0; i < keep; ++i) note(entry_durable(pending_[i]));
    pending_.clear();

    // Everything on disk now counts as durable; sizes are re-read on open.
    nodes_.clear();
    write_fault_at_.reset();
    sync_fault_at_.reset();
    epoch_.fetch_add(1);
    return result;
}

}  // namespace hiodsfs
