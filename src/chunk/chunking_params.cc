// ChunkingParams: the chunking configuration a store is created with. It is
// recorded in the store and compared on open, so describe() and parse() must
// stay stable across versions.
#include <cerrno>
#include <charconv>
#include <string_view>
#include <system_error>

#include "chunk/chunker_impl.h"
#include "hiodsfs/chunker.h"

namespace hiodsfs {
namespace {

constexpr std::uint32_t kMinAllowed = 256;
constexpr std::uint32_t kMaxAllowed = 4u << 20;

bool is_pow2(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

Status check_size(const char* what, std::uint32_t v) {
    if (v < kMinAllowed || v > kMaxAllowed) {
        return Status::error(EINVAL, std::string("chunking: ") + what + " size " +
                                         std::to_string(v) + " is out of range (256 B to 4 MiB)");
    }
    if (!is_pow2(v)) {
        return Status::error(EINVAL, std::string("chunking: ") + what + " size " +
                                         std::to_string(v) + " is not a power of two");
    }
    return Status::ok();
}

// Parses one decimal size; the whole text must be digits.
Status parse_size(std::string_view text, const char* what, std::uint32_t* out) {
    std::uint32_t v = 0;
    const char* first = text.data();
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (text.empty() || ec != std::errc() || ptr != last) {
        return Status::error(EINVAL, std::string("chunking: ") + what + " size '" +
                                         std::string(text) + "' is not a decimal number of bytes");
    }
    *out = v;
    return Status::ok();
}

}  // namespace

ChunkingParams ChunkingParams::fixed(std::uint32_t size) {
    ChunkingParams p;
    p.kind = Kind::kFixed;
    p.min_size = p.avg_size = p.max_size = size;
    return p;
}

ChunkingParams ChunkingParams::cdc(std::uint32_t min, std::uint32_t avg, std::uint32_t max) {
    ChunkingParams p;
    p.kind = Kind::kCdc;
    p.min_size = min;
    p.avg_size = avg;
    p.max_size = max;
    return p;
}

Status ChunkingParams::validate() const {
    if (kind != Kind::kFixed && kind != Kind::kCdc) {
        return Status::error(
            EINVAL, "chunking: unknown kind " + std::to_string(static_cast<unsigned>(kind)));
    }
    if (kind == Kind::kFixed) return check_size("fixed chunk", avg_size);
    HIODSFS_TRY(check_size("minimum", min_size));
    HIODSFS_TRY(check_size("average", avg_size));
    HIODSFS_TRY(check_size("maximum", max_size));
    if (!(min_size < avg_size && avg_size < max_size)) {
        return Status::error(EINVAL, "chunking: cdc sizes must satisfy min < avg < max, got " +
                                         std::to_string(min_size) + "/" + std::to_string(avg_size) +
                                         "/" + std::to_string(max_size));
    }
    return Status::ok();
}

std::string ChunkingParams::describe() const {
    if (kind == Kind::kFixed) return "fixed:" + std::to_string(avg_size);
    return "cdc:" + std::to_string(min_size) + "/" + std::to_string(avg_size) + "/" +
           std::to_string(max_size);
}

Status ChunkingParams::parse(const std::string& text, ChunkingParams* out) {
    std::string_view s(text);
    const auto colon = s.find(':');
    if (colon == std::string_view::npos) {
        return Status::error(
            EINVAL, "chunking: '" + text + "' is not of the form fixed:SIZE or cdc:MIN/AVG/MAX");
    }
    const std::string_view kind = s.substr(0, colon);
    const std::string_view rest = s.substr(colon + 1);
    ChunkingParams p;
    if (kind == "fixed") {
        std::uint32_t size = 0;
        HIODSFS_TRY(parse_size(rest, "fixed chunk", &size));
        p = fixed(size);
    } else if (kind == "cdc") {
        const auto s1 = rest.find('/');
        const auto s2 = s1 == std::string_view::npos ? s1 : rest.find('/', s1 + 1);
        if (s2 == std::string_view::npos || rest.find('/', s2 + 1) != std::string_view::npos) {
            return Status::error(
                EINVAL, "chunking: '" + text + "' needs exactly three sizes, cdc:MIN/AVG/MAX");
        }
        std::uint32_t min = 0, avg = 0, max = 0;
        HIODSFS_TRY(parse_size(rest.substr(0, s1), "minimum", &min));
        HIODSFS_TRY(parse_size(rest.substr(s1 + 1, s2 - s1 - 1), "average", &avg));
        HIODSFS_TRY(parse_size(rest.substr(s2 + 1), "maximum", &max));
        p = cdc(min, avg, max);
    } else {
        return Status::error(
            EINVAL, "chunking: unknown kind '" + std::string(kind) + "' (expected fixed or cdc)");
    }
    HIODSFS_TRY(p.validate());
    *out = p;
    return Status::ok();
}

std::unique_ptr<Chunker> Chunker::make(const ChunkingParams& params) {
    // An invalid configuration gets no chunker rather than a guessed one:
    // cut points are part of the stored data.
    if (!params.validate().is_ok()) return nullptr;
    if (params.kind == ChunkingParams::Kind::kFixed) {
        return chunk_detail::make_fixed_chunker(params.avg_size);
    }
    return chunk_detail::make_cdc_chunker(params);
}

std::vector<std::uint32_t> chunk_lengths(const ChunkingParams& params, const std::uint8_t* data,
                                         std::size_t len) {
    std::vector<std::uint32_t> out;
    auto chunker = Chunker::make(params);
    if (!chunker) return out;
    std::size_t start = 0;  // of the open chunk
    std::size_t pos = 0;
    while (pos < len) {
        const std::size_t n = chunker->next_cut(data + pos, len - pos);
        if (n == Chunker::kNoCut) break;
        pos += n;
        out.push_back(static_cast<std::uint32_t>(pos - start));
        start = pos;
    }
    if (start < len) out.push_back(static_cast<std::uint32_t>(len - start));
    return out;
}

}  // namespace hiodsfs
