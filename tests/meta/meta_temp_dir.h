// A fresh directory for a test's metadata environment (meta()), removed
// with everything in it when the test ends, a MetaStore opened there, and
// a look at one key.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "meta/meta_store.h"

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

// The MetaStore in DIR (created if need be, 1 GiB map); fails the test with
// the Status's message if it does not open.
inline std::unique_ptr<MetaStore> open_meta(const std::string& dir, bool read_only = false) {
    std::unique_ptr<MetaStore> m;
    Status st = MetaStore::open(dir, 1ull << 30, read_only, &m);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    return m;
}

// Whether db holds key, as an operation sees it; its value in *value.
inline bool has(MetaStore& m, Db db, const std::string& key, std::string* value = nullptr) {
    std::unique_ptr<Txn> t;
    REQUIRE(m.begin(&t).is_ok());
    std::string_view v;
    bool found = false;
    REQUIRE(t->get(db, key, &v, &found).is_ok());
    if (found && value != nullptr) value->assign(v);
    return found;
}

}  // namespace hiodsfs::test
