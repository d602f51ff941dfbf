// Compression dictionaries (meta/dictionaries.h): those in the metadata
// are loaded at every open (read-only ones too) and by hiodsfs-fsck, and
// the newest compresses new zstd chunks; a chunk whose dictionary is gone
// or damaged is named by fsck's scrub.
#include <mutex>
#include <nlohmann/json.hpp>

#include "compression_test_util.h"
#include "fsck/fsck.h"
#include "meta/dictionaries.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

using Files = std::map<std::string, std::vector<std::uint8_t>>;

std::uint64_t dictionary_count(Engine& e) {
    return nlohmann::json::parse(e.status_json()).at("dictionaries").get<std::uint64_t>();
}

void write_files(Engine& e, Files* files, const std::string& prefix, int n, std::size_t bytes,
                 unsigned seed) {
    for (int i = 0; i < n; ++i) {
        const std::string name = prefix + std::to_string(i);
        (*files)[name] = text_bytes(bytes, seed + static_cast<unsigned>(i));
        write_synced(e, name, (*files)[name]);
    }
}

void check_files(Engine& e, const Files& files) {
    for (const auto& [name, data] : files) {
        INFO(name);
        CHECK(read_named(e, name) == data);
    }
}

FsckReport scrub(const std::string& store) {
    FsckReport report;
    FsckOptions fo;
    fo.store = store;
    fo.scrub = true;
    require_ok(run_fsck(fo, &report));
    return report;
}

std::string problems_of(const FsckReport& r) {
    std::string all;
    for (const FsckProblem& p : r.problems) all += p.what + "\n";
    return all;
}

// One operation on the metadata of a closed store, committed.
void change_metadata(const std::string& store, const std::function<void(Txn&)>& change) {
    std::unique_ptr<MetaStore> m;
    require_ok(MetaStore::open(store + "/meta", 1ull << 32, false, &m));
    std::unique_ptr<Txn> t;
    require_ok(m->begin(&t));
    change(*t);
    require_ok(t->commit());
    t.reset();
    require_ok(m->commit_group(nullptr));
}

// A dictionary trained on text as the store's trainer would.
std::string trained_by_hand() {
    std::string samples;
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; i < 200; ++i) {
        const std::vector<std::uint8_t> t = text_bytes(4096, 5000 + i);
        samples.append(t.begin(), t.end());
        sizes.push_back(t.size());
    }
    std::string bytes;
    require_ok(train_dictionary(samples, sizes, 16 * 1024, &bytes));
    return bytes;
}

// A log the engine's threads write to.
struct Log {
    std::mutex mu;
    std::vector<std::string> lines;
    std::function<void(const std::string&)> sink() {
        return [this](const std::string& line) {
            std::lock_guard l(mu);
            lines.push_back(line);
        };
    }
    std::size_t count(const std::string& what) {
        std::lock_guard l(mu);
        return static_cast<std::size_t>(std::count_if(
            lines.begin(), lines.end(),
            [&](const std::string& line) { return line.find(what) != std::string::npos; }));
    }
};

}  // namespace

TEST_CASE(
    "a dictionary in the metadata is loaded at every open and compresses new zstd chunks; fsck's "
    "scrub "
    "names the files whose chunks need one the metadata lost or holds damaged",
    "[engine][compression][dictionary][fsck]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed("zstd:3");
    Files files;
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 0);
        write_files(*e, &files, "plain", 2, 256 * 1024, 1000);
    }
    change_metadata(dir.store(),
                    [](Txn& t) { require_ok(put_dictionary(t, 1, 0, trained_by_hand())); });
    {
        auto e = open_engine(o);
        CHECK(dictionary_count(*e) == 1);
        files["needs-it"] = text_bytes(256 * 1024, 1100);
        write_synced(*e, "needs-it", files["needs-it"]);
        check_files(*e, files);
    }
    RecordKinds k = record_kinds(dir.store());
    CHECK(k.by_dictionary[0] > 0);
    CHECK(k.by_dictionary[1] > 0);
    {
        auto e = open_engine(o);
        check_files(*e, files);
    }
    {
        // hiodsfs-stat and a read-only mount read them too.
        EngineOptions ro = o;
        ro.read_only = true;
        auto e = open_engine(ro);
        CHECK(dictionary_count(*e) == 1);
        check_files(*e, files);
    }
    CHECK(check_invariants(dir.store()).empty());
    {
        const FsckReport r = scrub(dir.store());
        INFO(problems_of(r));
        CHECK(r.problems.empty());
    }
    FsckOptions fo;
    fo.store = dir.store();
    fo.scrub = true;
    fo.mark_bad_chunks = false;
    SECTION("the record is gone") {
        change_metadata(dir.store(), [](Txn& t) {
            bool existed = false;
            require_ok(t.del(Db::kSuper, dictionary_key(1), &existed));
            REQUIRE(existed);
        });
        FsckReport r;
        require_ok(run_fsck(fo, &r));
        const std::string all = problems_of(r);
        INFO(all);
        CHECK(all.find("/needs-it") != std::string::npos);
        CHECK(all.find("dictionary 1 is not in the store") != std::string::npos);
        CHECK(all.find("/plain0") == std::string::npos);
    }
    SECTION("the record is damaged") {
        change_metadata(dir.store(), [](Txn& t) {
            std::string_view v;
            bool found = false;
            require_ok(t.get(Db::kSuper, dictionary_key(1), &v, &found));
            REQUIRE(found);
            std::string bad(v);
            bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x40);
            require_ok(t.put(Db::kSuper, dictionary_key(1), bad));
        });
        FsckReport r;
        require_ok(run_fsck(fo, &r));
        const std::string all = problems_of(r);
        INFO(all);
        CHECK(all.find("compression dictionary 1's record is damaged") != std::string::npos);
        CHECK(all.find("/needs-it") != std::string::npos);
        CHECK(all.find("/plain0") == std::string::npos);
        // The engine opens it all the same, and says so: the other files
        // read, that one is EIO.
        Log log;
        o.log = log.sink();
        auto e = open_engine(o);
        CHECK(log.count("compression dictionary 1's record is damaged") == 1);
        CHECK(dictionary_count(*e) == 0);
        CHECK(read_named(*e, "plain0") == files["plain0"]);
        Attr a;
        require_ok(e->lookup(kRootInode, "needs-it", &a));
        std::vector<std::uint8_t> buf(a.size);
        std::size_t got = 0;
        CHECK(e->read(a.ino, 0, buf.size(), buf.data(), &got).err() == EIO);
    }
}
