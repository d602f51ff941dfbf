// The store's compression dictionaries (chunk/codec.h) in its metadata: a
// record each in Db::kSuper, key "dict" + the id as 4 big-endian bytes (so
// they sort by id), written in one operation when the dictionary is trained
// and never changed or deleted after: a chunk may name it for as long as the
// store lives. The value:
//   content bytes the store held when it was trained (8, big-endian) |
//   crc32c of the dictionary (4, big-endian) | the dictionary (zstd's format)
// LMDB checks no values: the CRC tells a damaged record from a dictionary.
// An encrypted store's dictionaries are sealed (they are made of its
// chunks' bytes): the dictionary field is then the sealed dictionary
// (chunk/cipher.h), bound to its id, and the CRC covers what is stored.
// Thread-safety: the functions use the caller's Txn.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chunk/cipher.h"
#include "chunk/codec.h"
#include "hiodsfs/status.h"
#include "meta/meta_store.h"

namespace hiodsfs {

inline constexpr std::string_view kDictionaryKeyPrefix = "dict";

std::string dictionary_key(std::uint32_t id);
// False unless key is a dictionary's: the prefix and 4 bytes of an id other than 0.
bool parse_dictionary_key(std::string_view key, std::uint32_t* id);

struct DictionaryRecord {
    std::uint64_t trained_at = 0;  // the store's content_bytes when it was trained
    std::string_view bytes;        // into the decoded value
};
std::string encode_dictionary_record(std::uint64_t trained_at, std::string_view bytes);
// False for a value that is short or whose dictionary fails its CRC.
bool decode_dictionary_record(std::string_view value, DictionaryRecord* out);

// Stores dictionary id (sealed under cipher if given); EEXIST if the store
// has a record of that id already (ids are never reused: a chunk of the
// old one would decode wrongly).
Status put_dictionary(Txn& t, std::uint32_t id, std::uint64_t trained_at, std::string_view bytes,
                      const ChunkCipher* cipher = nullptr);

// What load_dictionaries found.
struct StoredDictionaries {
    // The highest id of any record, damaged ones included: the next
    // dictionary's id is one more.
    std::uint32_t highest_id = 0;
    // Of the newest dictionary that loaded (0 if none did).
    std::uint64_t newest_trained_at = 0;
    // A line for each record that is damaged (its key, its value, or a
    // dictionary zstd refuses): the chunks stored with it cannot be read.
    std::vector<std::string> damaged;
};

// How an encrypted store's dictionaries are read: sealed, opened with
// cipher; without it (a store opened without its key, for its figures)
// none is loaded, and none counts as damaged.
struct DictionarySealing {
    bool sealed = false;
    const ChunkCipher* cipher = nullptr;
};

// Adds every dictionary of the store to *set.
Status load_dictionaries(Txn& t, DictionarySet* set, StoredDictionaries* out, DictionarySealing sealing = {});

}  // namespace hiodsfs
