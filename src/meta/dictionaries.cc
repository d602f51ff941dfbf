#include "meta/dictionaries.h"

#include <cerrno>

#include "chunk/fingerprint.h"
#include "meta/keys.h"

namespace hiodsfs {
namespace {

constexpr std::size_t kIdBytes = 4;
constexpr std::size_t kValueHeader = 12;  // trained_at, crc

void put_be32(std::string* out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out->push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint32_t get_be32(std::string_view in, std::size_t pos) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<std::uint8_t>(in[pos + i]);
    return v;
}

// A sealed dictionary's associated data: it opens as its own id only.
std::string sealing_ad(std::uint32_t id) { return "hiodsfs dictionary " + std::to_string(id); }

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::string dictionary_key(std::uint32_t id) {
    std::string k(kDictionaryKeyPrefix);
    put_be32(&k, id);
    return k;
}

bool parse_dictionary_key(std::string_view key, std::uint32_t* id) {
    if (key.size() != kDictionaryKeyPrefix.size() + kIdBytes ||
        key.substr(0, kDictionaryKeyPrefix.size()) != kDictionaryKeyPrefix)
        return false;
    *id = get_be32(key, kDictionaryKeyPrefix.size());
    return *id != 0;
}

std::string encode_dictionary_record(std::uint64_t trained_at, std::string_view bytes) {
    std::string v;
    v.reserve(kValueHeader + bytes.size());
    put_be64(&v, trained_at);
    put_be32(&v, crc32c(bytes.data(), bytes.size()));
    v.append(bytes);
    return v;
}

bool decode_dictionary_record(std::string_view value, DictionaryRecord* out) {
    if (value.size() <= kValueHeader) return false;
    const std::string_view bytes = value.substr(kValueHeader);
    if (crc32c(bytes.data(), bytes.size()) != get_be32(value, 8)) return false;
    out->trained_at = get_be64(value);
    out->bytes = bytes;
    return true;
}

Status put_dictionary(Txn& t, std::uint32_t id, std::uint64_t trained_at, std::string_view bytes,
                      const ChunkCipher* cipher) {
    const std::string key = dictionary_key(id);
    std::string_view old;
    bool found = false;
    HIODSFS_TRY(t.get(Db::kSuper, key, &old, &found));
    if (found)
        return Status::error(
            EEXIST, "the store has a compression dictionary " + std::to_string(id) + " already");
    if (cipher == nullptr) return t.put(Db::kSuper, key, encode_dictionary_record(trained_at, bytes));
    std::vector<std::uint8_t> sealed;
    HIODSFS_TRY(cipher->seal(bytes_of(bytes), bytes_of(sealing_ad(id)), &sealed));
    return t.put(Db::kSuper, key,
                 encode_dictionary_record(trained_at, std::string_view(reinterpret_cast<const char*>(sealed.data()),
                                                                       sealed.size())));
}

Status load_dictionaries(Txn& t, DictionarySet* set, StoredDictionaries* out, DictionarySealing sealing) {
    *out = StoredDictionaries{};
    Cursor c = t.cursor(Db::kSuper);
    for (bool ok = c.seek(kDictionaryKeyPrefix);
         ok && c.key().substr(0, kDictionaryKeyPrefix.size()) == kDictionaryKeyPrefix;
         ok = c.next()) {
        std::uint32_t id = 0;
        if (!parse_dictionary_key(c.key(), &id)) {
            out->damaged.push_back("a compression dictionary's record has a damaged key (" +
                                   std::to_string(c.key().size()) + " bytes)");
            continue;
        }
        out->highest_id = std::max(out->highest_id, id);
        DictionaryRecord r;
        std::shared_ptr<const Dictionary> d;
        if (!decode_dictionary_record(c.value(), &r)) {
            out->damaged.push_back("compression dictionary " + std::to_string(id) +
                                   "'s record is damaged (" + std::to_string(c.value().size()) +
                                   " bytes that fail their checksum)");
            continue;
        }
        if (sealing.sealed && sealing.cipher == nullptr) continue;  // no key: nothing of it is read
        std::string plain(r.bytes);
        if (sealing.sealed) {
            std::vector<std::uint8_t> opened;
            Status st = sealing.cipher->open(bytes_of(r.bytes), bytes_of(sealing_ad(id)), &opened);
            if (!st) {
                out->damaged.push_back("compression dictionary " + std::to_string(id) +
                                       "'s record is damaged (" + st.message() + ")");
                continue;
            }
            plain.assign(reinterpret_cast<const char*>(opened.data()), opened.size());
        }
        Status made = Dictionary::make(id, std::move(plain), &d);
        if (!made) {
            out->damaged.push_back("compression dictionary " + std::to_string(id) +
                                   "'s record is damaged (" + made.message() + ")");
            continue;
        }
        set->add(std::move(d));
        out->newest_trained_at =
            r.trained_at;  // ids in order: the last one that loads is the newest
    }
    return c.status();
}

}  // namespace hiodsfs
