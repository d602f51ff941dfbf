// The record format: the CRC-32C its checksums use, and the checks a
// record read back passes (a location that does not match its record).

#include "store/segment_format.h"

#include "chunk/fingerprint.h"
#include "hiodsfs/segment_store.h"
#include "segment_test_util.h"

namespace hiodsfs {
namespace {

using namespace test;

TEST_CASE("crc32c check value", "[segment]") {
    // The record format depends on it; the vector from the CRC-32C spec.
    REQUIRE(crc32c("123456789", 9) == 0xE3069283u);
}

TEST_CASE("segment store: a location that does not match the record is EIO", "[segment]") {
    TempDir tmp;
    std::unique_ptr<SegmentStore> s;
    REQUIRE_OK(SegmentStore::open(Env::posix(), tmp.path(), small_options(1 << 20, 1 << 16), &s));
    std::mt19937_64 rng(6);
    Rec a, b;
    REQUIRE_OK(append(*s, 7, test::random_bytes(rng, 1000), &a));
    REQUIRE_OK(append(*s, 8, test::random_bytes(rng, 1000), &b));
    std::vector<char> out(4000);
    auto check = [&](const char* what) {
        INFO(what);
        // Wrong chunk id, wrong length, offset inside a record, another segment.
        Status st = s->read(a.loc, 8, out.data());
        REQUIRE(st.err() == EIO);
        REQUIRE(st.message().find("expected chunk 8") != std::string::npos);
        ChunkLocation l = a.loc;
        l.length = 999;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = a.loc;
        l.offset += 100;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = a.loc;
        l.offset = 3;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        l = b.loc;
        l.offset += 5000;  // past the end
        REQUIRE(s->read(l, 8, out.data()).err() == EIO);
        l = a.loc;
        l.segment = 9;
        REQUIRE(s->read(l, 7, out.data()).err() == EIO);
        REQUIRE_OK(read_back(*s, a));
        REQUIRE_OK(read_back(*s, b));
    };
    check("in the write buffer");
    REQUIRE_OK(s->flush());
    check("in the file");
}

}  // namespace
}  // namespace hiodsfs
