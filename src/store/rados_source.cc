#include "store/rados_source.h"

#include <cctype>

namespace hiodsfs {

bool parse_rados_source(const std::string& source, std::string* pool, std::string* store,
                        std::string* error) {
    const std::string prefix = "rados:";
    const std::string rest = source.rfind(prefix, 0) == 0 ? source.substr(prefix.size()) : "";
    const std::size_t slash = rest.find('/');
    if (slash == std::string::npos || slash == 0) {
        *error = "'" + source + "' is not rados:POOL/STORE";
        return false;
    }
    const std::string name = rest.substr(slash + 1);
    bool valid = !name.empty() && name.size() <= 64 && name[0] != '.';
    for (char c : name)
        valid = valid &&
                (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
    if (!valid) {
        *error = "store name '" + name + "' in " + source +
                 ": expected 1 to 64 letters, digits, '_', '-' or '.', not starting with '.'";
        return false;
    }
    *pool = rest.substr(0, slash);
    *store = name;
    return true;
}

}  // namespace hiodsfs
