#include "meta/journal.h"

#include <string>
#include <unordered_map>

#include "chunk/fingerprint.h"
#include "common/little_endian.h"

namespace hiodsfs {
namespace {

constexpr std::uint8_t kPut = 1, kDel = 2;

void put_op(std::string* ops, std::uint8_t kind, Db db, std::string_view key) {
    ops->push_back(static_cast<char>(kind));
    ops->push_back(static_cast<char>(db));
    append_le32(ops, static_cast<std::uint32_t>(key.size()));
    ops->append(key);
}

// A length-prefixed field at *at of s; false past the end.
bool take_field(std::string_view s, std::size_t* at, std::string_view* out) {
    if (s.size() - *at < 4) return false;
    const std::uint32_t len = get_le32(s.data() + *at);
    *at += 4;
    if (s.size() - *at < len) return false;
    *out = s.substr(*at, len);
    *at += len;
    return true;
}

}  // namespace

void journal_put(std::string* ops, Db db, std::string_view key, std::string_view value) {
    put_op(ops, kPut, db, key);
    append_le32(ops, static_cast<std::uint32_t>(value.size()));
    ops->append(value);
}

void journal_del(std::string* ops, Db db, std::string_view key) { put_op(ops, kDel, db, key); }

std::string encode_journal_record(std::uint64_t seq, std::string_view super, std::string_view ops) {
    std::string out;
    out.reserve(kJournalHeaderBytes + 4 + super.size() + ops.size());
    out.resize(kJournalHeaderBytes);
    append_le32(&out, static_cast<std::uint32_t>(super.size()));
    out.append(super);
    out.append(ops);
    const std::string_view body(out.data() + kJournalHeaderBytes, out.size() - kJournalHeaderBytes);
    std::string header;
    append_le32(&header, kJournalMagic);
    append_le32(&header, static_cast<std::uint32_t>(body.size()));
    append_le64(&header, seq);
    append_le32(&header, crc32c(body.data(), body.size()));
    append_le32(&header, crc32c(header.data(), 20));
    out.replace(0, kJournalHeaderBytes, header);
    return out;
}

void decode_journal(std::string_view data, std::vector<JournalRecord>* out, std::size_t* end) {
    std::size_t at = 0;
    while (data.size() - at >= kJournalHeaderBytes) {
        const char* h = data.data() + at;
        if (get_le32(h) != kJournalMagic || get_le32(h + 20) != crc32c(h, 20)) break;
        const std::uint32_t len = get_le32(h + 4);
        if (data.size() - at - kJournalHeaderBytes < len) break;  // torn
        const std::string_view body = data.substr(at + kJournalHeaderBytes, len);
        if (get_le32(h + 16) != crc32c(body.data(), body.size())) break;
        JournalRecord r;
        r.seq = get_le64(h + 8);
        std::size_t pos = 0;
        if (!take_field(body, &pos, &r.super)) break;
        r.ops = body.substr(pos);
        out->push_back(r);
        at += kJournalHeaderBytes + len;
    }
    *end = at;
}

bool for_each_journal_op(std::string_view ops, const std::function<bool(const JournalOp&)>& fn) {
    std::size_t at = 0;
    while (at < ops.size()) {
        if (ops.size() - at < 2) return false;
        JournalOp op;
        const auto kind = static_cast<std::uint8_t>(ops[at]);
        const auto db = static_cast<std::uint8_t>(ops[at + 1]);
        at += 2;
        if ((kind != kPut && kind != kDel) || db >= static_cast<std::uint8_t>(Db::kCount)) return false;
        op.put = kind == kPut;
        op.db = static_cast<Db>(db);
        if (!take_field(ops, &at, &op.key)) return false;
        if (op.put && !take_field(ops, &at, &op.value)) return false;
        if (!fn(op)) return false;
    }
    return true;
}

std::string coalesce_journal_ops(std::string_view ops) {
    // The index of each key's last change; ops of well-formed captures only.
    std::unordered_map<std::string, std::size_t> last;
    std::size_t n = 0;
    auto name = [](const JournalOp& op) {
        std::string k(1, static_cast<char>(op.db));
        k.append(op.key);
        return k;
    };
    if (!for_each_journal_op(ops, [&](const JournalOp& op) {
            last[name(op)] = n++;
            return true;
        }))
        return std::string(ops);
    if (last.size() == n) return std::string(ops);
    std::string out;
    n = 0;
    for_each_journal_op(ops, [&](const JournalOp& op) {
        if (last[name(op)] == n++) {
            if (op.put) {
                journal_put(&out, op.db, op.key, op.value);
            } else {
                journal_del(&out, op.db, op.key);
            }
        }
        return true;
    });
    return out;
}

}  // namespace hiodsfs
