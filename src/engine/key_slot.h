// An encrypted store's key slot (docs/architecture.md, "Encryption at
// rest"): STORE/KEYSLOT holds the store's key wrapped under a key derived
// from a passphrase with scrypt, so that `-o key=ask` opens the store and
// the passphrase can change without rewriting a chunk. A store made with a
// key file has no slot until `hiodsfs-fsck --change-key` gives it one.
//
//   hiodsfs key slot
//   store ID                  FORMAT's store id (the slot's associated data)
//   scrypt n=N r=R p=P salt=HEX
//   wrapped HEX               nonce, wrapped key, tag (chunk/key_wrap.h)
//
// The slot is replaced whole (write_store_record): a crash during a change
// leaves the old passphrase working, or the new one. A RADOS store keeps
// its slot in its pool instead, as the object "keyslot" (plain, as
// "format" is: SealedTier), written whole by one atomic object write under
// the store's lock, so that an empty cache_dir on any host opens with the
// passphrase.
// Thread-safety: functions of their arguments.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chunk/key_wrap.h"
#include "engine/store_layout.h"
#include "hiodsfs/env.h"
#include "hiodsfs/segment_tier.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

inline constexpr const char* kKeySlotName = "KEYSLOT";
inline constexpr const char* kKeySlotObject = "keyslot";

// Where a store's slot is: STORE/KEYSLOT through env, or, when tier is set,
// the tier's object kKeySlotObject (store then only names it in messages).
struct KeySlotPlace {
    Env* env = nullptr;
    std::string store;
    SegmentTier* tier = nullptr;

    static KeySlotPlace pool(SegmentTier* tier) { return KeySlotPlace{nullptr, tier->describe(), tier}; }
    std::string describe() const;
};

struct KeySlot {
    std::string store_id;  // 32 hex digits, as FORMAT's
    ScryptCost cost;
    std::vector<std::uint8_t> salt;     // 16 bytes
    std::vector<std::uint8_t> wrapped;  // kWrappedKeyBytes
};

std::string key_slot_text(const KeySlot& slot);
// EUCLEAN naming where if text is not a key slot.
Status parse_key_slot(const std::string& text, const std::string& where, KeySlot* out);
// *exists false (and ok) if there is none.
Status read_key_slot(const KeySlotPlace& place, KeySlot* out, bool* exists);
Status write_key_slot(const KeySlotPlace& place, const KeySlot& slot);
// ok if there was none.
Status remove_key_slot(const KeySlotPlace& place);

// A slot of the store whose FORMAT says e, holding key under passphrase.
Status make_key_slot(const StoreKey& key, const Passphrase& passphrase, const StoreEncryption& e,
                     const ScryptCost& cost, KeySlot* out);
// The cipher of the store whose FORMAT says e, made from key, or else from
// the key that passphrase unwraps from the slot at place; checked once
// against FORMAT's key check. EACCES with one line for a wrong key or
// passphrase, a store without a slot, a slot of another store, or neither
// given. *key_out (if given): the store's key.
Status open_store_key(const KeySlotPlace& place, const StoreEncryption& e, const StoreKey* key,
                      const Passphrase* passphrase, std::unique_ptr<ChunkCipher>* cipher,
                      StoreKey* key_out = nullptr);
// The store's key from its slot and passphrase (open_store_key).
Status unlock_store_key(const KeySlotPlace& place, const StoreEncryption& e, const Passphrase& passphrase,
                        StoreKey* out);
// Gives the store (FORMAT: e) a slot for new_passphrase, key being its key
// (EACCES if it is not): written whole, durably. The store's key and its
// chunks stay as they are.
Status change_store_passphrase(const KeySlotPlace& place, const StoreEncryption& e, const StoreKey& key,
                               const Passphrase& new_passphrase, const ScryptCost& cost = ScryptCost{});

}  // namespace hiodsfs
