#include "common/mountinfo.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace hiodsfs {
namespace {

// Undoes mountinfo's octal escapes ("\040" for a space).
std::string unescape(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7') {
            out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
            i += 3;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

}  // namespace

std::vector<MountInfo> read_mountinfo() {
    std::vector<MountInfo> out;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // "id parent dev root mountpoint options... - fstype source superopts"
        const std::size_t sep = line.find(" - ");
        if (sep == std::string::npos) continue;
        std::istringstream head(line.substr(0, sep)), rest(line.substr(sep + 3));
        std::string id, parent, dev, root, mnt, fstype, source;
        head >> id >> parent >> dev >> root >> mnt;
        rest >> fstype >> source;
        out.push_back(MountInfo{unescape(mnt), fstype, unescape(source)});
    }
    return out;
}

bool fuse_source_mounted(const std::string& source) {
    for (const MountInfo& m : read_mountinfo())
        if (m.fstype.rfind("fuse", 0) == 0 && m.source == source) return true;
    return false;
}

bool hiodsfs_store_mounted(const std::string& dir) {
    struct stat store {};
    if (::stat(dir.c_str(), &store) != 0) return false;
    for (const MountInfo& m : read_mountinfo()) {
        // A local store's source is its directory; rados:POOL/STORE is not a path.
        if (m.fstype != "fuse.hiodsfs" || m.source.empty() || m.source[0] != '/') continue;
        struct stat st {};
        if (::stat(m.source.c_str(), &st) == 0 && st.st_dev == store.st_dev &&
            st.st_ino == store.st_ino)
            return true;
    }
    return false;
}

}  // namespace hiodsfs
