#include "engine/sealed_tier.h"

#include <cstring>

#include "engine/key_slot.h"
#include "engine/meta_tier.h"

namespace hiodsfs {

namespace {

constexpr std::size_t kLengthBytes = 4;

std::string object_ad(const std::string& name) { return "hiodsfs tier object " + name; }

std::span<const std::uint8_t> bytes_of(const void* data, std::size_t len) {
    return {static_cast<const std::uint8_t*>(data), len};
}

}  // namespace

bool SealedTier::plain(const std::string& name) { return name == kFormatObject || name == kKeySlotObject; }

Status SealedTier::frame(const std::string& name, const void* data, std::size_t len, std::vector<char>* out) const {
    std::vector<std::uint8_t> sealed;
    const std::string ad = object_ad(name);
    HIODSFS_TRY(cipher_->seal(bytes_of(data, len), bytes_of(ad.data(), ad.size()), &sealed));
    if (sealed.size() > UINT32_MAX) return Status::error(EFBIG, "metadata object " + name + " too large to seal");
    const auto n = static_cast<std::uint32_t>(sealed.size());
    out->resize(kLengthBytes + sealed.size());
    for (std::size_t i = 0; i < kLengthBytes; ++i) (*out)[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    std::memcpy(out->data() + kLengthBytes, sealed.data(), sealed.size());
    return Status::ok();
}

Status SealedTier::put_object(const std::string& name, const void* data, std::size_t len) {
    if (plain(name)) return base_->put_object(name, data, len);
    std::vector<char> framed;
    HIODSFS_TRY(frame(name, data, len, &framed));
    return base_->put_object(name, framed.data(), framed.size());
}

Status SealedTier::append_object(const std::string& name, const void* data, std::size_t len) {
    if (plain(name)) return base_->append_object(name, data, len);
    std::vector<char> framed;
    HIODSFS_TRY(frame(name, data, len, &framed));
    return base_->append_object(name, framed.data(), framed.size());
}

Status SealedTier::get_object(const std::string& name, std::vector<char>* out) {
    if (plain(name)) return base_->get_object(name, out);
    std::vector<char> raw;
    HIODSFS_TRY(base_->get_object(name, &raw));
    const std::string ad = object_ad(name);
    out->clear();
    std::vector<std::uint8_t> plain;
    std::size_t at = 0;
    bool whole = true;
    while (at < raw.size()) {
        if (raw.size() - at < kLengthBytes) {
            whole = false;
            break;
        }
        std::uint32_t n = 0;
        for (std::size_t i = 0; i < kLengthBytes; ++i)
            n |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(raw[at + i])) << (8 * i);
        if (raw.size() - at - kLengthBytes < n ||
            !cipher_->open(bytes_of(raw.data() + at + kLengthBytes, n), bytes_of(ad.data(), ad.size()), &plain)) {
            whole = false;
            break;
        }
        out->insert(out->end(), plain.begin(), plain.end());
        at += kLengthBytes + n;
    }
    if (!whole) out->insert(out->end(), kLengthBytes, '\0');
    return Status::ok();
}

}  // namespace hiodsfs
