// A fresh directory for a test's metadata environment (meta()), removed
// with everything in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace hiodsfs::test {

class MetaTempDir {
public:
    MetaTempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "hiodsfs-meta-XXXXXX").string();
        path_ = ::mkdtemp(tmpl.data());
    }
    ~MetaTempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    MetaTempDir(const MetaTempDir&) = delete;
    MetaTempDir& operator=(const MetaTempDir&) = delete;
    std::string meta() const { return path_ + "/meta"; }

private:
    std::string path_;
};

}  // namespace hiodsfs::test
