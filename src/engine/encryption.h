// Encryption at rest, what the engine and hiodsfs-fsck share: an encrypted
// store's cipher from its FORMAT line and a key, checked against the key
// check the line records (docs/architecture.md, "Encryption at rest").
// Thread-safety: functions of their arguments.
#pragma once

#include <memory>
#include <string>

#include "chunk/cipher.h"
#include "chunk/key_wrap.h"
#include "engine/sealed_tier.h"
#include "engine/store_layout.h"
#include "hiodsfs/status.h"

namespace hiodsfs {

// A new store's encryption line for key: a random id, and the key check;
// XAES-256-GCM, or AES-256-GCM with legacy (tests).
Status new_store_encryption(const StoreKey& key, StoreEncryption* e, std::unique_ptr<ChunkCipher>* out,
                            bool legacy = false);
// The cipher of store dir, whose FORMAT says e, under key; EACCES with one
// line naming the store if key is not its key.
Status open_store_cipher(const std::string& dir, const StoreEncryption& e, const StoreKey& key,
                         std::unique_ptr<ChunkCipher>* out);

// A tiered store's pool keeps its FORMAT record: when that says the store
// is encrypted, *out seals what goes to the pool (SealedTier) with *cipher,
// made from key, or from the key that passphrase unlocks from the pool's
// key slot; EACCES with one line when neither is given or it is not the
// store's. *out stays null for a plain store, or a pool that holds no
// store yet. *encryption (if given): the pool's FORMAT's encryption line;
// *unlocked (if given): the store's key, for a caller that goes on with it.
Status open_sealed_tier(SegmentTier* tier, const StoreKey* key, const Passphrase* passphrase,
                        std::unique_ptr<ChunkCipher>* cipher, std::unique_ptr<SealedTier>* out,
                        StoreEncryption* encryption = nullptr, StoreKey* unlocked = nullptr);

}  // namespace hiodsfs
