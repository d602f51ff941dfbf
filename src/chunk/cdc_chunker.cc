// FastCDC-style content-defined chunker (Xia et al., USENIX ATC 2016):
// Gear rolling hash h = (h << 1) + gear[b], normalized chunking level 2 (a
// mask 2 bits stricter than log2(avg) before avg, 2 bits looser after), and
// min/avg/max sizes. The first min_size bytes of a chunk are not hashed at all
// (the hash starts at 0 at the min_size position), which is both FastCDC's
// "cut-point skipping" and a large part of its speed.
//
// Streaming: the whole state is (bytes since the last cut, hash), so cut
// points do not depend on how the input is split into calls.
#include <algorithm>
#include <array>
#include <bit>

#include "chunk/chunker_impl.h"

namespace hiodsfs::chunk_detail {
namespace {

constexpr std::uint64_t splitmix64_next(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The Gear table. Every stored CDC chunk boundary depends on these values, so
// they are fixed constants (splitmix64 from a fixed seed, computed at compile
// time) and must never change for an existing store format.
constexpr std::uint64_t kGearSeed = 0x6869'6F64'7366'7321ull;  // "hiodsfs!"
constexpr std::array<std::uint64_t, 256> make_gear() {
    std::array<std::uint64_t, 256> t{};
    std::uint64_t s = kGearSeed;
    for (auto& v : t) v = splitmix64_next(s);
    return t;
}
constexpr std::array<std::uint64_t, 256> kGear = make_gear();

inline std::uint64_t roll(std::uint64_t h, std::uint8_t b) { return (h << 1) + kGear[b]; }

// A mask of the `bits` highest bits. With a shift-left Gear hash bit i depends
// on the last i+1 bytes only, so the high bits are the ones that see a
// 64-byte window; masks on low bits would cut on 10-20 byte patterns.
constexpr std::uint64_t high_mask(unsigned bits) { return ~std::uint64_t{0} << (64 - bits); }

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// Rolls p[0..n) into h and returns the index of the first byte after which
// (h & mask) == 0, or kNone. h is left at the hash after that byte (or after
// the last byte when there is no cut).
inline std::size_t scan_scalar(const std::uint8_t* p, std::size_t n, std::uint64_t mask,
                               std::uint64_t& h) {
    std::uint64_t x = h;
    for (std::size_t i = 0; i < n; ++i) {
        x = roll(x, p[i]);
        if ((x & mask) == 0) {
            h = x;
            return i;
        }
    }
    h = x;
    return kNone;
}

// Same contract as scan_scalar, but faster: one hash chain is latency-bound
// (shift + add per byte), so the span is cut into rounds of kLanes blocks of
// kLaneLen bytes hashed in lock step. A Gear hash depends only on the last
// 64 bytes, so lane k>0 is exact after rolling the 64 bytes before its block
// from 0 (all of them lie at or past the min_size position, so the skip rule
// holds). 3 x 256 measured best here; longer blocks with fewer warm-ups lost
// more when a cut in a later lane left lane 0 to finish alone.
constexpr int kLanes = 3;
constexpr std::size_t kLaneLen = 256;
constexpr std::size_t kWarmup = 64;
static_assert(kLaneLen >= kWarmup);

std::size_t scan(const std::uint8_t* p, std::size_t n, std::uint64_t mask, std::uint64_t& h) {
    constexpr std::size_t kRound = kLanes * kLaneLen;
    std::size_t base = 0;
    std::uint64_t carried = h;
    for (; n - base >= kRound; base += kRound) {
        const std::uint8_t* q = p + base;
        std::uint64_t x[kLanes];
        x[0] = carried;
        for (int k = 1; k < kLanes; ++k) x[k] = 0;
        for (std::size_t j = 0; j < kWarmup; ++j) {
            for (int k = 1; k < kLanes; ++k) x[k] = roll(x[k], q[k * kLaneLen - kWarmup + j]);
        }
        for (std::size_t j = 0; j < kLaneLen; ++j) {
#pragma GCC unroll 8
            for (int k = 0; k < kLanes; ++k) {
                x[k] = roll(x[k], q[k * kLaneLen + j]);
                if ((x[k] & mask) == 0) [[unlikely]] {
                    // Lanes below k saw no cut up to step j, but the rest of
                    // their blocks lies before this candidate: finish them.
                    for (int m = 0; m < k; ++m) {
                        const std::size_t from = m * kLaneLen + j + 1;
                        const std::size_t r = scan_scalar(q + from, kLaneLen - j - 1, mask, x[m]);
                        if (r != kNone) return base + from + r;
                    }
                    return base + k * kLaneLen + j;
                }
            }
        }
        carried = x[kLanes - 1];
    }
    h = carried;
    const std::size_t r = scan_scalar(p + base, n - base, mask, h);
    return r == kNone ? kNone : base + r;
}

class CdcChunker final : public Chunker {
public:
    explicit CdcChunker(const ChunkingParams& p)
        : min_(p.min_size),
          avg_(p.avg_size),
          max_(p.max_size),
          mask_strict_(high_mask(std::countr_zero(p.avg_size) + 2)),
          mask_loose_(high_mask(std::countr_zero(p.avg_size) - 2)) {}

    void reset(std::uint64_t /*offset*/) override {
        pending_ = 0;
        hash_ = 0;
    }

    std::size_t next_cut(const std::uint8_t* data, std::size_t len) override {
        std::size_t i = 0;
        if (pending_ < min_) {
            const std::size_t skip = std::min<std::uint64_t>(min_ - pending_, len);
            pending_ += skip;
            i += skip;
        }
        if (i < len && pending_ < avg_) {
            const std::size_t n = std::min<std::uint64_t>(avg_ - pending_, len - i);
            const std::size_t r = scan(data + i, n, mask_strict_, hash_);
            if (r != kNone) return cut(i + r + 1);
            pending_ += n;
            i += n;
        }
        if (i < len) {
            const std::size_t n = std::min<std::uint64_t>(max_ - pending_, len - i);
            const std::size_t r = scan(data + i, n, mask_loose_, hash_);
            if (r != kNone) return cut(i + r + 1);
            pending_ += n;
            i += n;
            if (pending_ == max_) return cut(i);
        }
        return kNoCut;
    }

    std::uint64_t pending() const override { return pending_; }

private:
    std::size_t cut(std::size_t consumed) {
        pending_ = 0;
        hash_ = 0;
        return consumed;
    }

    const std::uint64_t min_, avg_, max_;
    const std::uint64_t mask_strict_;  // before avg: cuts are 4x rarer than 1/avg
    const std::uint64_t mask_loose_;   // after avg: cuts are 4x likelier than 1/avg
    std::uint64_t pending_ = 0;        // bytes since the last cut
    std::uint64_t hash_ = 0;           // Gear hash of the bytes past min_ (last 64 matter)
};

}  // namespace

std::unique_ptr<Chunker> make_cdc_chunker(const ChunkingParams& params) {
    return std::make_unique<CdcChunker>(params);
}

const std::uint64_t* gear_table() { return kGear.data(); }

}  // namespace hiodsfs::chunk_detail
