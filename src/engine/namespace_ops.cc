// Namespace operations (lookup, create, link, unlink, rename, readdir),
// extended attributes, and what they share with the data path: storing a
// chunk, pins and an inode's release (the helpers that need nothing of the
// engine are in engine/inode_ops.h).
#include "engine/engine_impl.h"

namespace hiodsfs {

// ---------------------------------------------------------------------------
// Chunks and an inode's lifetime

Status EngineImpl::store_chunk(Txn& t, const std::uint8_t* data, std::uint32_t len,
                               const Digest& digest, ExtentRecord* out, SegmentGains* gains,
                               const std::uint32_t* crc, const ChunkPayload* payload) {
    auto& c = t.super().counters;
    ChunkId same = 0;
    ChunkRecord same_rec;
    // The bucket the lookup reads is the one a new chunk is listed in.
    thread_local FingerprintSlot slot;
    HIODSFS_TRY(find_indexed_chunk(t, digest, &same, &same_rec, &slot));
    if (same != 0) {
        HIODSFS_TRY(chunk_ref(t, same, +1));
        c.dedup_hits += 1;
        *out = ExtentRecord{same, 0, len};
        return Status::ok();
    }
    ChunkId id = t.super().next_chunk++;
    ChunkLocation loc;
    if (cipher_) {
        // An encrypted store's every chunk is sealed, bound to its id.
        thread_local std::vector<std::uint8_t> sealed;
        HIODSFS_TRY(seal_chunk(id, data, len, payload, &sealed));
        HIODSFS_TRY(segs_->append(id, sealed.data(), static_cast<std::uint32_t>(sealed.size()),
                                  crc32c(sealed.data(), sealed.size()), true, &loc));
    } else if (payload != nullptr && payload->encoded) {
        HIODSFS_TRY(segs_->append(id, payload->data, payload->length, payload->crc, true, &loc));
    } else {
        HIODSFS_TRY(crc != nullptr ? segs_->append(id, data, len, *crc, false, &loc)
                                   : segs_->append(id, data, len, &loc));
    }
    t.dead_if_aborted(loc.length);
    ChunkRecord rec;
    rec.length = len;
    rec.set_location(loc);
    if (payload != nullptr && payload->encoded) rec.codec = payload->codec;
    rec.sealed = cipher_ != nullptr;
    rec.set_refs(1);
    rec.flags = ChunkRecord::kIndexed;
    rec.digest = digest;
    HIODSFS_TRY(put_chunk(t, id, rec));
    HIODSFS_TRY(index_chunk(t, id, digest, &slot));
    if (gains == nullptr) {
        HIODSFS_TRY(add_segment_live(t, loc.segment, loc.length));
    } else if (!gains->empty() && gains->back().first == loc.segment) {
        gains->back().second += loc.length;
    } else {
        gains->emplace_back(loc.segment, loc.length);
    }
    c.stored_bytes += loc.length;
    c.content_bytes += len;
    c.chunk_count += 1;
    *out = ExtentRecord{id, 0, len};
    return Status::ok();
}

bool EngineImpl::pinned(InodeId ino) {
    std::lock_guard<std::mutex> l(pins_mu_);
    return pins_.count(ino) != 0;
}

Status EngineImpl::release_inode(Txn& t, InodeId ino, bool* freed) {
    *freed = false;
    if (pinned(ino)) return t.put(Db::kOrphans, key_u64(ino), "");
    HIODSFS_TRY(free_inode(t, ino));
    *freed = true;
    return Status::ok();
}

Status EngineImpl::commit_release(Txn& t, InodeId ino, bool freed) {
    HIODSFS_TRY(t.commit());
    // Only now: a read that does not wait for operations (MetaStore::
    // begin_read) and found the file before this one must still find the
    // bytes its stream holds, and one that takes the stream after this
    // finds the file gone.
    if (freed) streams_.drop(ino, true);
    return Status::ok();
}

// ---------------------------------------------------------------------------
// Namespace

Status EngineImpl::lookup(InodeId parent, std::string_view name, Attr* out) {
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    *out = to_attr(d.ino, in);
    return Status::ok();
}

Status EngineImpl::getattr(InodeId ino, Attr* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::setattr(InodeId ino, const SetAttr& ch, Attr* out) {
    if (ch.valid & SetAttr::kSize) {
        if (ch.size > kMaxFileSize) return Status::error(EFBIG, "file size too large");
        auto s = streams_.get(ino);
        auto l = lock_stream(*s);
        Inode in;
        HIODSFS_TRY(regular_file(ino, &in));
        HIODSFS_TRY(truncate_locked(ino, *s, ch.size));
    }
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    auto now = now_ts();
    if (ch.valid & SetAttr::kMode) in.r.mode = (in.r.mode & S_IFMT) | (ch.mode & 07777);
    if (ch.valid & SetAttr::kUid) in.r.uid = ch.uid;
    if (ch.valid & SetAttr::kGid) in.r.gid = ch.gid;
    if (ch.valid & SetAttr::kAtimeNow) set_time(&in.r.atime_s, &in.r.atime_ns, now);
    else if (ch.valid & SetAttr::kAtime) set_time(&in.r.atime_s, &in.r.atime_ns, ch.atime);
    if (ch.valid & SetAttr::kMtimeNow) set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    else if (ch.valid & SetAttr::kMtime) set_time(&in.r.mtime_s, &in.r.mtime_ns, ch.mtime);
    if (ch.valid & SetAttr::kCtime) set_time(&in.r.ctime_s, &in.r.ctime_ns, ch.ctime);
    else if (ch.valid != 0) set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, ino, in));
    HIODSFS_TRY(t->commit());
    if (out != nullptr) *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::create(InodeId parent, std::string_view name, const NewNode& node, Attr* out) {
    HIODSFS_TRY(check_name(name));
    std::uint32_t type = node.mode & S_IFMT;
    if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO &&
        type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK)
        return Status::error(EINVAL, "unknown file type");
    if (type == S_IFLNK && (node.symlink_target.empty() || node.symlink_target.size() > kMaxSymlink))
        return Status::error(node.symlink_target.empty() ? ENOENT : ENAMETOOLONG, "bad symlink target");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode dir;
    HIODSFS_TRY(load_dir(*t, parent, &dir));
    DirentValue existing;
    bool found = false;
    HIODSFS_TRY(lookup_entry(*t, parent, name, &existing, &found));
    if (found) return Status::error(EEXIST, "entry exists");

    InodeId ino = t->super().next_ino++;
    Inode in;
    in.r.mode = type | (node.mode & 07777);  // all an inode record holds
    in.r.uid = node.uid;
    in.r.gid = node.gid;
    in.r.rdev = (type == S_IFCHR || type == S_IFBLK) ? node.rdev : 0;
    in.r.nlink = type == S_IFDIR ? 2 : 1;
    in.r.parent = type == S_IFDIR ? parent : 0;
    auto now = now_ts();
    set_time(&in.r.atime_s, &in.r.atime_ns, now);
    set_time(&in.r.mtime_s, &in.r.mtime_ns, now);
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now);
    if (type == S_IFLNK) in.target = node.symlink_target;
    HIODSFS_TRY(store_inode(*t, ino, in));
    DirentValue d{ino, type};
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(parent, name), encode(d)));
    for (const auto& [xname, xvalue] : node.xattrs)
        HIODSFS_TRY(t->put(Db::kXattrs, key_u64_str(ino, xname), xvalue));
    HIODSFS_TRY(touch_dir(*t, parent, type == S_IFDIR ? 1 : 0));
    t->super().counters.inode_count += 1;
    if (type == S_IFREG) t->super().counters.file_count += 1;
    HIODSFS_TRY(t->commit());
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::readlink(InodeId ino, std::string* target) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (!S_ISLNK(in.r.mode)) return Status::error(EINVAL, "not a symlink");
    *target = in.target;
    return Status::ok();
}

Status EngineImpl::link(InodeId ino, InodeId new_parent, std::string_view new_name, Attr* out) {
    HIODSFS_TRY(check_name(new_name));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    if (is_dir(in.r.mode)) return Status::error(EPERM, "hard link to a directory");
    if (in.r.nlink == 0) return Status::error(ENOENT, "file was removed");
    if (in.r.nlink >= 65000) return Status::error(EMLINK, "too many links");
    Inode dir;
    HIODSFS_TRY(load_dir(*t, new_parent, &dir));
    DirentValue existing;
    bool found = false;
    HIODSFS_TRY(lookup_entry(*t, new_parent, new_name, &existing, &found));
    if (found) return Status::error(EEXIST, "entry exists");
    in.r.nlink += 1;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    DirentValue d{ino, in.r.mode & S_IFMT};
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), encode(d)));
    HIODSFS_TRY(touch_dir(*t, new_parent, 0));
    HIODSFS_TRY(t->commit());
    *out = to_attr(ino, in);
    return Status::ok();
}

Status EngineImpl::unlink(InodeId parent, std::string_view name) {
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    if (is_dir(in.r.mode)) return Status::error(EISDIR, "is a directory");
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(touch_dir(*t, parent, 0));
    in.r.nlink -= 1;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, d.ino, in));
    bool freed = false;
    if (in.r.nlink == 0) HIODSFS_TRY(release_inode(*t, d.ino, &freed));
    return commit_release(*t, d.ino, freed);
}

Status EngineImpl::rmdir(InodeId parent, std::string_view name) {
    if (name == ".") return Status::error(EINVAL, "cannot remove '.'");
    if (name == "..") return Status::error(ENOTEMPTY, "cannot remove '..'");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    DirentValue d;
    Inode in;
    HIODSFS_TRY(resolve_entry(*t, parent, name, &d, &in));
    if (!is_dir(in.r.mode)) return Status::error(ENOTDIR, "not a directory");
    bool empty = false;
    HIODSFS_TRY(dir_is_empty(*t, d.ino, &empty));
    if (!empty) return Status::error(ENOTEMPTY, "directory not empty");
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(touch_dir(*t, parent, -1));
    in.r.nlink = 0;
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, d.ino, in));
    bool freed = false;
    HIODSFS_TRY(release_inode(*t, d.ino, &freed));
    return commit_release(*t, d.ino, freed);
}

Status EngineImpl::rename(InodeId parent, std::string_view name, InodeId new_parent,
                          std::string_view new_name, unsigned flags) {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return Status::error(EINVAL, "unsupported rename flags");
    if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
        return Status::error(EINVAL, "RENAME_NOREPLACE with RENAME_EXCHANGE");
    if (name.size() > kMaxName) return Status::error(ENAMETOOLONG, "name longer than 255 bytes");
    HIODSFS_TRY(check_name(new_name));
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode pdir, ndir;
    HIODSFS_TRY(load_dir(*t, parent, &pdir));
    HIODSFS_TRY(load_dir(*t, new_parent, &ndir));
    DirentValue src, dst;
    bool have_src = false, have_dst = false;
    HIODSFS_TRY(lookup_entry(*t, parent, name, &src, &have_src));
    if (!have_src) return Status::error(ENOENT, "no such entry");
    HIODSFS_TRY(lookup_entry(*t, new_parent, new_name, &dst, &have_dst));
    if ((flags & RENAME_EXCHANGE) && !have_dst) return Status::error(ENOENT, "exchange target missing");
    if ((flags & RENAME_NOREPLACE) && have_dst) return Status::error(EEXIST, "target exists");
    if (have_dst && dst.ino == src.ino) return Status::ok();  // the same file: nothing to do

    Inode sin;
    HIODSFS_TRY(load_inode(*t, src.ino, &sin));
    bool src_dir = is_dir(sin.r.mode);
    Inode din;
    if (have_dst) HIODSFS_TRY(load_inode(*t, dst.ino, &din));
    bool dst_dir = have_dst && is_dir(din.r.mode);

    // A directory may not move below itself.
    auto check_not_below = [&](InodeId moving, InodeId into) -> Status {
        InodeId cur = into;
        for (int depth = 0; depth < 100000; ++depth) {
            if (cur == moving) return Status::error(EINVAL, "cannot move a directory below itself");
            if (cur == kRootInode) return Status::ok();
            Inode ci;
            HIODSFS_TRY(load_inode(*t, cur, &ci));
            cur = ci.r.parent;
        }
        return Status::error(ELOOP, "directory tree too deep");
    };
    auto now = now_ts();

    if (flags & RENAME_EXCHANGE) {
        if (parent != new_parent) {
            if (src_dir) HIODSFS_TRY(check_not_below(src.ino, new_parent));
            if (dst_dir) HIODSFS_TRY(check_not_below(dst.ino, parent));
        }
        HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(parent, name), encode(dst)));
        HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), encode(src)));
        if (src_dir) sin.r.parent = new_parent;
        if (dst_dir) din.r.parent = parent;
        set_time(&sin.r.ctime_s, &sin.r.ctime_ns, now);
        set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, src.ino, sin));
        HIODSFS_TRY(store_inode(*t, dst.ino, din));
        int delta = (src_dir ? 1 : 0) - (dst_dir ? 1 : 0);
        if (parent != new_parent) {
            HIODSFS_TRY(touch_dir(*t, parent, -delta));
            HIODSFS_TRY(touch_dir(*t, new_parent, delta));
        } else {
            HIODSFS_TRY(touch_dir(*t, parent, 0));
        }
        return t->commit();
    }

    if (src_dir) {
        if (have_dst && !dst_dir) return Status::error(ENOTDIR, "target is not a directory");
        if (parent != new_parent) HIODSFS_TRY(check_not_below(src.ino, new_parent));
    } else if (dst_dir) {
        return Status::error(EISDIR, "target is a directory");
    }
    if (have_dst) {
        if (dst_dir) {
            bool empty = false;
            HIODSFS_TRY(dir_is_empty(*t, dst.ino, &empty));
            if (!empty) return Status::error(ENOTEMPTY, "target directory not empty");
            din.r.nlink = 0;
        } else {
            din.r.nlink -= 1;
        }
        set_time(&din.r.ctime_s, &din.r.ctime_ns, now);
        HIODSFS_TRY(store_inode(*t, dst.ino, din));
    }
    HIODSFS_TRY(t->del(Db::kDirents, key_u64_str(parent, name)));
    HIODSFS_TRY(t->put(Db::kDirents, key_u64_str(new_parent, new_name), encode(src)));
    if (src_dir) sin.r.parent = new_parent;
    set_time(&sin.r.ctime_s, &sin.r.ctime_ns, now);
    HIODSFS_TRY(store_inode(*t, src.ino, sin));
    // Link counts of the parents: a moved directory's ".." changes parent;
    // a replaced directory's entry goes away from new_parent.
    int old_parent_delta = (src_dir && parent != new_parent) ? -1 : 0;
    int new_parent_delta = (src_dir && parent != new_parent ? 1 : 0) - (dst_dir ? 1 : 0);
    if (parent == new_parent) {
        HIODSFS_TRY(touch_dir(*t, parent, old_parent_delta + new_parent_delta));
    } else {
        HIODSFS_TRY(touch_dir(*t, parent, old_parent_delta));
        HIODSFS_TRY(touch_dir(*t, new_parent, new_parent_delta));
    }
    bool freed = false;
    if (have_dst && din.r.nlink == 0) HIODSFS_TRY(release_inode(*t, dst.ino, &freed));
    return commit_release(*t, dst.ino, freed);
}

Status EngineImpl::readdir(InodeId dir, std::vector<DirEntry>* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode d;
    HIODSFS_TRY(load_dir(*t, dir, &d));
    std::string prefix = key_u64(dir);
    Cursor c = t->cursor(Db::kDirents);
    for (bool ok = c.seek(prefix); ok && c.key().starts_with(prefix); ok = c.next()) {
        DirentValue v;
        if (!decode(c.value(), &v)) return Status::error(EUCLEAN, "directory entry record is damaged");
        out->push_back(DirEntry{std::string(c.key().substr(prefix.size())), v.ino, v.type});
    }
    return c.status();
}

Status EngineImpl::parent_of(InodeId dir, InodeId* out) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode d;
    HIODSFS_TRY(load_inode(*t, dir, &d));
    if (!is_dir(d.r.mode)) return Status::error(ENOTDIR, "not a directory");
    *out = dir == kRootInode ? kRootInode : d.r.parent;
    return Status::ok();
}

void EngineImpl::pin(InodeId ino, std::uint64_t count) {
    std::lock_guard<std::mutex> l(pins_mu_);
    pins_[ino] += count;
}

void EngineImpl::unpin(InodeId ino, std::uint64_t count) {
    {
        std::lock_guard<std::mutex> l(pins_mu_);
        auto it = pins_.find(ino);
        if (it == pins_.end()) return;
        if (it->second > count) {
            it->second -= count;
            return;
        }
        pins_.erase(it);
    }
    write_errors_.forget_if_told(ino);
    // The kernel forgot the inode: close its stream, and free it if unlinked.
    std::shared_ptr<Stream> s = streams_.find(ino);
    if (s) {
        auto l = lock_stream(*s);
        (void)close_stream(ino, *s);
    }
    std::unique_ptr<Txn> t;
    if (!meta_->begin(&t)) return;
    Inode in;
    if (!load_inode(*t, ino, &in)) return;
    if (in.r.nlink == 0 && !pinned(ino)) {
        if (free_inode(*t, ino)) (void)t->commit();
    }
    t.reset();
    s.reset();
    streams_.drop(ino);
}

// ---------------------------------------------------------------------------
// Extended attributes

Status EngineImpl::setxattr(InodeId ino, std::string_view name, std::string_view value, int flags) {
    if (name.empty()) return Status::error(EINVAL, "empty attribute name");
    if (name.size() > kMaxXattrName) return Status::error(ERANGE, "attribute name too long");
    if (value.size() > kMaxXattrValue) return Status::error(E2BIG, "attribute value too large");
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string k = key_u64_str(ino, name);
    std::string_view old;
    bool found = false;
    HIODSFS_TRY(t->get(Db::kXattrs, k, &old, &found));
    if ((flags & XATTR_CREATE) && found) return Status::error(EEXIST, "attribute exists");
    if ((flags & XATTR_REPLACE) && !found) return Status::error(ENODATA, "no such attribute");
    HIODSFS_TRY(t->put(Db::kXattrs, k, value));
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

Status EngineImpl::getxattr(InodeId ino, std::string_view name, std::string* value) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string_view v;
    bool found = false;
    HIODSFS_TRY(t->get(Db::kXattrs, key_u64_str(ino, name), &v, &found));
    if (!found) return Status::error(ENODATA, "no such attribute");
    value->assign(v);
    return Status::ok();
}

Status EngineImpl::listxattr(InodeId ino, std::vector<std::string>* names) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin_read(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    std::string prefix = key_u64(ino);
    Cursor c = t->cursor(Db::kXattrs);
    for (bool ok = c.seek(prefix); ok && c.key().starts_with(prefix); ok = c.next())
        names->emplace_back(c.key().substr(prefix.size()));
    return c.status();
}

Status EngineImpl::removexattr(InodeId ino, std::string_view name) {
    std::unique_ptr<Txn> t;
    HIODSFS_TRY(meta_->begin(&t));
    Inode in;
    HIODSFS_TRY(load_inode(*t, ino, &in));
    bool existed = false;
    HIODSFS_TRY(t->del(Db::kXattrs, key_u64_str(ino, name), &existed));
    if (!existed) return Status::error(ENODATA, "no such attribute");
    set_time(&in.r.ctime_s, &in.r.ctime_ns, now_ts());
    HIODSFS_TRY(store_inode(*t, ino, in));
    return t->commit();
}

}  // namespace hiodsfs
