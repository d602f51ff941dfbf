#include "store/segment_format.h"

namespace hiodsfs {
namespace {

std::string hex_id(SegmentId id) {
    char name[16];
    std::snprintf(name, sizeof name, "%08" PRIx32, id);
    return name;
}

}  // namespace

std::string segment_file_name(SegmentId id) { return hex_id(id) + ".seg"; }

std::string fetch_file_name(SegmentId id) { return hex_id(id) + ".fetch"; }

bool parse_segment_name(const std::string& name, SegmentId* id) {
    if (name.size() != 12 || name.compare(8, 4, ".seg") != 0) return false;
    SegmentId v = 0;
    for (int i = 0; i < 8; ++i) {
        const char c = name[i];
        int d;
        if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
        } else {
            return false;
        }
        v = (v << 4) | static_cast<SegmentId>(d);
    }
    *id = v;
    return v != 0;
}

}  // namespace hiodsfs
