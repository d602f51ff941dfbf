// The Checker's first stage, the namespace: inodes, directory entries and
// orphans loaded; missing inodes made again, entries checked against the
// inodes they name, every inode reachable from / (else linked into
// /lost+found), link counts, directory parents and mapped bytes; and the
// extended attributes of inodes that are gone.
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/name_escape.h"
#include "fsck/checker.h"
#include "meta/extent_map.h"
#include "meta/keys.h"

namespace hiodsfs::fsck {
namespace {

constexpr const char* kLostFound = "lost+found";

const char* type_name(std::uint32_t mode) {
    switch (mode & S_IFMT) {
        case S_IFREG: return "file";
        case S_IFDIR: return "directory";
        case S_IFLNK: return "symlink";
        case S_IFIFO: return "fifo";
        case S_IFSOCK: return "socket";
        case S_IFCHR: return "character device";
        case S_IFBLK: return "block device";
        default: return "inode of unknown type";
    }
}

}  // namespace

Status Checker::store_inode(InodeId ino, const InodeInfo& in) {
    return put_inode(t_, ino, in.r, in.target);
}

Status Checker::put_entry(const Entry& e) {
    return t_.put(Db::kDirents, key_u64_str(e.parent, e.name), encode(e.v));
}

Status Checker::del_entry(Entry& e) {
    e.live = false;
    return t_.del(Db::kDirents, key_u64_str(e.parent, e.name));
}

InodeRecord Checker::new_record(std::uint32_t mode, InodeId parent) {
    InodeRecord r;
    r.mode = mode;
    r.parent = S_ISDIR(mode) ? parent : 0;
    struct timespec now {};
    clock_gettime(CLOCK_REALTIME, &now);
    r.atime_s = r.mtime_s = r.ctime_s = now.tv_sec;
    r.atime_ns = r.mtime_ns = r.ctime_ns = static_cast<std::uint32_t>(now.tv_nsec);
    return r;
}

// /lost+found, made when first needed.
Status Checker::lost_found(InodeId* out) {
    if (lost_found_ != 0) {
        *out = lost_found_;
        return Status::ok();
    }
    for (const Entry& e : entries_) {
        if (e.live && e.parent == kRootInode && e.name == kLostFound) {
            auto it = inodes_.find(e.v.ino);
            if (it == inodes_.end() || !S_ISDIR(it->second.r.mode))
                return Status::error(EUCLEAN, "/lost+found exists and is not a directory");
            *out = lost_found_ = e.v.ino;
            return Status::ok();
        }
    }
    InodeId ino = allocate_ino();
    InodeInfo in;
    in.r = new_record(S_IFDIR | 0700, kRootInode);
    in.r.nlink = 2;
    in.reached = true;
    in.quiet_fix = true;
    HIODSFS_TRY(store_inode(ino, in));
    inodes_.emplace(ino, in);
    t_.super().counters.inode_count += 1;
    InodeInfo& root = inodes_.at(kRootInode);
    root.r.nlink += 1;
    HIODSFS_TRY(store_inode(kRootInode, root));
    Entry e{kRootInode, kLostFound, DirentValue{ino, S_IFDIR}, true};
    HIODSFS_TRY(put_entry(e));
    entries_.push_back(e);
    *out = lost_found_ = ino;
    return Status::ok();
}

// Links ino into /lost+found as "#ino".
Status Checker::link_lost(InodeId ino) {
    InodeId lf = 0;
    HIODSFS_TRY(lost_found(&lf));
    InodeInfo& in = inodes_.at(ino);
    Entry e{lf, "#" + u(ino), DirentValue{ino, in.r.mode & S_IFMT}, true};
    HIODSFS_TRY(put_entry(e));
    entries_.push_back(e);
    if (S_ISDIR(in.r.mode)) {
        in.r.parent = lf;
        HIODSFS_TRY(store_inode(ino, in));
    }
    return Status::ok();
}

Status Checker::load_namespace() {
    InodeId max_ino = 0;
    {
        Cursor c = t_.cursor(Db::kInodes);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeId ino = 0;
            if (!parse_key_u64(c.key(), &ino)) {
                bad_keys_.emplace_back(Db::kInodes, std::string(c.key()));
                continue;
            }
            max_ino = std::max(max_ino, ino);
            InodeInfo in;
            if (!decode(c.value(), &in.r, &in.target)) {
                damaged_inodes_.push_back(ino);  // treated as missing below
                continue;
            }
            inodes_.emplace(ino, std::move(in));
        }
        HIODSFS_TRY(c.status());
    }
    {
        Cursor c = t_.cursor(Db::kDirents);
        for (bool ok = c.first(); ok; ok = c.next()) {
            Entry e;
            std::string_view name;
            if (!parse_key_u64_str(c.key(), &e.parent, &name) || name.empty() || !decode(c.value(), &e.v)) {
                bad_keys_.emplace_back(Db::kDirents, std::string(c.key()));
                continue;
            }
            e.name.assign(name);
            entries_.push_back(std::move(e));
        }
        HIODSFS_TRY(c.status());
    }
    {
        Cursor c = t_.cursor(Db::kOrphans);
        for (bool ok = c.first(); ok; ok = c.next()) {
            InodeId ino = 0;
            if (!parse_key_u64(c.key(), &ino)) {
                bad_keys_.emplace_back(Db::kOrphans, std::string(c.key()));
                continue;
            }
            orphans_.push_back(ino);
            if (!c.value().empty())  // the reclaimer set it aside (engine/quarantine.h)
                rep_.notes.push_back("freeing deleted inode " + u(ino) +
                                     " was set aside after it failed (" +
                                     std::string(c.value()) + "); the next mount tries again");
        }
        HIODSFS_TRY(c.status());
    }
    {
        // Per inode: mapped bytes and where its map ends (for inodes that
        // must be made again); the chunk side is checked later.
        std::vector<MappedExtent> block;
        HIODSFS_TRY(for_each_extent_block(t_, [&](const StoredBlock& b) {
            block.clear();
            if (!b.key_ok || !decode_extent_block(b.start, b.value, &block)) return Status::ok();
            auto& x = extent_sums_[b.ino];
            for (const MappedExtent& m : block) {
                x.first += m.e.length;
                x.second = std::max(x.second, m.end());
            }
            return Status::ok();
        }));
    }
    rep_.inodes = inodes_.size() + damaged_inodes_.size();
    rep_.dirents = entries_.size();
    rep_.orphans = orphans_.size();
    for (auto& [ino, sums] : extent_sums_) {
        auto it = inodes_.find(ino);
        if (it == inodes_.end()) continue;
        it->second.has_extents = true;
        it->second.mapped = sums.first;
        it->second.map_end = sums.second;
    }
    // Inode numbers handed out must be past every inode, before a repair makes one.
    SuperState& s = t_.super();
    if (s.next_ino <= max_ino) {
        HIODSFS_TRY(fix("next inode number is " + u(s.next_ino) + " but inode " + u(max_ino) +
                            " exists (new files would reuse it)",
                        [&] {
                            s.next_ino = max_ino + 1;
                            return Status::ok();
                        }));
    }
    for (auto& [db, key] : bad_keys_) {
        HIODSFS_TRY(fix(std::string(db == Db::kInodes    ? "inode"
                                    : db == Db::kDirents ? "directory entry"
                                                         : "orphan") +
                            " record with a damaged key or value",
                        [&, db = db, key = key] { return t_.del(db, key); }));
    }
    return Status::ok();
}

Status Checker::check_namespace() {
    // Inodes that entries, child entries or extents name but that are gone.
    std::map<InodeId, std::uint32_t> wanted;  // ino -> type to make it with (0: unknown yet)
    auto want = [&](InodeId ino, std::uint32_t type) {
        if (inodes_.count(ino) != 0) return;
        auto& w = wanted[ino];
        if (w == 0) w = type;
    };
    want(kRootInode, S_IFDIR);
    for (const Entry& e : entries_) {
        want(e.parent, S_IFDIR);
        want(e.v.ino, e.v.type & S_IFMT);
    }
    for (const auto& [ino, sums] : extent_sums_) want(ino, S_IFREG);
    for (InodeId ino : damaged_inodes_) want(ino, 0);
    for (auto [ino, type] : wanted) {
        std::string what = std::find(damaged_inodes_.begin(), damaged_inodes_.end(), ino) !=
                                   damaged_inodes_.end()
                               ? "inode " + u(ino) + " record is damaged"
                               : "inode " + u(ino) + " is missing";
        auto sums = extent_sums_.find(ino);
        bool has_children = std::any_of(entries_.begin(), entries_.end(),
                                         [&](const Entry& e) { return e.parent == ino; });
        if (sums != extent_sums_.end()) type = S_IFREG;
        if (has_children || ino == kRootInode) type = S_IFDIR;
        if (type == S_IFREG || type == S_IFDIR) {
            what += sums != extent_sums_.end() ? " (its file map survives)"
                    : has_children             ? " (its entries survive)"
                                               : " (entries name it)";
            HIODSFS_TRY(fix(what + ": made again as a " + type_name(type) + " owned by root",
                            [&, ino = ino, type = type] {
                                InodeInfo in;
                                in.r = new_record(type == S_IFDIR ? S_IFDIR | 0700 : S_IFREG | 0600,
                                                  kRootInode);
                                if (sums != extent_sums_.end()) {
                                    in.has_extents = true;
                                    in.mapped = in.r.mapped = sums->second.first;
                                    in.map_end = in.r.size = sums->second.second;
                                }
                                in.quiet_fix = true;
                                inodes_.emplace(ino, in);
                                return store_inode(ino, in);
                            }));
        } else {
            // A lost symlink or device node: nothing of it is left to keep.
            for (Entry& e : entries_) {
                if (!e.live || e.v.ino != ino) continue;
                HIODSFS_TRY(fix(what + ": entry " + u(e.parent) + "/" + escape_name(e.name) +
                                    " points at it; the entry is removed",
                                [&] { return del_entry(e); }));
            }
        }
    }

    // Entries: the parent is a directory, the type matches the child.
    for (Entry& e : entries_) {
        if (!e.live) continue;
        auto p = inodes_.find(e.parent);
        auto c = inodes_.find(e.v.ino);
        if (c == inodes_.end()) continue;  // reported above
        if (p != inodes_.end() && !S_ISDIR(p->second.r.mode)) {
            HIODSFS_TRY(fix("entry " + escape_name(e.name) + " (inode " + u(e.v.ino) +
                                ") is filed under " + type_name(p->second.r.mode) + " " +
                                u(e.parent) +
                                ", which is not a directory; it is moved to /lost+found",
                            [&] { return del_entry(e); }));
            continue;
        }
        std::uint32_t type = c->second.r.mode & S_IFMT;
        if ((e.v.type & S_IFMT) != type) {
            HIODSFS_TRY(fix("entry " + escape_name(e.name) + " in directory " + u(e.parent) +
                                " says its inode " + u(e.v.ino) + " is a " +
                                type_name(e.v.type) + ", but it is a " + type_name(type),
                            [&] {
                                e.v.type = type;
                                return put_entry(e);
                            }));
        }
    }
    // A directory has one entry (no hard links to directories).
    {
        std::unordered_map<InodeId, std::size_t> first;
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            Entry& e = entries_[i];
            if (!e.live || !S_ISDIR(e.v.type)) continue;
            auto [it, fresh] = first.emplace(e.v.ino, i);
            if (fresh) continue;
            // Keep the entry in the parent the directory names, else the first.
            auto d = inodes_.find(e.v.ino);
            if (d == inodes_.end()) continue;
            Entry* drop = &e;
            if (d->second.r.parent == e.parent && entries_[it->second].parent != e.parent) {
                drop = &entries_[it->second];
                it->second = i;
            }
            HIODSFS_TRY(fix("directory " + u(e.v.ino) + " has a second entry " +
                                escape_name(drop->name) + " in directory " + u(drop->parent) +
                                "; the extra entry is removed",
                            [&] { return del_entry(*drop); }));
        }
    }

    // Reachability from the root.
    for (InodeId ino : orphans_) {
        auto it = inodes_.find(ino);
        if (it == inodes_.end()) {
            HIODSFS_TRY(fix("orphan record for inode " + u(ino) + ", which does not exist",
                            [&] { return t_.del(Db::kOrphans, key_u64(ino)); }));
        } else {
            it->second.orphan = true;
        }
    }
    std::unordered_multimap<InodeId, std::size_t> children;
    std::unordered_set<InodeId> has_entry;
    auto index_children = [&] {
        children.clear();
        has_entry.clear();
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            if (!entries_[i].live) continue;
            children.emplace(entries_[i].parent, i);
            has_entry.insert(entries_[i].v.ino);
        }
    };
    index_children();
    auto reach = [&](InodeId from) {
        std::vector<InodeId> todo{from};
        inodes_.at(from).reached = true;
        while (!todo.empty()) {
            InodeId d = todo.back();
            todo.pop_back();
            auto [a, b] = children.equal_range(d);
            for (auto it = a; it != b; ++it) {
                auto c = inodes_.find(entries_[it->second].v.ino);
                if (c == inodes_.end() || c->second.reached) continue;
                c->second.reached = true;
                todo.push_back(c->first);
            }
        }
    };
    if (inodes_.count(kRootInode) != 0) reach(kRootInode);
    index_names();
    for (int round = 0; round < 2; ++round) {
        for (auto& [ino, in] : inodes_) {
            if (in.reached || in.orphan) continue;
            // First the tops of unreachable trees; their contents come along.
            if (round == 0 && has_entry.count(ino) != 0) continue;
            in.lost = true;
            HIODSFS_TRY(fix(std::string(type_name(in.r.mode)) + " inode " + u(ino) + " (" +
                                u(in.r.size) + " bytes) is not reachable from /; it is linked "
                                "as /lost+found/#" + u(ino),
                            [&, ino = ino] { return link_lost(ino); }));
            if (repair_) index_children();
            reach(ino);
        }
    }
    index_names();
    for (auto& [ino, in] : inodes_) {
        if (!in.orphan) continue;
        if (has_entry.count(ino) != 0) {
            HIODSFS_TRY(fix("inode " + u(ino) + " (" + path_of(ino) +
                                ") is queued to be freed but is still linked; it is kept",
                            [&, ino = ino] {
                                in.orphan = false;
                                return t_.del(Db::kOrphans, key_u64(ino));
                            }));
        } else {
            rep_.notes.push_back("inode " + u(ino) +
                                 " was unlinked while open; it is freed at the next mount");
        }
    }

    // Link counts, directory parents, mapped bytes.
    std::unordered_map<InodeId, std::uint64_t> links, subdirs;
    std::unordered_map<InodeId, InodeId> dir_parent;
    for (const Entry& e : entries_) {
        if (!e.live) continue;
        links[e.v.ino] += 1;
        if (S_ISDIR(e.v.type)) {
            subdirs[e.parent] += 1;
            dir_parent[e.v.ino] = e.parent;
        }
    }
    for (auto& [ino, in] : inodes_) {
        const bool dir = S_ISDIR(in.r.mode);
        std::uint64_t want = dir ? 2 + subdirs[ino] : links[ino];
        if (in.orphan) want = 0;
        bool dirty = false;
        if (in.r.nlink != want && !(in.lost && !repair_)) {  // linking it fixes it
            if (in.quiet_fix) {
                in.r.nlink = static_cast<std::uint32_t>(want);
                dirty = true;
            } else {
                HIODSFS_TRY(fix(std::string(type_name(in.r.mode)) + " " + path_of(ino) +
                                    " (inode " + u(ino) + ") has link count " +
                                    u(in.r.nlink) + ", should be " + u(want),
                                [&] {
                                    in.r.nlink = static_cast<std::uint32_t>(want);
                                    dirty = true;
                                    return Status::ok();
                                }));
            }
        }
        if (dir && !in.orphan) {
            InodeId parent = ino == kRootInode ? kRootInode : dir_parent[ino];
            if (parent != 0 && in.r.parent != parent) {
                HIODSFS_TRY(fix("directory " + path_of(ino) + " (inode " + u(ino) +
                                    ") names " + u(in.r.parent) + " as its parent, but is "
                                    "filed in " + u(parent),
                                [&] {
                                    in.r.parent = parent;
                                    dirty = true;
                                    return Status::ok();
                                }));
            }
        }
        if (in.r.mapped != in.mapped) {
            HIODSFS_TRY(fix(std::string(type_name(in.r.mode)) + " " + path_of(ino) +
                                " (inode " + u(ino) + ") counts " + u(in.r.mapped) +
                                " mapped bytes, its extents hold " + u(in.mapped),
                            [&] {
                                in.r.mapped = in.mapped;
                                dirty = true;
                                return Status::ok();
                            }));
        }
        if (in.has_extents && !S_ISREG(in.r.mode)) {
            problem(std::string(type_name(in.r.mode)) + " " + path_of(ino) + " (inode " +
                        u(ino) + ") has a file map; only regular files have one",
                    false);
        }
        if (dirty && repair_) HIODSFS_TRY(store_inode(ino, in));
    }
    return Status::ok();
}

Status Checker::check_xattrs() {
    std::vector<std::pair<std::string, std::string>> drop;  // key, why
    Cursor c = t_.cursor(Db::kXattrs);
    for (bool ok = c.first(); ok; ok = c.next()) {
        ++rep_.xattrs;
        InodeId ino = 0;
        std::string_view name;
        if (!parse_key_u64_str(c.key(), &ino, &name) || name.empty()) {
            drop.emplace_back(std::string(c.key()), "extended attribute record with a damaged key; it is removed");
        } else if (inodes_.count(ino) == 0) {
            drop.emplace_back(std::string(c.key()),
                              "extended attribute " + escape_name(name) + " belongs to inode " +
                                  u(ino) + ", which does not exist; it is removed");
        }
    }
    HIODSFS_TRY(c.status());
    for (const auto& [k, why] : drop) HIODSFS_TRY(fix(why, [&, k = k] { return t_.del(Db::kXattrs, k); }));
    return Status::ok();
}

}  // namespace hiodsfs::fsck
