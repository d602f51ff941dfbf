// The Checker's run through its stages, and its reporting: problems found
// and repaired, progress, and the names of what a problem touches (paths,
// file ranges, the files a chunk holds).
#include "fsck/checker.h"

#include <cerrno>
#include <string>
#include <utility>

#include "common/name_escape.h"

namespace hiodsfs::fsck {

Status Checker::run() {
    HIODSFS_TRY(load_namespace());
    HIODSFS_TRY(check_namespace());
    HIODSFS_TRY(load_chunks());
    HIODSFS_TRY(check_extents());
    HIODSFS_TRY(check_chunks());
    HIODSFS_TRY(check_dirty());
    HIODSFS_TRY(check_xattrs());
    HIODSFS_TRY(check_counters());
    return Status::ok();
}

void Checker::problem(std::string what, bool repaired) {
    rep_.problems.push_back(FsckProblem{std::move(what), repaired});
}

// Runs a repair if repairing; the problem is reported as repaired when it worked.
Status Checker::fix(std::string what, const std::function<Status()>& repair) {
    if (!repair_) {
        problem(std::move(what), false);
        rep_.problems.back().repairable = true;
        return Status::ok();
    }
    Status st = repair();
    if (st.err() == EUCLEAN) {  // could not be repaired, but nothing else is wrong
        problem(what + " (not repaired: " + st.message() + ")", false);
        return Status::ok();
    }
    HIODSFS_TRY(st);
    problem(std::move(what), true);
    return Status::ok();
}

void Checker::progress(std::string_view phase, std::uint64_t done, std::uint64_t total) {
    if (o_.progress && (++progress_calls_ % 256 == 0 || done == total)) o_.progress(phase, done, total);
}

// "/a/b" for an inode reachable through entries, else "inode N"; each
// name escaped as `ls -b` does (common/name_escape.h), since users choose them.
std::string Checker::path_of(InodeId ino) {
    if (ino == kRootInode) return "/";
    std::string path;
    InodeId cur = ino;
    for (int depth = 0; depth < 4096 && cur != kRootInode; ++depth) {
        auto it = name_of_.find(cur);
        if (it == name_of_.end()) return "inode " + u(ino) + " (not linked)";
        const Entry& e = entries_[it->second];
        path = "/" + escape_name(e.name) + path;
        cur = e.parent;
    }
    if (cur != kRootInode) return "inode " + u(ino) + " (in a directory loop)";
    return path;
}

void Checker::index_names() {
    name_of_.clear();
    for (std::size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].live) name_of_.emplace(entries_[i].v.ino, i);
}

std::string Checker::range(const Use& use) {
    return path_of(use.ino) + " bytes " + u(use.start) + "-" + u(use.start + use.length - 1);
}

std::string Checker::chunk_users(ChunkId id) {
    auto it = uses_.find(id);
    if (it == uses_.end() || it->second.empty()) return "no file";
    std::string s;
    for (std::size_t i = 0; i < it->second.size(); ++i) s += (i ? ", " : "") + range(it->second[i]);
    auto c = chunks_.find(id);
    if (c != chunks_.end() && c->second.counted > it->second.size())
        s += " and " + u(c->second.counted - it->second.size()) + " more";
    return s;
}

}  // namespace hiodsfs::fsck
