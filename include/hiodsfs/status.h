// Status: the result of an operation, as an errno value plus a message a
// person can act on. Errors are values; no exception crosses a layer.
// Thread-safety: a Status is a plain value.
#pragma once

#include <string>
#include <utility>

namespace hiodsfs {

class Status {
public:
    Status() = default;
    static Status ok() { return Status(); }
    // err is a positive errno value (ENOENT, EIO, ENOSPC, ...).
    static Status error(int err, std::string message) { return Status(err, std::move(message)); }
    // "context: strerror(err)", as perror says it.
    static Status from_errno(int err, const std::string& context);

    bool is_ok() const { return err_ == 0; }
    explicit operator bool() const { return is_ok(); }
    int err() const { return err_; }
    // One line that names the reason: from_errno adds the errno text, and
    // error() callers write it (ENOSPC: "the store's file system is full").
    const std::string& message() const { return msg_; }
    // The message, or "ok".
    std::string to_string() const;

private:
    Status(int err, std::string message) : err_(err), msg_(std::move(message)) {}
    int err_ = 0;
    std::string msg_;
};

}  // namespace hiodsfs

// Propagates a non-ok Status to the caller.
#define HIODSFS_TRY(expr)                         \
    do {                                          \
        ::hiodsfs::Status _st = (expr);           \
        if (!_st.is_ok()) return _st;             \
    } while (0)
