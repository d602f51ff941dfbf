// Fixed-size chunker: cuts at every absolute stream offset that is a multiple
// of the chunk size, so a file's chunks line up with its block offsets
// whatever write sizes the data came in.
#include "chunk/chunker_impl.h"

namespace hiodsfs::chunk_detail {
namespace {

class FixedChunker final : public Chunker {
public:
    explicit FixedChunker(std::uint32_t size) : size_(size), to_cut_(size) {}

    void reset(std::uint64_t offset) override {
        // Any offset is accepted: the next cut stays on the size grid, so a
        // restart in the middle of a block re-aligns at the block's end.
        to_cut_ = size_ - offset % size_;
        pending_ = 0;
    }

    std::size_t next_cut(const std::uint8_t* /*data*/, std::size_t len) override {
        if (len < to_cut_) {
            to_cut_ -= len;
            pending_ += len;
            return kNoCut;
        }
        const std::size_t n = static_cast<std::size_t>(to_cut_);
        to_cut_ = size_;
        pending_ = 0;
        return n;
    }

    std::uint64_t pending() const override { return pending_; }

private:
    const std::uint64_t size_;
    std::uint64_t to_cut_;       // bytes until the next multiple of size_
    std::uint64_t pending_ = 0;  // bytes consumed since the last cut or reset
};

}  // namespace

std::unique_ptr<Chunker> make_fixed_chunker(std::uint32_t size) {
    return std::make_unique<FixedChunker>(size);
}

}  // namespace hiodsfs::chunk_detail
