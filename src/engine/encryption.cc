// Encryption at rest (docs/architecture.md, "Encryption at rest"): an
// encrypted store's key checked at open, and its chunks sealed as they are
// stored. Reading opens them in chunk_content.cc; the fingerprints are
// keyed where they are computed (write_path.cc, file_ops.cc).
#include "engine/encryption.h"

#include "engine/engine_impl.h"

namespace hiodsfs {

namespace {

std::string to_hex(std::span<const std::uint8_t> bytes) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::uint8_t b : bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

// FORMAT's id is checked as 32 lowercase hex digits when it is parsed.
std::vector<std::uint8_t> from_hex(const std::string& hex) {
    auto nibble = [](char c) { return static_cast<std::uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
    std::vector<std::uint8_t> out(hex.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    return out;
}

}  // namespace

Status new_store_encryption(const StoreKey& key, StoreEncryption* e, std::unique_ptr<ChunkCipher>* out) {
    std::vector<std::uint8_t> id(16);
    HIODSFS_TRY(random_bytes(id));
    std::unique_ptr<ChunkCipher> cipher;
    HIODSFS_TRY(ChunkCipher::make(key, id, &cipher));
    e->cipher = StoreEncryption::kCipher;
    e->id = to_hex(id);
    e->check = cipher->key_check().hex();
    *out = std::move(cipher);
    return Status::ok();
}

Status open_store_cipher(const std::string& dir, const StoreEncryption& e, const StoreKey& key,
                         std::unique_ptr<ChunkCipher>* out) {
    std::unique_ptr<ChunkCipher> cipher;
    HIODSFS_TRY(ChunkCipher::make(key, from_hex(e.id), &cipher));
    if (cipher->key_check().hex() != e.check)
        return Status::error(EACCES, "store " + dir + ": the key given is not this store's key; nothing was changed");
    *out = std::move(cipher);
    return Status::ok();
}

StoreFormat EngineImpl::current_format() const {
    StoreFormat f{encryption_.on() ? kEncryptedFormatVersion : kFormatVersion, chunking_, tier_name()};
    f.encryption = encryption_;
    return f;
}

Status EngineImpl::open_encryption(const std::string& dir, const StoreFormat* format) {
    const bool key = opts_.key != nullptr;
    const bool encrypted = format != nullptr ? format->encryption.on() : key;
    if (encrypted && opts_.segments.tier != nullptr)
        return Status::error(ENOTSUP, "store " + dir + ": encryption with a RADOS tier is not supported yet");
    if (format != nullptr && !encrypted && key)
        return Status::error(EINVAL, "store " + dir + " is not encrypted, and a key was given: mount it without "
                                                     "key_file= (a store is encrypted when it is made)");
    if (encrypted && !key && opts_.read_only && opts_.without_key && format != nullptr) {
        encryption_ = format->encryption;  // chunks do not open: decode_chunk says there is no key
        return Status::ok();
    }
    if (encrypted && !key)
        return Status::error(EACCES, "store " + dir + " is encrypted: give its key with -o key_file=FILE");
    if (!encrypted) return Status::ok();
    if (format == nullptr) return new_store_encryption(*opts_.key, &encryption_, &cipher_);
    HIODSFS_TRY(open_store_cipher(dir, format->encryption, *opts_.key, &cipher_));
    encryption_ = format->encryption;
    return Status::ok();
}

Status EngineImpl::seal_chunk(ChunkId id, const std::uint8_t* data, std::uint32_t len, const ChunkPayload* payload,
                              std::vector<std::uint8_t>* out) const {
    const bool encoded = payload != nullptr && payload->encoded;
    return seal_chunk_payload(*cipher_, id, reinterpret_cast<const char*>(encoded ? payload->data : data),
                              encoded ? payload->length : len, encoded, out);
}

}  // namespace hiodsfs
