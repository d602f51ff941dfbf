#include "hiodsfs/status.h"

#include <cstring>

#include "common/hex.h"
#include "hiodsfs/types.h"

namespace hiodsfs {

Status Status::from_errno(int err, const std::string& context) {
    return Status(err, context + ": " + std::strerror(err));
}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    return msg_;
}

std::string Digest::hex() const { return to_hex(bytes); }

}  // namespace hiodsfs
