#include "hiodsfs/status.h"

#include <cstring>

#include "hiodsfs/types.h"

namespace hiodsfs {

Status Status::from_errno(int err, const std::string& context) {
    return Status(err, context + ": " + std::strerror(err));
}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    return msg_;
}

std::string Digest::hex() const {
    static const char* kHex = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (auto b : bytes) {
        out.push_back(kHex[b >> 4]);
        out.push_back(kHex[b & 15]);
    }
    return out;
}

}  // namespace hiodsfs
