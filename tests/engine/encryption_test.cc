// Encryption at rest through the engine (engine/encryption.h): a store made
// with a key seals every chunk, inline and deferred, compressed or not, and
// keeps no byte of its files in the clear; its fingerprints are keyed and
// deduplicate as before; it opens only with its own key, and a wrong,
// missing or unwanted key changes nothing; a sealed chunk that is damaged
// or moved to another's place is EIO, flagged, and named by fsck.
#include <fstream>
#include <set>

#include "chunk/fingerprint.h"
#include "compression_test_util.h"
#include "engine/fsync_log.h"
#include "engine/store_layout.h"
#include "store/segment_format.h"

using namespace hiodsfs;
using namespace hiodsfs::test;

namespace {

std::shared_ptr<const StoreKey> key_of(std::uint8_t seed) {
    std::array<std::uint8_t, StoreKey::kBytes> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 13 + i);
    return std::make_shared<StoreKey>(std::span<const std::uint8_t, StoreKey::kBytes>(b));
}

// Text with a marker on every line: compressible, and easy to look for.
const std::string kMarker = "PLAINTEXT-MARKER-4f1c";
std::vector<std::uint8_t> marked_text(std::size_t n, unsigned seed) {
    std::vector<std::uint8_t> v = text_bytes(n, seed);
    for (std::size_t at = 0; at + kMarker.size() < v.size(); at += 997)
        std::copy(kMarker.begin(), kMarker.end(), v.begin() + static_cast<std::ptrdiff_t>(at));
    return v;
}

// Every regular file under dir whose bytes hold s.
std::vector<std::string> files_holding(const std::string& dir, const std::string& s) {
    std::vector<std::string> found;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
        if (!f.is_regular_file()) continue;
        std::ifstream in(f.path(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (bytes.find(s) != std::string::npos) found.push_back(f.path().string());
    }
    return found;
}

std::string format_text(const std::string& store) {
    std::ifstream in(store + "/FORMAT");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("an encrypted store seals every chunk, keeps its files' bytes out of sight, and deduplicates within "
          "itself",
          "[engine][encryption]") {
    const char* method = GENERATE("none", "lz4");
    const DedupMode mode = GENERATE(DedupMode::kInline, DedupMode::kDeferred);
    INFO(method << (mode == DedupMode::kDeferred ? ", deferred" : ", inline"));
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed(method);
    o.compression_background = parsed(method);
    o.mode = mode;
    o.background_threads = 0;
    o.key = key_of(1);
    std::mt19937_64 rng(3);
    const std::vector<std::uint8_t> text = marked_text(600 * 1024, 1);
    const std::vector<std::uint8_t> noise = random_bytes(rng, 200 * 1024);
    {
        auto e = open_engine(o);
        write_synced(*e, "text", text);
        write_synced(*e, "copy", text);
        write_synced(*e, "noise", noise);
        require_ok(e->run_background());
        CHECK(read_named(*e, "text") == text);
        const SpaceCounters c = counters_of(*e);
        CHECK(c.backlog_records == 0);
        // Stored once: the keyed fingerprints still find the copy.
        CHECK(c.content_bytes == text.size() + noise.size());
        CHECK(c.logical_bytes == 2 * text.size() + noise.size());
    }
    const std::string format = format_text(dir.store());
    CHECK(format.find("format 6\n") != std::string::npos);
    CHECK(format.find("encryption xaes-256-gcm id=") != std::string::npos);
    // Every record sealed, whatever the method.
    std::size_t sealed = 0, plain = 0;
    std::unique_ptr<SegmentStore> segs;
    SegmentStoreOptions so;
    so.read_only = true;
    require_ok(SegmentStore::open(Env::posix(), dir.store() + "/segments", so, &segs));
    for_each_segment_record(dir.store(), true, [&](const SegmentRecord& r) {
        if (r.chunk == kLogRecord) return;
        std::vector<char> payload(r.location.length);
        require_ok(segs->read(r.location, r.chunk, payload.data()));
        CodecPrefix p;
        const bool is_sealed = r.location.encoded && read_codec_prefix(payload.data(), r.location.length, &p) &&
                               p.sealed;
        ++(is_sealed ? sealed : plain);
    });
    CHECK(sealed > 0);
    CHECK(plain == 0);
    CHECK(files_holding(dir.store(), kMarker).empty());
    {
        // The search finds the marker where it is: in a plain store.
        TempDir plain_dir;
        EngineOptions po = options_for(plain_dir.store(), kCdc);
        po.compression = parsed("none");
        auto p = open_engine(po);
        write_synced(*p, "text", text);
        p.reset();
        CHECK_FALSE(files_holding(plain_dir.store(), kMarker).empty());
    }
    // The index holds keyed prints: no entry is the SHA-256 of a chunk.
    {
        std::unique_ptr<MetaStore> m;
        require_ok(MetaStore::open(dir.store() + "/meta", 1ull << 32, true, &m));
        std::unique_ptr<Txn> t;
        require_ok(m->begin_read(&t));
        const Digest first_plain = thread_sha256().digest(text.data(), 4096);
        for (const auto& [id, rec] : all_chunk_records(*t)) {
            CHECK(rec.sealed);
            CHECK_FALSE(rec.digest == first_plain);
        }
    }
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "text") == text);
        CHECK(read_named(*e, "copy") == text);
        CHECK(read_named(*e, "noise") == noise);
    }
    CHECK(check_invariants(dir.store(), true, o.key).empty());
}

TEST_CASE("an encrypted store stores copies within one write, and between racing writers, once",
          "[engine][encryption]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kFixed);
    o.mode = DedupMode::kInline;
    o.key = key_of(4);
    std::mt19937_64 rng(8);
    const std::vector<std::uint8_t> block = random_bytes(rng, 4096);
    std::vector<std::uint8_t> repeated;
    for (int i = 0; i < 64; ++i) repeated.insert(repeated.end(), block.begin(), block.end());
    const std::vector<std::uint8_t> other = random_bytes(rng, 256 * 1024);
    {
        auto e = open_engine(o);
        // 64 equal chunks in one request.
        write_synced(*e, "repeated", repeated);
        // Writers racing with the same bytes: whoever stores a chunk first
        // keeps it. (No Catch assertion off the main thread.)
        std::vector<Attr> files;
        for (int w = 0; w < 4; ++w) files.push_back(make_file(*e, "racer" + std::to_string(w)));
        std::vector<Status> results(files.size());
        std::vector<std::thread> writers;
        for (std::size_t w = 0; w < files.size(); ++w)
            writers.emplace_back([&, w] {
                Status st = e->write(files[w].ino, 0, other.data(), other.size());
                results[w] = st ? e->fsync(files[w].ino, false) : st;
            });
        for (auto& t : writers) t.join();
        for (const Status& st : results) require_ok(st);
        const SpaceCounters c = counters_of(*e);
        CHECK(c.content_bytes == block.size() + other.size());
        CHECK(c.chunk_count == 1 + other.size() / 4096);
    }
    auto e = open_engine(o);
    CHECK(read_named(*e, "repeated") == repeated);
    for (int w = 0; w < 4; ++w) CHECK(read_named(*e, "racer" + std::to_string(w)) == other);
    e.reset();
    CHECK(check_invariants(dir.store(), true, o.key).empty());
}

TEST_CASE("an encrypted store opens only with its own key; a wrong, missing or unwanted key changes nothing",
          "[engine][encryption]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.key = key_of(1);
    const std::vector<std::uint8_t> text = marked_text(100 * 1024, 2);
    {
        auto e = open_engine(o);
        write_synced(*e, "text", text);
    }
    const std::set<std::string> before = files_state(dir.store());
    std::unique_ptr<Engine> e;
    EngineOptions wrong = o;
    wrong.key = key_of(2);
    Status st = Engine::open(wrong, &e);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("not this store's key") != std::string::npos);
    EngineOptions none = o;
    none.key = nullptr;
    st = Engine::open(none, &e);
    CHECK(st.err() == EACCES);
    CHECK(st.message().find("is encrypted") != std::string::npos);
    CHECK(files_state(dir.store()) == before);
    // A plain store refuses a key: it would not be encrypted by one.
    TempDir plain_dir;
    EngineOptions plain = options_for(plain_dir.store(), kCdc);
    {
        auto p = open_engine(plain);
        write_synced(*p, "text", text);
    }
    const std::set<std::string> plain_before = files_state(plain_dir.store());
    plain.key = key_of(1);
    st = Engine::open(plain, &e);
    CHECK(st.err() == EINVAL);
    CHECK(st.message().find("is not encrypted") != std::string::npos);
    CHECK(files_state(plain_dir.store()) == plain_before);
    // Read-only without the key: the metadata's figures, but no chunk.
    EngineOptions figures = none;
    figures.read_only = true;
    figures.without_key = true;
    figures.background_threads = 0;
    figures.background_commit = false;
    {
        auto r = open_engine(figures);
        CHECK(counters_of(*r).content_bytes == text.size());
        Attr a;
        require_ok(r->lookup(kRootInode, "text", &a));
        std::vector<std::uint8_t> buf(text.size());
        std::size_t got = 0;
        st = r->read(a.ino, 0, buf.size(), buf.data(), &got);
        CHECK(st.err() == EIO);
        CHECK(st.message().find("no key") != std::string::npos);
    }
    // fsck likewise: not without the key, clean with it.
    FsckReport report;
    FsckOptions fo;
    fo.store = dir.store();
    st = run_fsck(fo, &report);
    CHECK(st.err() == EACCES);
    fo.key = key_of(2);
    CHECK(run_fsck(fo, &report).err() == EACCES);
    fo.key = o.key;
    fo.scrub = true;
    require_ok(run_fsck(fo, &report));
    CHECK(report.problems.empty());
    {
        auto again = open_engine(o);
        CHECK(read_named(*again, "text") == text);
    }
}

TEST_CASE("a sealed chunk damaged, or moved to another chunk's place with its checksums, is EIO, flagged, and "
          "named by fsck",
          "[engine][encryption]") {
    const bool swap = GENERATE(false, true);
    INFO((swap ? "two records swapped" : "a byte flipped"));
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kFixed);  // equal records, so two can trade places
    o.key = key_of(1);
    std::mt19937_64 rng(9);
    const std::vector<std::uint8_t> a = random_bytes(rng, 8192), b = random_bytes(rng, 8192);
    {
        auto e = open_engine(o);
        write_synced(*e, "a", a);
        write_synced(*e, "b", b);
    }
    std::vector<SegmentRecord> records;
    for_each_segment_record(dir.store(), false, [&](const SegmentRecord& r) {
        if (r.chunk != kLogRecord) records.push_back(r);
    });
    REQUIRE(records.size() == 4);
    const SegmentRecord& first = records[0];  // a's first chunk
    const SegmentRecord& other = records[2];  // b's first chunk
    REQUIRE(first.location.length == other.location.length);
    {
        // New payloads with checksums to match, as a writer who knows the
        // format (but not the key) would make them: only the seal can tell.
        const std::string path = dir.store() + "/segments/" + segment_file_name(first.segment);
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        auto read_record = [&](const SegmentRecord& r) {
            std::vector<char> rec(SegmentStore::kHeaderBytes + r.location.length);
            f.seekg(static_cast<std::streamoff>(r.header_offset));
            f.read(rec.data(), static_cast<std::streamsize>(rec.size()));
            return rec;
        };
        auto write_payload = [&](const SegmentRecord& r, std::vector<char> payload) {
            std::vector<char> rec(SegmentStore::kHeaderBytes);
            encode_record_header(rec.data(), r.chunk, r.location.length, crc32c(payload.data(), payload.size()),
                                 true);
            rec.insert(rec.end(), payload.begin(), payload.end());
            f.seekp(static_cast<std::streamoff>(r.header_offset));
            f.write(rec.data(), static_cast<std::streamsize>(rec.size()));
        };
        std::vector<char> x = read_record(first), y = read_record(other);
        std::vector<char> px(x.begin() + SegmentStore::kHeaderBytes, x.end());
        std::vector<char> py(y.begin() + SegmentStore::kHeaderBytes, y.end());
        if (swap) {
            write_payload(first, py);
            write_payload(other, px);
        } else {
            px[px.size() / 2] ^= 0x01;
            write_payload(first, px);
        }
    }
    {
        auto e = open_engine(o);
        Attr at;
        require_ok(e->lookup(kRootInode, "a", &at));
        std::vector<std::uint8_t> buf(a.size());
        std::size_t got = 0;
        const Status st = e->read(at.ino, 0, buf.size(), buf.data(), &got);
        CHECK(st.err() == EIO);
        CHECK(st.message().find("does not authenticate") != std::string::npos);
    }
    FsckReport report;
    FsckOptions fo;
    fo.store = dir.store();
    fo.key = o.key;
    fo.scrub = true;
    require_ok(run_fsck(fo, &report));
    bool named_a = false, named_b = false;
    for (const FsckProblem& p : report.problems) {
        named_a = named_a || p.what.find("/a") != std::string::npos;
        named_b = named_b || p.what.find("/b") != std::string::npos;
    }
    CHECK(named_a);
    CHECK(named_b == swap);
    // Written again, the content is stored afresh and reads back.
    {
        auto e = open_engine(o);
        write_synced(*e, "a-again", a);
        CHECK(read_named(*e, "a-again") == a);
    }
}

TEST_CASE("compaction moves sealed chunks, and recompresses them sealed again; they read back",
          "[engine][encryption][reclaim]") {
    TempDir dir;
    EngineOptions o = lz4_recompressed_to(dir.store(), "zstd:6");
    o.segments.max_segment_bytes = 256 * 1024;
    o.key = key_of(4);
    std::vector<std::vector<std::uint8_t>> files;
    {
        auto e = open_engine(o);
        for (unsigned i = 0; i < 6; ++i) {
            files.push_back(marked_text(300 * 1024, 20 + i));
            write_synced(*e, "f" + std::to_string(i), files.back());
        }
        require_ok(e->unlink(kRootInode, "f0"));
        require_ok(e->unlink(kRootInode, "f3"));
    }
    const int zstd6 = static_cast<int>(CompressionMethod::kZstd) * 100 + 6;
    CHECK(record_kinds(dir.store()).by_level.count(zstd6) == 0);
    {
        auto e = open_engine(o);
        require_ok(e->run_reclaim());
        for (unsigned i = 1; i < 6; ++i)
            if (i != 3) CHECK(read_named(*e, "f" + std::to_string(i)) == files[i]);
    }
    CHECK(record_kinds(dir.store()).by_level[zstd6] > 0);
    CHECK(files_holding(dir.store(), kMarker).empty());
    {
        auto e = open_engine(o);
        for (unsigned i = 1; i < 6; ++i)
            if (i != 3) CHECK(read_named(*e, "f" + std::to_string(i)) == files[i]);
    }
    CHECK(check_invariants(dir.store(), true, o.key).empty());
}

TEST_CASE("a store sealed with AES-256-GCM before XAES-256-GCM opens, reads, takes writes and checks clean as it is",
          "[engine][encryption]") {
    TempDir dir;
    EngineOptions o = options_for(dir.store(), kCdc);
    o.compression = parsed("lz4");
    o.background_threads = 0;
    o.key = key_of(7);
    o.legacy_cipher_for_tests = true;
    const std::vector<std::uint8_t> first = marked_text(300 * 1024, 7), second = marked_text(200 * 1024, 8);
    {
        auto e = open_engine(o);
        write_synced(*e, "first", first);
    }
    CHECK(format_text(dir.store()).find("encryption aes-256-gcm id=") != std::string::npos);
    o.legacy_cipher_for_tests = false;  // what a later hiodsfs opens it with
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "first") == first);
        write_synced(*e, "second", second);
        write_synced(*e, "copy", first);
        CHECK(counters_of(*e).content_bytes == first.size() + second.size());  // still deduplicated
    }
    CHECK(format_text(dir.store()).find("encryption aes-256-gcm id=") != std::string::npos);
    CHECK(files_holding(dir.store(), kMarker).empty());
    {
        auto e = open_engine(o);
        CHECK(read_named(*e, "second") == second);
        CHECK(read_named(*e, "copy") == first);
    }
    FsckOptions fo;
    fo.store = dir.store();
    fo.key = o.key;
    fo.scrub = true;
    FsckReport report;
    require_ok(run_fsck(fo, &report));
    for (const auto& p : report.problems) INFO(p.what);
    CHECK(report.problems.empty());
    CHECK(report.scrubbed_chunks > 0);
}
