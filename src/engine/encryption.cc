// Encryption at rest (docs/architecture.md, "Encryption at rest"): an
// encrypted store's key checked at open, and its chunks sealed as they are
// stored. Reading opens them in chunk_content.cc; the fingerprints are
// keyed where they are computed (write_path.cc, file_ops.cc).
#include "engine/encryption.h"

#include "common/hex.h"
#include "engine/engine_impl.h"
#include "engine/key_slot.h"
#include "engine/meta_tier.h"

#include <cstring>

namespace hiodsfs {

Status new_store_encryption(const StoreKey& key, StoreEncryption* e, std::unique_ptr<ChunkCipher>* out,
                            bool legacy) {
    std::vector<std::uint8_t> id(16);
    HIODSFS_TRY(random_bytes(id));
    std::unique_ptr<ChunkCipher> cipher;
    HIODSFS_TRY(ChunkCipher::make(key, id, &cipher, legacy ? ChunkCipher::Mode::kAesGcm : ChunkCipher::Mode::kXaesGcm));
    e->cipher = legacy ? StoreEncryption::kAesGcmCipher : StoreEncryption::kCipher;
    e->id = to_hex(id);
    e->check = cipher->key_check().hex();
    *out = std::move(cipher);
    return Status::ok();
}

Status open_store_cipher(const std::string& dir, const StoreEncryption& e, const StoreKey& key,
                         std::unique_ptr<ChunkCipher>* out) {
    std::unique_ptr<ChunkCipher> cipher;
    std::vector<std::uint8_t> id;
    if (!from_hex(e.id, &id)) return Status::error(EUCLEAN, "store " + dir + ": bad store id in FORMAT");
    const auto mode = e.cipher == StoreEncryption::kAesGcmCipher ? ChunkCipher::Mode::kAesGcm
                                                                 : ChunkCipher::Mode::kXaesGcm;
    HIODSFS_TRY(ChunkCipher::make(key, id, &cipher, mode));
    if (cipher->key_check().hex() != e.check)
        return Status::error(EACCES, "store " + dir + ": the key given is not this store's key; nothing was changed");
    *out = std::move(cipher);
    return Status::ok();
}

Status open_sealed_tier(SegmentTier* tier, const StoreKey* key, const Passphrase* passphrase,
                        std::unique_ptr<ChunkCipher>* cipher, std::unique_ptr<SealedTier>* out,
                        StoreEncryption* encryption, StoreKey* unlocked) {
    std::string text;
    Status got = get_format(tier, &text);
    if (got.err() == ENOENT) return Status::ok();
    HIODSFS_TRY(got);
    StoreFormat format;
    HIODSFS_TRY(parse_store_format(text, tier->describe() + " (its format object)", &format));
    if (!format.encryption.on()) return Status::ok();
    if (key == nullptr && passphrase == nullptr)
        return Status::error(EACCES, "store " + tier->describe() + " is encrypted: give its key with key_file= or "
                                     "key=ask (--key-file FILE or --key ask for hiodsfs-fsck)");
    HIODSFS_TRY(open_store_key(KeySlotPlace::pool(tier), format.encryption, key, passphrase, cipher, unlocked));
    *out = std::make_unique<SealedTier>(tier, cipher->get());
    if (encryption != nullptr) *encryption = format.encryption;
    return Status::ok();
}

StoreFormat EngineImpl::current_format() const {
    StoreFormat f{encryption_.on() ? kEncryptedFormatVersion : kFormatVersion, chunking_, tier_name()};
    f.encryption = encryption_;
    return f;
}

Status EngineImpl::open_encryption(const std::string& dir, const StoreFormat* format) {
    const bool key = opts_.key != nullptr || opts_.passphrase != nullptr;
    const bool encrypted = format != nullptr ? format->encryption.on() : key;
    if (opts_.key != nullptr && opts_.passphrase != nullptr)
        return Status::error(EINVAL, "store " + dir + ": give its key file or a passphrase, not both");
    if (format != nullptr && !encrypted && key)
        return Status::error(EINVAL, "store " + dir + " is not encrypted, and a key was given: mount it without "
                                                     "key_file= or key= (a store is encrypted when it is made)");
    if (encrypted && !key && opts_.read_only && opts_.without_key && format != nullptr) {
        encryption_ = format->encryption;  // chunks do not open: decode_chunk says there is no key
        return Status::ok();
    }
    if (encrypted && !key)
        return Status::error(EACCES, "store " + dir + " is encrypted: give its key with -o key_file=FILE or key=ask");
    if (!encrypted) return Status::ok();
    // A pool that holds the FORMAT of a store never made whole: its cipher
    // (seal_tier's) is the store's, and stays.
    if (format == nullptr) return cipher_ != nullptr ? Status::ok() : new_encrypted_store(dir);
    if (cipher_ != nullptr) {
        // Made already, from the pool's FORMAT (seal_tier): the same store's.
        if (format->encryption != encryption_)
            return Status::error(EUCLEAN, "store " + dir + ": its FORMAT and the pool's name different keys");
    } else {
        // A passphrase opens a local store's slot (a RADOS store's is in its
        // pool: seal_tier).
        HIODSFS_TRY(open_store_key({env_, dir}, format->encryption, opts_.key.get(), opts_.passphrase.get(), &cipher_));
    }
    encryption_ = format->encryption;
    return Status::ok();
}

Status EngineImpl::seal_tier(SegmentTier** tier) {
    if (opts_.segments.tier == nullptr || sealed_tier_ != nullptr) return Status::ok();
    // Figures without the key (hiodsfs-stat): segments only, which pass as they are.
    if (cipher_ == nullptr && opts_.key == nullptr && opts_.read_only && opts_.without_key) return Status::ok();
    if (cipher_ == nullptr) {
        // Before anything of the pool's metadata is read: it is sealed.
        std::unique_ptr<SealedTier> sealed;
        StoreEncryption pool_encryption;
        HIODSFS_TRY(open_sealed_tier(opts_.segments.tier, opts_.key.get(), opts_.passphrase.get(), &cipher_, &sealed,
                                     &pool_encryption));
        if (sealed == nullptr) return Status::ok();
        sealed_tier_ = std::move(sealed);
        encryption_ = pool_encryption;
    } else {
        sealed_tier_ = std::make_unique<SealedTier>(opts_.segments.tier, cipher_.get());
    }
    opts_.segments.tier = sealed_tier_.get();
    if (*tier != nullptr) *tier = sealed_tier_.get();
    return Status::ok();
}

Status EngineImpl::new_encrypted_store(const std::string& dir) {
    // A RADOS store's slot is in its pool (before the pool's FORMAT).
    const KeySlotPlace place =
        opts_.segments.tier != nullptr ? KeySlotPlace::pool(opts_.segments.tier) : KeySlotPlace{env_, dir};
    if (opts_.key != nullptr) {
        // A slot an unfinished first open with a passphrase left would
        // hold another key.
        HIODSFS_TRY(remove_key_slot(place));
        return new_store_encryption(*opts_.key, &encryption_, &cipher_, opts_.legacy_cipher_for_tests);
    }
    // A passphrase's store gets a random key, and its slot before the
    // metadata and FORMAT: a store is never made that no passphrase opens.
    std::array<std::uint8_t, StoreKey::kBytes> bytes{};
    Status drawn = random_bytes(bytes);
    const StoreKey key(std::span<const std::uint8_t, StoreKey::kBytes>(bytes.data(), bytes.size()));
    explicit_bzero(bytes.data(), bytes.size());
    HIODSFS_TRY(drawn);
    HIODSFS_TRY(new_store_encryption(key, &encryption_, &cipher_, opts_.legacy_cipher_for_tests));
    KeySlot slot;
    HIODSFS_TRY(make_key_slot(key, *opts_.passphrase, encryption_, ScryptCost{}, &slot));
    return write_key_slot(place, slot);
}

Status EngineImpl::seal_chunk(ChunkId id, const std::uint8_t* data, std::uint32_t len, const ChunkPayload* payload,
                              std::vector<std::uint8_t>* out) const {
    const bool encoded = payload != nullptr && payload->encoded;
    return seal_chunk_payload(*cipher_, id, reinterpret_cast<const char*>(encoded ? payload->data : data),
                              encoded ? payload->length : len, encoded, out);
}

}  // namespace hiodsfs
