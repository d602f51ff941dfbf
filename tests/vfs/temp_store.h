// A real engine on a temporary store for the Vfs tests.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/engine_test_hooks.h"
#include "hiodsfs/engine.h"

namespace hiodsfs::test {

class TempStore {
public:
    TempStore() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "hiodsfs-vfs-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path_ = tmpl;
    }
    TempStore(const TempStore&) = delete;
    TempStore& operator=(const TempStore&) = delete;
    ~TempStore() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }

    // What open() opens with.
    EngineOptions options() const {
        EngineOptions o;
        o.store_dir = path_ + "/store";
        o.lmdb_map_bytes = 1ull << 30;
        o.background_commit = false;
        return o;
    }
    // space_reserve: EngineOptions::space_reserve (the default: sized by the engine).
    std::unique_ptr<Engine> open(std::uint64_t space_reserve = UINT64_MAX) const {
        EngineOptions o = options();
        o.space_reserve = space_reserve;
        return open(o);
    }
    std::unique_ptr<Engine> open(const EngineOptions& o, const EngineHooks& hooks = {}) const {
        std::unique_ptr<Engine> e;
        Status st = open_engine_with_hooks(o, hooks, &e);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        return e;
    }

private:
    std::string path_;
};

}  // namespace hiodsfs::test
