#include "stat/compression_estimate.h"

#include <lz4.h>
#include <zstd.h>

#include <cassert>

#include "common/cpu_time.h"
#include "hiodsfs/segment_store.h"

namespace hiodsfs::stat {

namespace {

// A batch is handed over in one go at its end, where the caller joins the
// helpers; large enough that the caller rarely waits, small in memory.
constexpr std::size_t kBatchChunks = 1024;
constexpr std::size_t kBatchBytes = std::size_t{32} << 20;

}  // namespace

double CompressionFigures::ratio() const {
    return stored_bytes ? static_cast<double>(raw_bytes) / static_cast<double>(stored_bytes) : 1.0;
}

double CompressionFigures::combined_ratio() const {
    return stored_bytes ? static_cast<double>(logical_bytes) / static_cast<double>(stored_bytes)
                        : 1.0;
}

std::optional<double> CompressionFigures::cpu_s_per_gib() const {
    if (timed_bytes == 0) return std::nullopt;
    return cpu_s / (static_cast<double>(timed_bytes) / static_cast<double>(1ull << 30));
}

struct CompressionEstimate::Pending {
    std::size_t row = 0;
    std::vector<std::uint8_t> data;
    std::vector<std::uint32_t> payloads;  // by method
    std::vector<double> cpu_s;            // by method
};

CompressionEstimate::CompressionEstimate(std::vector<Compression> methods, unsigned helpers)
    : methods_(std::move(methods)),
      cpu_s_(methods_.size()),
      pool_(methods_.empty() ? 0 : helpers),
      batch_(std::make_unique<Pending[]>(kBatchChunks)) {
    for (std::size_t i = 0; i < kBatchChunks; ++i) {
        batch_[i].payloads.resize(methods_.size());
        batch_[i].cpu_s.resize(methods_.size());
    }
}

CompressionEstimate::~CompressionEstimate() { flush(); }

std::size_t CompressionEstimate::new_row(const ChunkKey& key, std::uint32_t len) {
    const std::size_t row = lens_.size();
    rows_.emplace(key, row);
    keys_.push_back(key);
    lens_.push_back(len);
    payloads_.resize(payloads_.size() + methods_.size(), len);
    return row;
}

void CompressionEstimate::add(const ChunkKey& key, const std::uint8_t* data, std::uint32_t len) {
    if (methods_.empty() || known(key)) return;
    const std::size_t row = new_row(key, len);
    if (!open_)
        open_ = std::make_unique<ParallelLoop::Open>(pool_,
                                                     [this](std::size_t i) { encode(batch_[i]); });
    // Entries at and past the published count belong to this thread alone.
    Pending& p = batch_[batch_count_];
    p.row = row;
    p.data.assign(data, data + len);
    ++batch_count_;
    batch_bytes_ += len;
    open_->publish(batch_count_);
    if (batch_count_ == kBatchChunks || batch_bytes_ >= kBatchBytes) flush();
}

void CompressionEstimate::remember(const ChunkKey& key, std::uint32_t len,
                                   const std::vector<std::uint32_t>& payloads) {
    if (payloads.size() != methods_.size() || known(key)) return;
    const std::size_t row = new_row(key, len);
    for (std::size_t m = 0; m < methods_.size(); ++m)
        payloads_[row * methods_.size() + m] = payloads[m];
}

void CompressionEstimate::encode(Pending& p) const {
    ChunkEncoder& encoder = thread_chunk_encoder();
    const auto* raw = reinterpret_cast<const char*>(p.data.data());
    const auto len = static_cast<std::uint32_t>(p.data.size());
    double before = thread_cpu_seconds();
    for (std::size_t m = 0; m < methods_.size(); ++m) {
        p.payloads[m] = encoder.encode(raw, len, methods_[m]).length;
        const double after = thread_cpu_seconds();
        p.cpu_s[m] = after - before;
        before = after;
    }
}

void CompressionEstimate::flush() {
    if (!open_) return;
    open_->finish();
    open_.reset();
    for (std::size_t i = 0; i < batch_count_; ++i) {
        const Pending& p = batch_[i];
        for (std::size_t m = 0; m < methods_.size(); ++m) {
            payloads_[p.row * methods_.size() + m] = p.payloads[m];
            cpu_s_[m] += p.cpu_s[m];
        }
        timed_bytes_ += p.data.size();
    }
    batch_count_ = 0;
    batch_bytes_ = 0;
}

std::vector<CompressionFigures> CompressionEstimate::empty_figures(
    std::uint64_t logical_bytes) const {
    std::vector<CompressionFigures> out(methods_.size());
    for (std::size_t m = 0; m < methods_.size(); ++m) {
        out[m].method = methods_[m];
        out[m].logical_bytes = logical_bytes;
        out[m].timed_bytes = timed_bytes_;
        out[m].cpu_s = cpu_s_[m];
    }
    return out;
}

void CompressionEstimate::count(const ChunkKey& key, std::vector<CompressionFigures>* out) const {
    auto it = rows_.find(key);
    assert(it != rows_.end());  // the estimate adds or remembers every chunk it counts
    if (it == rows_.end()) return;
    const std::uint32_t len = lens_[it->second];
    for (std::size_t m = 0; m < methods_.size(); ++m) {
        CompressionFigures& f = (*out)[m];
        const std::uint32_t payload = payloads_[it->second * methods_.size() + m];
        f.raw_bytes += len;
        f.chunks += 1;
        f.stored_bytes += payload + std::uint64_t{SegmentStore::kHeaderBytes};
        if (payload < len) ++f.encoded_chunks;
    }
}

std::string CompressionEstimate::codec_tag() {
    return std::string("hiodsfs ") + HIODSFS_VERSION + ", lz4 " + LZ4_versionString() + ", zstd " +
           ZSTD_versionString();
}

}  // namespace hiodsfs::stat
