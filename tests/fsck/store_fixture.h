// The stores of older formats in tests/fsck/data/formatN-store.tar.xz (made
// by a hiodsfs of that format with make-formatN-store beside them) and
// their manifests: what every file must read back as after the upgrade.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace hiodsfs::test {

struct ManifestEntry {
    std::string path;  // relative to the mount's root
    std::uint32_t mode = 0;
    std::uint64_t size = 0;
    std::int64_t mtime_s = 0;
    std::uint32_t mtime_ns = 0;
    std::uint32_t nlink = 0;
    std::string what;  // SHA-256 (hex) of a file, a symlink's target, else "-"
};

struct XattrEntry {
    std::string path, name, value;
};

struct StoreFixture {
    int format = 0;
    std::vector<ManifestEntry> entries;
    std::vector<XattrEntry> xattrs;
};

// Unpacks the store of that format into dir (dir/store is the store);
// false if tar fails or the manifest is not whole.
inline bool unpack_store_fixture(const std::string& dir, int format, StoreFixture* out) {
    out->format = format;
    const std::string tarball = std::string(HIODSFS_SOURCE_DIR) + "/tests/fsck/data/format" +
                                std::to_string(format) + "-store.tar.xz";
    const std::string cmd = "tar -C '" + dir + "' -xJf '" + tarball + "'";
    if (std::system(cmd.c_str()) != 0) return false;
    std::ifstream in(dir + "/manifest.txt");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::vector<std::string> cols;
        for (std::string c; std::getline(f, c, '\t');) cols.push_back(c);
        if (cols.size() == 4 && cols[0] == "xattr") {
            out->xattrs.push_back(XattrEntry{cols[1], cols[2], cols[3]});
        } else if (cols.size() == 7) {
            ManifestEntry e;
            e.path = cols[0];
            e.mode = static_cast<std::uint32_t>(std::stoul(cols[1], nullptr, 8));
            e.size = std::stoull(cols[2]);
            e.mtime_s = std::stoll(cols[3]);
            e.mtime_ns = static_cast<std::uint32_t>(std::stoul(cols[4]));
            e.nlink = static_cast<std::uint32_t>(std::stoul(cols[5]));
            e.what = cols[6];
            out->entries.push_back(e);
        } else {
            return false;
        }
    }
    return out->entries.size() >= 10 && !out->xattrs.empty();
}

}  // namespace hiodsfs::test
