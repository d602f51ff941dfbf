// An encrypted store's tier (docs/architecture.md, "Encryption at rest"):
// what goes to the pool is sealed. Segments pass through as they are,
// since every chunk in them is sealed already and their record headers
// say no more than a local segment's; every metadata object (the
// snapshot's parts and manifest, the journal) is sealed under the store's
// key, bound to its name, but the FORMAT record ("format"), which says
// the store is encrypted and which key opens it, and the key slot
// ("keyslot", engine/key_slot.h), whose wrapped key is sealed already.
//
// A sealed object is a run of frames, one per put or append:
//   length u32 (little-endian) | nonce, encrypted bytes, tag (cipher.h)
// get_object opens them in turn; a frame that is torn or does not open
// ends the bytes returned with four zero bytes, which no metadata object
// parses past (a journal record's magic, a manifest's text, a part's
// CRC), so damage and forgery read as damage, never as data.
// Thread-safety: as the tier it wraps; the cipher is immutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chunk/cipher.h"
#include "hiodsfs/segment_tier.h"

namespace hiodsfs {

class SealedTier final : public SegmentTier {
public:
    // base and cipher must outlive this object.
    SealedTier(SegmentTier* base, const ChunkCipher* cipher) : base_(base), cipher_(cipher) {}

    std::string describe() const override { return base_->describe(); }
    Status put(SegmentId segment, const void* data, std::size_t len) override { return base_->put(segment, data, len); }
    Status get(SegmentId segment, std::vector<char>* out) override { return base_->get(segment, out); }
    Status get_range(SegmentId segment, std::uint64_t offset, std::size_t len, std::vector<char>* out) override {
        return base_->get_range(segment, offset, len, out);
    }
    Status put_range(SegmentId segment, std::uint64_t offset, const void* data, std::size_t len) override {
        return base_->put_range(segment, offset, data, len);
    }
    Status remove(SegmentId segment) override { return base_->remove(segment); }
    Status list(std::vector<std::pair<SegmentId, std::uint64_t>>* out) override { return base_->list(out); }

    Status put_object(const std::string& name, const void* data, std::size_t len) override;
    Status append_object(const std::string& name, const void* data, std::size_t len) override;
    Status get_object(const std::string& name, std::vector<char>* out) override;
    Status remove_object(const std::string& name) override { return base_->remove_object(name); }
    Status list_objects(const std::string& prefix, std::vector<std::string>* out) override {
        return base_->list_objects(prefix, out);
    }

    std::uint32_t epoch() const override { return base_->epoch(); }
    SegmentId first_new_segment() const override { return base_->first_new_segment(); }
    Status reserve_segment(SegmentId id) override { return base_->reserve_segment(id); }

    // The objects kept plain: "format" and "keyslot".
    static bool plain(const std::string& name);

private:
    Status frame(const std::string& name, const void* data, std::size_t len, std::vector<char>* out) const;
    SegmentTier* const base_;
    const ChunkCipher* const cipher_;
};

}  // namespace hiodsfs
