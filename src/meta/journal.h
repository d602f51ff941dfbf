// The metadata journal of a store whose segments live in a tier (RADOS):
// one record per group commit, holding every LMDB change of the group (the
// puts and deletes of its operations, in order) and the super record it
// commits, so that a host that lost the store directory can rebuild the
// metadata from a snapshot and the records after it (engine/meta_tier.h).
//
// A record (little-endian):
//   header (24 B): magic u32 | body length u32 | seq u64 |
//                  crc32c(body) u32 | crc32c(first 20 header bytes) u32
//   body: super length u32 | super record | ops
//   op:   kind u8 (1 put, 2 delete) | db u8 | key length u32 | key
//         | (put only) value length u32 | value
// Records are appended whole to journal objects; decoding stops at the
// first one that is not whole and intact (a torn tail).
// Thread-safety: plain functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "meta/db.h"

namespace hiodsfs {

constexpr std::uint32_t kJournalMagic = 0x524a4448;  // "HDJR"
constexpr std::size_t kJournalHeaderBytes = 24;

// Appends one change to a group's captured ops.
void journal_put(std::string* ops, Db db, std::string_view key, std::string_view value);
void journal_del(std::string* ops, Db db, std::string_view key);

// A group's captured ops with only each key's last change, in the order of
// those changes: replayed, they leave the same databases (changes to
// different keys commute), and a key rewritten by many operations of a
// group (a block of chunk records, an inode) is journaled once.
std::string coalesce_journal_ops(std::string_view ops);

// One record's bytes.
std::string encode_journal_record(std::uint64_t seq, std::string_view super, std::string_view ops);

// A decoded record; its views point into the bytes it was decoded from.
struct JournalRecord {
    std::uint64_t seq = 0;
    std::string_view super;
    std::string_view ops;
};

// Decodes the records of data in order, up to the first one that is torn
// or fails a check; *end is where that one starts (data.size() when every
// byte belongs to a whole, intact record).
void decode_journal(std::string_view data, std::vector<JournalRecord>* out, std::size_t* end);

struct JournalOp {
    bool put = false;
    Db db = Db::kSuper;
    std::string_view key, value;
};

// Calls fn for each op in order; false when the ops do not parse (fn is
// not called for the one that does not) or fn returned false.
bool for_each_journal_op(std::string_view ops, const std::function<bool(const JournalOp&)>& fn);

}  // namespace hiodsfs
