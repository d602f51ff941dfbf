#include "chunk/codec.h"

#include <lz4.h>
#include <zdict.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/little_endian.h"

namespace hiodsfs {
namespace {

constexpr std::uint8_t kKnownMethods = 2;

std::string bad_payload(const std::string& what) { return "compressed chunk: " + what; }

constexpr std::uint8_t kCompactPrefix = 0x80;
// The compact prefix's first byte: 0x80 | flags << 2 | method.
constexpr std::uint8_t kFlagBits = 0x7c, kMethodBits = 0x03;
constexpr std::uint8_t kSealedFlag = 0x04;

// LEB128 of a 32-bit value: 1 to 5 bytes.
std::uint32_t leb128_bytes(std::uint32_t v) {
    std::uint32_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}
char* put_leb128(char* p, std::uint32_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<char>(v | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}
// Only the shortest form, and nothing past 32 bits.
bool get_leb128(const char* p, std::uint32_t len, std::uint32_t* pos, std::uint32_t* out) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*pos >= len) return false;
        const auto b = static_cast<std::uint8_t>(p[(*pos)++]);
        v |= std::uint64_t{b & 0x7fu} << shift;
        if ((b & 0x80) == 0) {
            if ((b == 0 && shift > 0) || v > std::numeric_limits<std::uint32_t>::max()) return false;
            *out = static_cast<std::uint32_t>(v);
            return true;
        }
    }
    return false;
}

}  // namespace

bool Compression::stronger_than(CompressionMethod stored, int stored_level) const {
    if (method == CompressionMethod::kNone || (method == stored && level <= stored_level)) return false;
    if (stored == CompressionMethod::kNone) return true;
    if (method == CompressionMethod::kZstd) return stored == CompressionMethod::kLz4 || level > stored_level;
    return false;  // lz4 is never stronger than a zstd chunk
}

Status parse_compression(std::string_view text, Compression* out) {
    Compression c;
    auto bad = [&](const std::string& why) {
        return Status::error(EINVAL, "compression '" + std::string(text) + "': " + why +
                                         " (none, lz4, zstd or zstd:LEVEL with LEVEL 1-" +
                                         std::to_string(kMaxZstdLevel) + ")");
    };
    if (text == "none") {
        *out = c;
        return Status::ok();
    }
    if (text == "lz4") {
        c.method = CompressionMethod::kLz4;
        *out = c;
        return Status::ok();
    }
    if (text.substr(0, 4) != "zstd") return bad("unknown method");
    c.method = CompressionMethod::kZstd;
    c.level = kDefaultZstdLevel;
    if (text.size() > 4) {
        if (text[4] != ':' || text.size() == 5 || text.size() > 7) return bad("bad level");
        int level = 0;
        for (char ch : text.substr(5)) {
            if (ch < '0' || ch > '9') return bad("bad level");
            level = level * 10 + (ch - '0');
        }
        if (level < 1 || level > kMaxZstdLevel) return bad("level out of range");
        c.level = level;
    }
    *out = c;
    return Status::ok();
}

std::string compression_name(const Compression& c) {
    switch (c.method) {
        case CompressionMethod::kNone: return "none";
        case CompressionMethod::kLz4: return "lz4";
        case CompressionMethod::kZstd: return "zstd:" + std::to_string(c.level);
    }
    return "?";
}

Status Dictionary::make(std::uint32_t id, std::string bytes, std::shared_ptr<const Dictionary>* out) {
    if (id == 0) return Status::error(EINVAL, "dictionary id 0 is reserved");
    std::shared_ptr<Dictionary> d(new Dictionary(id, std::move(bytes)));
    d->ddict_ = ZSTD_createDDict(d->bytes_.data(), d->bytes_.size());
    if (d->ddict_ == nullptr) return Status::error(EINVAL, "dictionary " + std::to_string(id) + " is not one zstd accepts");
    *out = std::move(d);
    return Status::ok();
}

Dictionary::~Dictionary() {
    ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
    for (auto& [level, cdict] : cdicts_) ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict));
}

void* Dictionary::compression_tables(int level) const {
    std::lock_guard lock(cdict_mu_);
    void*& slot = cdicts_[level];
    if (slot == nullptr) slot = ZSTD_createCDict(bytes_.data(), bytes_.size(), level);
    return slot;
}

void DictionarySet::add(std::shared_ptr<const Dictionary> d) {
    std::unique_lock lock(mu_);
    by_id_[d->id()] = std::move(d);
}

std::shared_ptr<const Dictionary> DictionarySet::find(std::uint32_t id) const {
    std::shared_lock lock(mu_);
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<const Dictionary> DictionarySet::newest() const {
    std::shared_lock lock(mu_);
    return by_id_.empty() ? nullptr : by_id_.rbegin()->second;
}

std::size_t DictionarySet::size() const {
    std::shared_lock lock(mu_);
    return by_id_.size();
}

std::vector<std::uint32_t> DictionarySet::ids() const {
    std::shared_lock lock(mu_);
    std::vector<std::uint32_t> out;
    for (const auto& [id, d] : by_id_) out.push_back(id);
    return out;
}

bool read_codec_prefix(const char* payload, std::uint32_t len, CodecPrefix* out) {
    if (len < 2) return false;
    const auto first = static_cast<std::uint8_t>(payload[0]);
    if (first & kCompactPrefix) {
        // Sealed is the only flag; a payload with another is not one to decode.
        const std::uint8_t flags = first & kFlagBits;
        if ((flags & ~kSealedFlag) != 0) return false;
        out->sealed = flags != 0;
        const std::uint8_t method = first & kMethodBits;
        if ((method == 0 && !out->sealed) || method > kKnownMethods) return false;
        std::uint32_t pos = 2;
        if (!get_leb128(payload, len, &pos, &out->dictionary) || !get_leb128(payload, len, &pos, &out->raw_length))
            return false;
        out->method = static_cast<CompressionMethod>(method);
        out->level = static_cast<std::int8_t>(payload[1]);
        out->bytes = pos;
        return out->raw_length > 0;
    }
    if (len < kMaxCodecPrefixBytes) return false;
    if (first == 0 || first > kKnownMethods || payload[2] != 0 || payload[3] != 0) return false;
    out->method = static_cast<CompressionMethod>(first);
    out->sealed = false;
    out->level = static_cast<std::int8_t>(payload[1]);
    out->dictionary = get_le32(payload + 4);
    out->raw_length = get_le32(payload + 8);
    out->bytes = kMaxCodecPrefixBytes;
    return out->raw_length > 0;
}

ChunkEncoder::ChunkEncoder() : lz4_state_(static_cast<std::size_t>(LZ4_sizeofState())) {}

ChunkEncoder::~ChunkEncoder() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_)); }

bool looks_incompressible(const char* data, std::uint32_t len) {
    // 1 KiB of the chunk (short chunks: all of it), in 16 runs of 64 bytes
    // spread over it: single bytes at a fixed stride would see only one
    // lane of data laid out in 8-byte words (fio's random buffers score 4.3
    // bits that way against 7.9 in full). An order-0 entropy near 8 bits
    // leaves nothing for zstd's literals coder, and a chunk with repeats
    // long enough for the match finder rarely scores it.
    constexpr std::uint32_t kSample = 1024, kRun = 64, kRuns = kSample / kRun;
    if (len < 256) return false;
    const std::uint32_t n = len < kSample ? len : kSample;
    std::array<std::uint32_t, 256> counts{};
    if (n == len) {
        for (std::uint32_t i = 0; i < n; ++i) ++counts[static_cast<std::uint8_t>(data[i])];
    } else {
        const std::uint64_t step = (len - kRun) / (kRuns - 1);
        for (std::uint32_t r = 0; r < kRuns; ++r) {
            const char* run = data + r * step;
            for (std::uint32_t i = 0; i < kRun; ++i) ++counts[static_cast<std::uint8_t>(run[i])];
        }
    }
    // h = -sum p log2 p = log2 n - (sum c log2 c) / n, with c log2 c from a
    // table: a log2 per byte value cost more than the counting (it runs
    // for every new chunk of an inline write).
    static const std::array<double, kSample + 1> c_log2_c = [] {
        std::array<double, kSample + 1> t{};
        for (std::uint32_t c = 2; c <= kSample; ++c) t[c] = c * std::log2(static_cast<double>(c));
        return t;
    }();
    double sum = 0;
    for (std::uint32_t c : counts) sum += c_log2_c[c];
    const double h = std::log2(static_cast<double>(n)) - sum / n;
    // An estimate from n bytes runs about 255 / (2 n ln 2) bits low (0.18
    // for 1 KiB: uniform bytes score 7.8); text scores 4-6. Above
    // 8 x kWorthIt bits a byte, the literals coder cannot bring the chunk
    // to kWorthIt of its size.
    return h > 8.0 * kWorthIt - 255.0 / (2.0 * n * std::log(2.0));
}

ChunkEncoder::Payload ChunkEncoder::encode(const char* raw, std::uint32_t len, const Compression& c,
                                           const Dictionary* dict, bool sampled) {
    const Payload as_is{raw, len, false};
    if (c.none() || len <= kMaxCodecPrefixBytes) return as_is;
    if (!sampled && looks_incompressible(raw, len)) {
        ++skipped_;
        return as_is;
    }
    // Room only for a result worth keeping: a compressor that cannot fit
    // fails early instead of finishing a useless job.
    const auto limit = static_cast<std::uint32_t>(len * kWorthIt);
    if (limit <= kMaxCodecPrefixBytes) return as_is;
    const std::uint32_t room = limit - kMaxCodecPrefixBytes;
    if (out_.size() < std::size_t{kMaxCodecPrefixBytes} + room) out_.resize(kMaxCodecPrefixBytes + std::size_t{room});
    // The compressed bytes go after room for the longest prefix, and the
    // prefix right before them once its length is known.
    char* body = out_.data() + kMaxCodecPrefixBytes;
    std::size_t got = 0;
    std::uint32_t dict_id = 0;
    if (c.method == CompressionMethod::kLz4) {
        const int n = LZ4_compress_fast_extState(lz4_state_.data(), raw, body, static_cast<int>(len),
                                                 static_cast<int>(room), 1);
        got = n > 0 ? static_cast<std::size_t>(n) : 0;
    } else {
        if (zstd_ == nullptr) zstd_ = ZSTD_createCCtx();
        auto* cctx = static_cast<ZSTD_CCtx*>(zstd_);
        std::size_t r;
        if (dict != nullptr) {
            r = ZSTD_compress_usingCDict(cctx, body, room, raw, len,
                                         static_cast<const ZSTD_CDict*>(dict->compression_tables(c.level)));
            dict_id = dict->id();
        } else {
            r = ZSTD_compressCCtx(cctx, body, room, raw, len, c.level);
        }
        got = ZSTD_isError(r) ? 0 : r;
    }
    if (got == 0) {
        ++skipped_;
        return as_is;
    }
    ++compressed_;
    const std::uint32_t prefix = 2 + leb128_bytes(dict_id) + leb128_bytes(len);
    char* p = body - prefix;
    p[0] = static_cast<char>(kCompactPrefix | static_cast<std::uint8_t>(c.method));
    p[1] = static_cast<char>(static_cast<std::int8_t>(c.level));
    put_leb128(put_leb128(p + 2, dict_id), len);
    return Payload{p, static_cast<std::uint32_t>(prefix + got), true, dict_id};
}

ChunkEncoder& thread_chunk_encoder() {
    thread_local ChunkEncoder encoder;
    return encoder;
}

Status train_dictionary(std::string_view samples, const std::vector<std::size_t>& sizes,
                        std::size_t capacity, std::string* out) {
    std::size_t total = 0;
    for (std::size_t n : sizes) total += n;
    if (sizes.empty() || total != samples.size())
        return Status::error(EINVAL, "no compression dictionary: no samples to train it on");
    std::string dict(capacity, '\0');
    const std::size_t n = ZDICT_trainFromBuffer(dict.data(), dict.size(), samples.data(),
                                                sizes.data(), static_cast<unsigned>(sizes.size()));
    if (ZDICT_isError(n)) {
        return Status::error(EINVAL, "no compression dictionary from " +
                                         std::to_string(sizes.size()) + " samples of " +
                                         std::to_string(total) +
                                         " bytes: " + ZDICT_getErrorName(n));
    }
    dict.resize(n);
    *out = std::move(dict);
    return Status::ok();
}

namespace {

// The associated data a sealed payload is bound to: the chunk's id and the
// payload's prefix (on the stack: every seal and open makes one).
struct SealingAd {
    std::array<std::uint8_t, 8 + kMaxCodecPrefixBytes> bytes{};
    std::size_t size = 0;
    SealingAd(ChunkId id, const char* prefix, std::uint32_t prefix_len) : size(8 + prefix_len) {
        put_le64(reinterpret_cast<char*>(bytes.data()), id);
        std::memcpy(bytes.data() + 8, prefix, prefix_len);
    }
    std::span<const std::uint8_t> span() const { return {bytes.data(), size}; }
};

}  // namespace

Status seal_chunk_payload(const ChunkCipher& cipher, ChunkId id, const char* payload, std::uint32_t len,
                          bool encoded, std::vector<std::uint8_t>* out) {
    CodecPrefix p;
    p.raw_length = len;
    const char* body = payload;
    std::uint32_t body_len = len;
    if (encoded) {
        if (!read_codec_prefix(payload, len, &p) || p.sealed)
            return Status::error(EINVAL, "sealing a chunk: not an encoding to seal");
        body = payload + p.bytes;
        body_len = len - p.bytes;
    }
    char prefix[kMaxCodecPrefixBytes];
    prefix[0] = static_cast<char>(kCompactPrefix | kSealedFlag | static_cast<std::uint8_t>(p.method));
    prefix[1] = static_cast<char>(static_cast<std::int8_t>(p.level));
    const char* end = put_leb128(put_leb128(prefix + 2, p.dictionary), p.raw_length);
    const auto prefix_len = static_cast<std::uint32_t>(end - prefix);
    out->assign(reinterpret_cast<const std::uint8_t*>(prefix), reinterpret_cast<const std::uint8_t*>(end));
    out->reserve(prefix_len + body_len + cipher.overhead());
    return cipher.seal(std::span(reinterpret_cast<const std::uint8_t*>(body), body_len),
                       SealingAd(id, prefix, prefix_len).span(), out);
}

Status decode_chunk(const char* payload, std::uint32_t len, char* out, std::uint32_t expect_raw,
                    const DictionarySet* dicts, const ChunkCipher* cipher, ChunkId id) {
    CodecPrefix p;
    if (!read_codec_prefix(payload, len, &p)) return Status::error(EIO, bad_payload("unknown encoding"));
    if (p.raw_length != expect_raw) {
        return Status::error(EIO, bad_payload("holds " + std::to_string(p.raw_length) + " bytes, expected " +
                                              std::to_string(expect_raw)));
    }
    const char* body = payload + p.bytes;
    std::size_t body_len = len - p.bytes;
    if (p.sealed) {
        if (cipher == nullptr) return Status::error(EIO, "encrypted chunk, and no key to open it");
        const std::span<const std::uint8_t> sealed(reinterpret_cast<const std::uint8_t*>(body), body_len);
        if (p.method == CompressionMethod::kNone) {
            // Stored as it is: opened straight into the caller's buffer.
            const std::size_t overhead = cipher->overhead();
            if (body_len < overhead || body_len - overhead != expect_raw)
                return Status::error(EIO, "encrypted chunk: holds " +
                                              std::to_string(body_len < overhead ? 0 : body_len - overhead) +
                                              " bytes, expected " + std::to_string(expect_raw));
            Status st = cipher->open(sealed, SealingAd(id, payload, p.bytes).span(),
                                     std::span(reinterpret_cast<std::uint8_t*>(out), expect_raw));
            if (!st) return Status::error(EIO, "encrypted chunk: " + st.message());
            return Status::ok();
        }
        thread_local std::vector<std::uint8_t> plain;
        Status st = cipher->open(sealed, SealingAd(id, payload, p.bytes).span(), &plain);
        if (!st) return Status::error(EIO, "encrypted chunk: " + st.message());
        body = reinterpret_cast<const char*>(plain.data());
        body_len = plain.size();
    }
    if (p.method == CompressionMethod::kLz4) {
        if (p.dictionary != 0) return Status::error(EIO, bad_payload("lz4 with a dictionary"));
        const int n = LZ4_decompress_safe(body, out, static_cast<int>(body_len), static_cast<int>(expect_raw));
        if (n < 0 || static_cast<std::uint32_t>(n) != expect_raw)
            return Status::error(EIO, bad_payload("lz4 data is damaged"));
        return Status::ok();
    }
    thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
    std::size_t r;
    if (p.dictionary != 0) {
        std::shared_ptr<const Dictionary> d = dicts != nullptr ? dicts->find(p.dictionary) : nullptr;
        if (d == nullptr) {
            return Status::error(EIO, bad_payload("dictionary " + std::to_string(p.dictionary) +
                                                  " is not in the store"));
        }
        r = ZSTD_decompress_usingDDict(dctx.get(), out, expect_raw, body, body_len,
                                       static_cast<const ZSTD_DDict*>(d->decompression_tables()));
    } else {
        r = ZSTD_decompressDCtx(dctx.get(), out, expect_raw, body, body_len);
    }
    if (ZSTD_isError(r)) return Status::error(EIO, bad_payload(std::string("zstd: ") + ZSTD_getErrorName(r)));
    if (r != expect_raw) return Status::error(EIO, bad_payload("zstd data makes too few bytes"));
    return Status::ok();
}

}  // namespace hiodsfs
