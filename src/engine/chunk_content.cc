#include "engine/chunk_content.h"

#include <cerrno>
#include <string>
#include <vector>

namespace hiodsfs {

Status decode_chunk_content(const DictionarySet* dicts, const ChunkCipher* cipher, ChunkId id,
                            const ChunkLocation& loc, const char* payload, std::uint32_t length, void* out) {
    Status st = decode_chunk(payload, loc.length, static_cast<char*>(out), length, dicts, cipher, id);
    if (st) return st;
    return Status::error(EIO, "chunk " + std::to_string(id) + " (segment " + std::to_string(loc.segment) +
                                  " at offset " + std::to_string(loc.offset) + "): " + st.message());
}

Status read_chunk_content(SegmentStore& segs, const DictionarySet* dicts, const ChunkCipher* cipher, ChunkId id,
                          const ChunkLocation& loc, std::uint32_t length, void* out, bool* damaged) {
    if (!loc.encoded) {
        if (loc.length != length) {
            if (damaged != nullptr) *damaged = true;
            return Status::error(EIO, "chunk " + std::to_string(id) + " of " + std::to_string(length) +
                                          " bytes has a record of " + std::to_string(loc.length));
        }
        return segs.read(loc, id, out, damaged);
    }
    thread_local std::vector<char> payload;
    payload.resize(loc.length);
    HIODSFS_TRY(segs.read(loc, id, payload.data(), damaged));
    Status st = decode_chunk_content(dicts, cipher, id, loc, payload.data(), length, out);
    if (!st && damaged != nullptr) *damaged = true;
    return st;
}

}  // namespace hiodsfs
