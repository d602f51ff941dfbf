// A segment file deleted or cut short (a failing disk, an operator's rm):
// the chunks whose bytes were in it are gone, and a read-write open refuses
// the store, since appending could put new bytes at an id or offset that
// committed metadata refers to. hiodsfs-fsck names the files such chunks
// hold; its advice, to write them again, needs a read-write mount, so
// --repair (local stores; docs/fsck.md, "A lost segment"):
// - moves each chunk whose bytes are gone, and of whose content no intact
//   copy is stored, to kLostSegment, flagged damaged: reads of it give EIO,
//   every later check names the files that map it until they are written
//   again, and no segment (nor the stored or dead bytes) counts it;
// - when the committed frontier lies in a segment that is missing or
//   shorter than it (the newest one was lost), makes a fresh empty segment
//   past every id the store's files, entries and records hold, and sets the
//   frontier to its start: appends go there, never to an id or an offset
//   the metadata ever referred to.
// Thread-safety: plain functions; the caller holds the store alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hiodsfs/env.h"
#include "hiodsfs/status.h"
#include "meta/meta_store.h"
#include "meta/records.h"

namespace hiodsfs {

// Segment id -> size, of every segment file the store holds.
using SegmentSizes = std::map<SegmentId, std::uint64_t>;

// Whether the bytes of the record at loc are gone: its segment is missing,
// or its file ends before the record does.
bool bytes_gone(const ChunkLocation& loc, const SegmentSizes& sizes);

// Moves chunk id's record (*rec) to kLostSegment, flagged damaged and out
// of the fingerprint index; its length and references stay.
Status move_to_lost(Txn& t, ChunkId id, ChunkRecord* rec);

// Why a read-write open would refuse the committed frontier: its segment
// is missing or shorter than the frontier's offset ("" when it would not).
std::string frontier_refusal(const SuperState& s, const SegmentSizes& sizes);

// For --repair: makes a segment past the highest id the store's files
// (sizes), its segments database, its frontier and its chunk records
// (in_records: the highest they held) hold, empty and durable, records it
// with 0 live bytes, and sets the frontier to its start.
Status restart_after_loss(Env* env, const std::string& segments_dir, const SegmentSizes& sizes,
                          SegmentId in_records, Txn& t);

}  // namespace hiodsfs
