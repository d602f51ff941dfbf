// A real engine on a temporary store, wrapped so that tests can see the
// pins the Vfs takes and gives back.
#pragma once

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hiodsfs/engine.h"

namespace hiodsfs::test {

class TempStore {
public:
    TempStore() {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / "hiodsfs-vfs-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path_ = tmpl;
    }
    ~TempStore() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string store() const { return path_ + "/store"; }

private:
    std::string path_;
};

class CountingEngine : public Engine {
public:
    explicit CountingEngine(std::unique_ptr<Engine> inner) : inner_(std::move(inner)) {}

    static std::unique_ptr<CountingEngine> open(const std::string& store) {
        EngineOptions o;
        o.store_dir = store;
        o.lmdb_map_bytes = 1ull << 30;
        o.background_commit = false;
        std::unique_ptr<Engine> e;
        Status st = Engine::open(o, &e);
        INFO(st.to_string());
        REQUIRE(st.is_ok());
        return std::make_unique<CountingEngine>(std::move(e));
    }

    // Net pins the Vfs holds on ino.
    long long pins(InodeId ino) const {
        std::lock_guard lock(mu_);
        auto it = pins_.find(ino);
        return it == pins_.end() ? 0 : it->second;
    }
    long long total_pins() const {
        std::lock_guard lock(mu_);
        long long n = 0;
        for (auto& [ino, c] : pins_) n += c;
        return n;
    }

    void pin(InodeId ino, std::uint64_t count) override {
        {
            std::lock_guard lock(mu_);
            pins_[ino] += static_cast<long long>(count);
        }
        inner_->pin(ino, count);
    }
    void unpin(InodeId ino, std::uint64_t count) override {
        {
            std::lock_guard lock(mu_);
            pins_[ino] -= static_cast<long long>(count);
        }
        inner_->unpin(ino, count);
    }

    Status close() override { return inner_->close(); }
    void abandon() override { inner_->abandon(); }
    const ChunkingParams& chunking() const override { return inner_->chunking(); }
    Status lookup(InodeId p, std::string_view n, Attr* o) override { return inner_->lookup(p, n, o); }
    Status getattr(InodeId i, Attr* o) override { return inner_->getattr(i, o); }
    Status setattr(InodeId i, const SetAttr& c, Attr* o) override { return inner_->setattr(i, c, o); }
    Status create(InodeId p, std::string_view n, const NewNode& nn, Attr* o) override {
        return inner_->create(p, n, nn, o);
    }
    Status readlink(InodeId i, std::string* t) override { return inner_->readlink(i, t); }
    Status link(InodeId i, InodeId p, std::string_view n, Attr* o) override {
        return inner_->link(i, p, n, o);
    }
    Status unlink(InodeId p, std::string_view n) override { return inner_->unlink(p, n); }
    Status rmdir(InodeId p, std::string_view n) override { return inner_->rmdir(p, n); }
    Status rename(InodeId p, std::string_view n, InodeId np, std::string_view nn,
                  unsigned f) override {
        return inner_->rename(p, n, np, nn, f);
    }
    Status readdir(InodeId d, std::vector<DirEntry>* o) override { return inner_->readdir(d, o); }
    Status parent_of(InodeId d, InodeId* o) override { return inner_->parent_of(d, o); }
    Status read(InodeId i, std::uint64_t off, std::size_t len, void* out,
                std::size_t* got) override {
        return inner_->read(i, off, len, out, got);
    }
    Status write(InodeId i, std::uint64_t off, const void* d, std::size_t len) override {
        return inner_->write(i, off, d, len);
    }
    Status flush(InodeId i) override { return inner_->flush(i); }
    Status fsync(InodeId i, bool ds) override { return inner_->fsync(i, ds); }
    Status sync_all() override { return inner_->sync_all(); }
    Status fallocate(InodeId i, int m, std::uint64_t off, std::uint64_t len) override {
        return inner_->fallocate(i, m, off, len);
    }
    Status clone_range(InodeId s, std::uint64_t so, InodeId d, std::uint64_t dof,
                       std::uint64_t len, std::uint64_t* c) override {
        return inner_->clone_range(s, so, d, dof, len, c);
    }
    Status seek(InodeId i, std::uint64_t off, SeekWhence w, std::uint64_t* o) override {
        return inner_->seek(i, off, w, o);
    }
    Status setxattr(InodeId i, std::string_view n, std::string_view v, int f) override {
        return inner_->setxattr(i, n, v, f);
    }
    Status getxattr(InodeId i, std::string_view n, std::string* v) override {
        return inner_->getxattr(i, n, v);
    }
    Status listxattr(InodeId i, std::vector<std::string>* n) override {
        return inner_->listxattr(i, n);
    }
    Status removexattr(InodeId i, std::string_view n) override {
        return inner_->removexattr(i, n);
    }
    Status statfs(FsStats* o) override { return inner_->statfs(o); }
    Status counters(SpaceCounters* o) override { return inner_->counters(o); }

private:
    std::unique_ptr<Engine> inner_;
    mutable std::mutex mu_;
    std::map<InodeId, long long> pins_;
};

}  // namespace hiodsfs::test
