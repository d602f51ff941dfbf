// Randomized model test: thousands of random operations against the engine
// and against a plain in-memory model, contents compared after every step.
// The seed is printed; HIODSFS_SEED=<n> reproduces a run, HIODSFS_MODEL_OPS
// changes its length.
#include <iostream>

#include "engine_test_util.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

struct Model {
    std::map<std::string, std::vector<std::uint8_t>> files;
};

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::strtoull(v, nullptr, 10) : fallback;
}

void compare(Engine& e, const Model& m, const std::string& name) {
    Attr a;
    Status st = e.lookup(kRootInode, name, &a);
    INFO("file " << name << ": " << st.to_string());
    REQUIRE(st.is_ok());
    const auto& want = m.files.at(name);
    REQUIRE(a.size == want.size());
    auto got = read_all(e, a.ino);
    if (got != want) {
        std::size_t i = 0;
        while (i < got.size() && got[i] == want[i]) ++i;
        FAIL("file " << name << " differs first at byte " << i << " of " << want.size());
    }
}

// key: a store encrypted with it (null: a plain one).
void run_model(const ChunkingParams& params, std::uint64_t seed, std::uint64_t ops,
               std::shared_ptr<const StoreKey> key = nullptr) {
    std::cerr << "model test " << params.describe() << (key ? " encrypted" : "") << " seed " << seed
              << " (HIODSFS_SEED to repeat)\n";
    INFO("seed " << seed << " chunking " << params.describe());
    std::mt19937_64 rng(seed);
    TempDir dir;
    EngineOptions opts = options_for(dir.store(), params);
    opts.segments.max_segment_bytes = 1u << 20;
    opts.background_threads = 0;  // the test runs the pass itself, at random moments
    // Writes store lz4 and the pass zstd, so the model sees raw, lz4 and zstd chunks mixed.
    opts.compression = Compression{CompressionMethod::kLz4, 0};
    opts.compression_background = Compression{CompressionMethod::kZstd, 3};
    opts.key = key;
    auto e = open_engine(opts);
    Model m;
    // A pool of data that writes copy from, so duplicates are common: half
    // random bytes, half bytes of a small alphabet that compress.
    auto pool = random_bytes(rng, 1u << 20);
    for (std::size_t i = pool.size() / 2; i < pool.size(); ++i) pool[i] = static_cast<std::uint8_t>('a' + pool[i] % 6);
    const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    auto existing = [&]() -> std::string {
        if (m.files.empty()) return "";
        auto it = m.files.begin();
        std::advance(it, static_cast<long>(pick(m.files.size())));
        return it->first;
    };
    auto ino_of = [&](const std::string& name) {
        Attr a;
        REQUIRE(e->lookup(kRootInode, name, &a).is_ok());
        return a.ino;
    };
    auto make_data = [&](std::size_t n) {
        std::vector<std::uint8_t> d;
        switch (pick(3)) {
            case 0: d = random_bytes(rng, n); break;
            case 1: {
                std::size_t from = pick(pool.size() - std::min(n, pool.size() - 1));
                d.assign(pool.begin() + from, pool.begin() + from + std::min(n, pool.size() - from));
                d.resize(n, 0);
                break;
            }
            default: d.assign(n, pick(2) ? 0 : 0x5a); break;
        }
        return d;
    };

    for (std::uint64_t step = 0; step < ops; ++step) {
        INFO("step " << step);
        std::uint64_t op = pick(100);
        std::string touched;
        if (op < 8 || m.files.empty()) {  // create
            std::string name = names[pick(names.size())];
            Attr a;
            Status st = e->create(kRootInode, name, NewNode{S_IFREG | 0644}, &a);
            if (m.files.count(name)) {
                REQUIRE(st.err() == EEXIST);
            } else {
                REQUIRE(st.is_ok());
                m.files[name] = {};
            }
            touched = name;
        } else if (op < 55) {  // write at a random place: append, overwrite, past the end
            std::string name = existing();
            auto& content = m.files[name];
            std::size_t len = pick(4) == 0 ? 1 + pick(300000) : 1 + pick(20000);
            std::uint64_t off;
            switch (pick(3)) {
                case 0: off = content.size(); break;
                case 1: off = content.empty() ? 0 : pick(content.size()); break;
                default: off = content.size() + pick(100000); break;
            }
            if (off + len > 3u << 20) continue;  // keep files small enough to compare often
            auto d = make_data(len);
            // Sometimes split the write into pieces of random sizes.
            std::uint64_t ino = ino_of(name);
            std::size_t done = 0;
            while (done < len) {
                std::size_t piece = pick(2) ? len - done : std::min(len - done, 1 + pick(9000));
                Status st = e->write(ino, off + done, d.data() + done, piece);
                INFO(st.to_string());
                REQUIRE(st.is_ok());
                done += piece;
            }
            if (content.size() < off + len) content.resize(off + len, 0);
            std::copy(d.begin(), d.end(), content.begin() + static_cast<long>(off));
            touched = name;
        } else if (op < 63) {  // truncate
            std::string name = existing();
            auto& content = m.files[name];
            std::uint64_t size = pick(2) ? pick(content.size() + 1) : content.size() + pick(200000);
            SetAttr s;
            s.valid = SetAttr::kSize;
            s.size = size;
            Attr a;
            REQUIRE(e->setattr(ino_of(name), s, &a).is_ok());
            content.resize(size, 0);
            touched = name;
        } else if (op < 68) {  // unlink
            std::string name = existing();
            REQUIRE(e->unlink(kRootInode, name).is_ok());
            m.files.erase(name);
        } else if (op < 73) {  // rename, possibly over another file
            std::string from = existing();
            std::string to = names[pick(names.size())];
            REQUIRE(e->rename(kRootInode, from, kRootInode, to, 0).is_ok());
            if (from != to) {
                m.files[to] = m.files[from];
                m.files.erase(from);
            }
            touched = to;
        } else if (op < 78) {  // clone a range
            std::string src = existing(), dst = existing();
            if (src == dst) continue;
            auto& s = m.files[src];
            auto& d = m.files[dst];
            std::uint64_t soff = s.empty() ? 0 : pick(s.size());
            std::uint64_t doff = pick(d.size() + 50000);
            std::uint64_t len = 1 + pick(200000);
            std::uint64_t copied = 0;
            REQUIRE(e->clone_range(ino_of(src), soff, ino_of(dst), doff, len, &copied).is_ok());
            std::uint64_t n = soff >= s.size() ? 0 : std::min<std::uint64_t>(len, s.size() - soff);
            REQUIRE(copied == n);
            if (n > 0) {
                if (d.size() < doff + n) d.resize(doff + n, 0);
                std::copy(s.begin() + static_cast<long>(soff), s.begin() + static_cast<long>(soff + n),
                          d.begin() + static_cast<long>(doff));
            }
            touched = dst;
        } else if (op < 83) {  // punch a hole
            std::string name = existing();
            auto& content = m.files[name];
            if (content.empty()) continue;
            std::uint64_t off = pick(content.size());
            std::uint64_t len = 1 + pick(100000);
            REQUIRE(e->fallocate(ino_of(name), 0x02 | 0x01, off, len).is_ok());  // PUNCH_HOLE|KEEP_SIZE
            std::fill(content.begin() + static_cast<long>(off),
                      content.begin() + static_cast<long>(std::min<std::uint64_t>(content.size(), off + len)), 0);
            touched = name;
        } else if (op < 88) {  // a random read
            std::string name = existing();
            auto& content = m.files[name];
            std::uint64_t off = pick(content.size() + 10);
            std::size_t len = pick(70000);
            std::vector<std::uint8_t> buf(len);
            std::size_t got = 0;
            REQUIRE(e->read(ino_of(name), off, len, buf.data(), &got).is_ok());
            std::size_t expect = off >= content.size() ? 0 : std::min<std::size_t>(len, content.size() - off);
            REQUIRE(got == expect);
            REQUIRE(std::equal(buf.begin(), buf.begin() + static_cast<long>(got),
                               content.begin() + static_cast<long>(off)));
        } else if (op < 91) {  // switch the write path, or let the background pass run
            if (pick(2)) {
                e->set_deferred(!e->deferred());
            } else {
                REQUIRE(e->run_background().is_ok());
            }
        } else if (op < 93) {  // fsync or close
            std::string name = existing();
            REQUIRE((pick(2) ? e->fsync(ino_of(name), false) : e->flush(ino_of(name))).is_ok());
        } else if (op < 96) {  // reopen the store
            REQUIRE(e->close().is_ok());
            e.reset();
            auto problems = check_invariants(dir.store(), true, opts.key);
            for (auto& p : problems) UNSCOPED_INFO(p);
            REQUIRE(problems.empty());
            e = open_engine(opts);
            for (const auto& [name, content] : m.files) compare(*e, m, name);
        } else {  // compare everything
            for (const auto& [name, content] : m.files) compare(*e, m, name);
        }
        if (!touched.empty()) compare(*e, m, touched);
    }
    for (const auto& [name, content] : m.files) compare(*e, m, name);
    REQUIRE(e->close().is_ok());
    auto problems = check_invariants(dir.store(), true, opts.key);
    for (auto& p : problems) UNSCOPED_INFO(p);
    REQUIRE(problems.empty());
}

}  // namespace

TEST_CASE("random operations match an in-memory model", "[engine][model][slow]") {
    std::uint64_t seed = env_u64("HIODSFS_SEED", std::random_device{}());
    std::uint64_t ops = env_u64("HIODSFS_MODEL_OPS", 2000);
    SECTION("cdc") { run_model(ChunkingParams::cdc(1024, 4096, 16384), seed, ops); }
    SECTION("fixed") { run_model(ChunkingParams::fixed(4096), seed, ops); }
    SECTION("cdc, encrypted") {
        std::array<std::uint8_t, StoreKey::kBytes> key{};
        for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(seed >> (i % 8 * 8)) ^ 0x5a;
        run_model(ChunkingParams::cdc(1024, 4096, 16384), seed, ops / 2,
                  std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(key)));
    }
}
