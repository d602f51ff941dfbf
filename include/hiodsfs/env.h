// Env: every file the store itself reads or writes (segments, the format
// record, the lock file) goes through this interface, so tests can swap in
// a fault-injecting implementation (short writes, ENOSPC, EIO, a crash that
// drops whatever was not synced). LMDB does its own I/O and is not routed here.
// Thread-safety: Env and File implementations are safe for concurrent use
// as long as two threads do not write the same byte range at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hiodsfs/status.h"

struct iovec;

namespace hiodsfs {

class File {
public:
    virtual ~File() = default;
    // Writes all of len bytes at offset or returns an error (a short write
    // is reported as EIO after retrying, never silently).
    virtual Status pwrite(const void* data, std::size_t len, std::uint64_t offset) = 0;
    // Reads up to len bytes at offset; *got is the number read (less at EOF).
    virtual Status pread(void* data, std::size_t len, std::uint64_t offset, std::size_t* got) = 0;
    // Reads consecutive bytes at offset into the buffers of iov in turn (a
    // scatter read: headers to one place, payloads to another, one system
    // call); *got as for pread. This default reads each buffer with pread,
    // so an Env that injects faults into pread injects them here too.
    virtual Status preadv(const struct iovec* iov, int count, std::uint64_t offset, std::size_t* got);
    // Makes every byte written so far durable (fdatasync).
    virtual Status sync() = 0;
    // Starts writing [offset, offset + len) back to the disk, without
    // waiting and without promising anything (sync() does): a later sync()
    // then has that much less to wait for. By default it does nothing.
    virtual void start_writeback(std::uint64_t offset, std::uint64_t len) {
        (void)offset;
        (void)len;
    }
    virtual Status size(std::uint64_t* out) = 0;
    virtual Status truncate(std::uint64_t length) = 0;

protected:
    // Reads what iov still lacks after its first *got bytes, buffer by
    // buffer with f->pread, stopping at end of file; *got grows.
    static Status preadv_rest(File* f, const struct iovec* iov, int count, std::uint64_t offset,
                              std::size_t* got);
};

enum class OpenMode {
    kRead,          // existing file, read only
    kReadWrite,     // existing file, or create it
    kCreateNew,     // create, fail with EEXIST if it exists
};

class Env {
public:
    virtual ~Env() = default;
    virtual Status open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) = 0;
    virtual Status unlink(const std::string& path) = 0;
    virtual Status rename(const std::string& from, const std::string& to) = 0;
    virtual Status mkdir(const std::string& path) = 0;  // ok if it exists
    virtual Status list_dir(const std::string& path, std::vector<std::string>* names) = 0;
    virtual bool exists(const std::string& path) = 0;
    // Makes a directory's entries (created, renamed, removed files) durable.
    virtual Status sync_dir(const std::string& path) = 0;

    // The process-wide POSIX implementation. It creates files 0600 and
    // directories 0700 (less the umask): a store's files are its owner's
    // only. It opens no symbolic link as the last component of a path.
    static Env* posix();

    // The POSIX implementation for the files of one directory tree (a store
    // directory), reached from dirfd (duplicated: the Env keeps its own). A
    // path is `top` or `alias` followed by "/REL", and every component of
    // REL is opened from dirfd without following a symbolic link, so a link
    // planted in the tree is refused and the path to the tree is never
    // walked again. Errors name files as top/REL. A file open() finds must
    // be a regular file, and one opened kReadWrite must have a single link.
    // Paths outside the tree fail with EXDEV.
    static Status beneath(int dirfd, const std::string& top, const std::string& alias,
                          std::unique_ptr<Env>* out);
};

}  // namespace hiodsfs
