#include "engine/key_slot.h"

#include <sstream>

#include "common/hex.h"
#include "engine/encryption.h"

namespace hiodsfs {

namespace {

constexpr const char* kSlotMagicLine = "hiodsfs key slot";
constexpr std::size_t kSaltBytes = 16;

// The slot's associated data: its wrapped key opens only for its store.
std::string slot_ad(const std::string& store_id) { return std::string(kSlotMagicLine) + " " + store_id; }

std::span<const std::uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

bool parse_cost_salt(const std::string& rest, KeySlot* out) {
    std::istringstream in(rest);
    std::string n, r, p, salt, extra;
    in >> n >> r >> p >> salt;
    if (n.rfind("n=", 0) != 0 || r.rfind("r=", 0) != 0 || p.rfind("p=", 0) != 0 || salt.rfind("salt=", 0) != 0 ||
        (in >> extra))
        return false;
    try {
        std::size_t used = 0;
        out->cost.n = std::stoull(n.substr(2), &used);
        if (used != n.size() - 2) return false;
        out->cost.r = static_cast<std::uint32_t>(std::stoul(r.substr(2), &used));
        if (used != r.size() - 2) return false;
        out->cost.p = static_cast<std::uint32_t>(std::stoul(p.substr(2), &used));
        if (used != p.size() - 2) return false;
    } catch (const std::exception&) {
        return false;
    }
    return from_hex(salt.substr(5), &out->salt) && out->salt.size() == kSaltBytes;
}

}  // namespace

std::string key_slot_text(const KeySlot& slot) {
    return std::string(kSlotMagicLine) + "\nstore " + slot.store_id + "\nscrypt n=" + std::to_string(slot.cost.n) +
           " r=" + std::to_string(slot.cost.r) + " p=" + std::to_string(slot.cost.p) + " salt=" + to_hex(slot.salt) +
           "\nwrapped " + to_hex(slot.wrapped) + "\n";
}

Status parse_key_slot(const std::string& text, const std::string& where, KeySlot* out) {
    std::istringstream in(text);
    std::string line;
    bool magic = false, store = false, cost = false, wrapped = false;
    KeySlot slot;
    while (std::getline(in, line)) {
        if (line == kSlotMagicLine) {
            magic = true;
        } else if (line.rfind("store ", 0) == 0) {
            slot.store_id = line.substr(6);
            std::vector<std::uint8_t> id;
            store = from_hex(slot.store_id, &id) && id.size() == 16;
        } else if (line.rfind("scrypt ", 0) == 0) {
            cost = parse_cost_salt(line.substr(7), &slot);
        } else if (line.rfind("wrapped ", 0) == 0) {
            wrapped = from_hex(line.substr(8), &slot.wrapped) && slot.wrapped.size() == kWrappedKeyBytes;
        }
    }
    if (!magic || !store || !cost || !wrapped) return Status::error(EUCLEAN, where + " is not a hiodsfs key slot");
    if (!slot.cost.acceptable())
        return Status::error(EUCLEAN, where + ": its scrypt cost (n=" + std::to_string(slot.cost.n) + " r=" +
                                          std::to_string(slot.cost.r) + " p=" + std::to_string(slot.cost.p) +
                                          ") is beyond what hiodsfs accepts");
    *out = std::move(slot);
    return Status::ok();
}

std::string KeySlotPlace::describe() const {
    return tier != nullptr ? store + " (its " + kKeySlotObject + " object)" : store + "/" + kKeySlotName;
}

Status read_key_slot(const KeySlotPlace& place, KeySlot* out, bool* exists) {
    std::string text;
    if (place.tier != nullptr) {
        std::vector<char> bytes;
        const Status got = place.tier->get_object(kKeySlotObject, &bytes);
        *exists = got.is_ok();
        if (got.err() == ENOENT) return Status::ok();
        HIODSFS_TRY(got);
        text.assign(bytes.begin(), bytes.end());
    } else {
        HIODSFS_TRY(read_store_record(place.env, place.store + "/" + kKeySlotName, &text, exists));
    }
    return *exists ? parse_key_slot(text, place.describe(), out) : Status::ok();
}

Status write_key_slot(const KeySlotPlace& place, const KeySlot& slot) {
    const std::string text = key_slot_text(slot);
    if (place.tier != nullptr) return place.tier->put_object(kKeySlotObject, text.data(), text.size());
    return write_store_record(place.env, place.store, kKeySlotName, text);
}

Status remove_key_slot(const KeySlotPlace& place) {
    const Status gone = place.tier != nullptr ? place.tier->remove_object(kKeySlotObject)
                                              : place.env->unlink(place.store + "/" + kKeySlotName);
    return gone.err() == ENOENT ? Status::ok() : gone;
}

Status make_key_slot(const StoreKey& key, const Passphrase& passphrase, const StoreEncryption& e,
                     const ScryptCost& cost, KeySlot* out) {
    if (passphrase.empty()) return Status::error(EINVAL, "an empty passphrase protects nothing");
    KeySlot slot;
    slot.store_id = e.id;
    slot.cost = cost;
    slot.salt.resize(kSaltBytes);
    HIODSFS_TRY(random_bytes(slot.salt));
    StoreKey kek;
    HIODSFS_TRY(passphrase_key(passphrase, slot.salt, cost, &kek));
    HIODSFS_TRY(wrap_key(kek, key, bytes_of(slot_ad(e.id)), &slot.wrapped));
    *out = std::move(slot);
    return Status::ok();
}

Status open_store_key(const KeySlotPlace& place, const StoreEncryption& e, const StoreKey* key,
                      const Passphrase* passphrase, std::unique_ptr<ChunkCipher>* cipher, StoreKey* key_out) {
    const std::string name = "store " + place.store;
    StoreKey unwrapped;
    if (key == nullptr) {
        if (passphrase == nullptr)
            return Status::error(EACCES, name + " is encrypted: give its key file or its passphrase");
        KeySlot slot;
        bool exists = false;
        HIODSFS_TRY(read_key_slot(place, &slot, &exists));
        if (!exists)
            return Status::error(EACCES, name + " has no key slot (" + place.describe() +
                                             "), so no passphrase opens it: give its key file (key_file=, --key-file)");
        if (slot.store_id != e.id)
            return Status::error(EACCES, name + ": its key slot belongs to another store (id " + slot.store_id + ")");
        StoreKey kek;
        HIODSFS_TRY(passphrase_key(*passphrase, slot.salt, slot.cost, &kek));
        const Status opened = unwrap_key(kek, slot.wrapped, bytes_of(slot_ad(e.id)), &unwrapped);
        if (opened.err() == EBADMSG)
            return Status::error(EACCES, name + ": the passphrase is not this store's (or its key slot is damaged); "
                                                 "nothing was changed");
        HIODSFS_TRY(opened);
        key = &unwrapped;
    }
    // Either way checked against FORMAT's key check, once.
    HIODSFS_TRY(open_store_cipher(place.store, e, *key, cipher));
    if (key_out != nullptr) *key_out = *key;
    return Status::ok();
}

Status unlock_store_key(const KeySlotPlace& place, const StoreEncryption& e, const Passphrase& passphrase,
                        StoreKey* out) {
    std::unique_ptr<ChunkCipher> checked;
    return open_store_key(place, e, nullptr, &passphrase, &checked, out);
}

Status change_store_passphrase(const KeySlotPlace& place, const StoreEncryption& e, const StoreKey& key,
                               const Passphrase& new_passphrase, const ScryptCost& cost) {
    std::unique_ptr<ChunkCipher> checked;
    HIODSFS_TRY(open_store_cipher(place.store, e, key, &checked));
    KeySlot slot;
    HIODSFS_TRY(make_key_slot(key, new_passphrase, e, cost, &slot));
    return write_key_slot(place, slot);
}

}  // namespace hiodsfs
