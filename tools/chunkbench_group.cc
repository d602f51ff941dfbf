#include "chunkbench_group.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/units.h"

namespace hiodsfs::bench {

namespace {

// A segment record's header (docs/architecture.md, "The segment record").
constexpr std::uint64_t kRecordHeader = 24;

// Unit u holds the chunks [first(u), ends[u]), which are the bytes
// [byte_begin(u), byte_ends[u]) of Chunks::bytes.
struct Units {
    std::vector<std::size_t> ends, byte_ends;
    std::vector<std::uint32_t> of;  // each chunk's unit
    std::size_t count() const { return ends.size(); }
    std::size_t first(std::size_t u) const { return u == 0 ? 0 : ends[u - 1]; }
    std::size_t byte_begin(std::size_t u) const { return u == 0 ? 0 : byte_ends[u - 1]; }
    std::uint32_t len(std::size_t u) const {
        return static_cast<std::uint32_t>(byte_ends[u] - byte_begin(u));
    }
};

// The same numbers on every run (SplitMix64, as make_random_data).
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : s_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double unit_interval() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }

private:
    std::uint64_t s_;
};

// What random 4 KiB reads of the store's content read: as many as there
// are chunks, at offsets uniform over the bytes, each the chunk it lands
// in (so a chunk in proportion to its size).
std::vector<std::uint32_t> random_read_chunks(const Chunks& c) {
    SplitMix64 rng(0x13198A2E03707344ull);
    std::vector<std::uint32_t> out(c.count());
    for (auto& chunk : out) {
        const std::size_t at = rng.next() % c.bytes.size();
        chunk = static_cast<std::uint32_t>(std::upper_bound(c.ends.begin(), c.ends.end(), at) -
                                           c.ends.begin());
    }
    return out;
}

// group_bytes 0: a chunk a unit, as the store keeps them.
Units pack(const Chunks& c, std::size_t group_bytes, const std::vector<bool>& random) {
    Units u;
    u.of.resize(c.count());
    std::size_t first = 0;
    const auto close = [&](std::size_t end) {
        for (std::size_t i = first; i < end; ++i) u.of[i] = static_cast<std::uint32_t>(u.count());
        u.ends.push_back(end);
        u.byte_ends.push_back(c.ends[end - 1]);
        first = end;
    };
    for (std::size_t i = 1; i < c.count(); ++i) {
        const bool joins = c.file_of[i] == c.file_of[first] && !random[i] && !random[first] &&
                           c.ends[i] - c.begin(first) <= group_bytes;
        if (!joins) close(i);
    }
    if (c.count() > first) close(c.count());
    return u;
}

struct GroupFigures {
    std::uint64_t raw = 0, stored = 0;
    double compress_s = 0, unit_decode_s = 0, chunk_read_s = 0, random_read_s = 0;
    // Raw bytes a read of one chunk decodes (or copies): the mean over
    // chunks, the same stopping at the chunk's end, and weighted by size.
    double read = 0, read_to_end = 0, read_4k = 0;
};

class GroupMeasure {
public:
    GroupMeasure(const Chunks& c, const Units& u, const std::vector<std::uint32_t>& random_reads,
                 int repeat)
        : c_(c), u_(u), random_reads_(random_reads), repeat_(repeat) {
        std::uint32_t largest = 0;
        for (std::size_t k = 0; k < u.count(); ++k) largest = std::max(largest, u.len(k));
        unit_buf_.resize(largest);
        out_.resize(largest);
        // Touched before the clock runs: no payload is larger than its unit.
        payloads_.resize(c.bytes.size());
        payloads_.clear();
    }

    bool run(const Compression& method, const DictionarySet* dicts, GroupFigures* f,
             std::string* error) {
        *f = GroupFigures{};
        f->raw = c_.bytes.size();
        f->compress_s = compress(method, dicts);
        f->stored = payloads_.size();
        for (std::size_t k = 0; k < u_.count(); ++k) {
            if (!decode_unit(k, dicts) ||
                std::memcmp(unit_buf_.data(), c_.bytes.data() + u_.byte_begin(k), u_.len(k)) != 0) {
                *error =
                    compression_name(method) + ": unit " + std::to_string(k) + " did not come back";
                return false;
            }
        }
        f->unit_decode_s = best_cpu_seconds(slices_of(u_.byte_ends), repeat_, [&](auto a, auto b) {
            for (std::size_t k = a; k < b; ++k) (void)decode_unit(k, dicts);
        });
        f->chunk_read_s = best_cpu_seconds(slices_of(c_.ends), repeat_, [&](auto a, auto b) {
            for (std::size_t i = a; i < b; ++i) read_chunk(i, dicts);
        });
        std::vector<std::size_t> read_ends(random_reads_.size());
        for (std::size_t j = 0; j < read_ends.size(); ++j) read_ends[j] = (j + 1) * 4096;
        f->random_read_s = best_cpu_seconds(slices_of(read_ends), repeat_, [&](auto a, auto b) {
            for (std::size_t j = a; j < b; ++j) read_chunk(random_reads_[j], dicts);
        });
        read_bytes(f);
        return true;
    }

private:
    double compress(const Compression& method, const DictionarySet* dicts) {
        const std::shared_ptr<const Dictionary> dict = dicts ? dicts->newest() : nullptr;
        payload_ends_.assign(u_.count(), 0);
        encoded_.assign(u_.count(), false);
        return best_cpu_seconds(slices_of(u_.byte_ends), repeat_, [&](auto a, auto b) {
            if (a == 0) payloads_.clear();
            for (std::size_t k = a; k < b; ++k) {
                // Each chunk sampled, as the write path samples it.
                bool random = false;
                for (std::size_t i = u_.first(k); i < u_.ends[k] && !random; ++i)
                    random = looks_incompressible(c_.data(i), c_.len(i));
                const char* raw = c_.bytes.data() + u_.byte_begin(k);
                const ChunkEncoder::Payload p =
                    random ? ChunkEncoder::Payload{raw, u_.len(k), false}
                           : encoder_.encode(raw, u_.len(k), method, dict.get(), true);
                payloads_.insert(payloads_.end(), p.data, p.data + p.length);
                payload_ends_[k] = payloads_.size();
                encoded_[k] = p.encoded;
            }
        });
    }

    std::size_t payload_begin(std::size_t k) const { return k == 0 ? 0 : payload_ends_[k - 1]; }
    std::uint32_t payload_len(std::size_t k) const {
        return static_cast<std::uint32_t>(payload_ends_[k] - payload_begin(k));
    }

    // Into unit_buf_.
    bool decode_unit(std::size_t k, const DictionarySet* dicts) {
        const char* p = payloads_.data() + payload_begin(k);
        if (!encoded_[k]) {
            std::memcpy(unit_buf_.data(), p, u_.len(k));
            return true;
        }
        return decode_chunk(p, payload_len(k), unit_buf_.data(), u_.len(k), dicts).is_ok();
    }

    // A read of chunk i into a reply buffer: a unit stored as it is gives
    // the chunk's bytes alone, a unit of one chunk decodes into the reply
    // as the store's read path does, a larger one into a buffer first.
    void read_chunk(std::size_t i, const DictionarySet* dicts) {
        const std::size_t k = u_.of[i];
        const std::size_t at = c_.begin(i) - u_.byte_begin(k);
        const char* p = payloads_.data() + payload_begin(k);
        if (!encoded_[k]) {
            std::memcpy(out_.data(), p + at, c_.len(i));
        } else if (u_.ends[k] - u_.first(k) == 1) {
            (void)decode_chunk(p, payload_len(k), out_.data(), c_.len(i), dicts);
        } else {
            (void)decode_chunk(p, payload_len(k), unit_buf_.data(), u_.len(k), dicts);
            std::memcpy(out_.data(), unit_buf_.data() + at, c_.len(i));
        }
    }

    void read_bytes(GroupFigures* f) const {
        double sum = 0, to_end = 0, weighted = 0;
        for (std::size_t i = 0; i < c_.count(); ++i) {
            const std::size_t k = u_.of[i];
            const double len = c_.len(i);
            const double whole = encoded_[k] ? u_.len(k) : len;
            sum += whole;
            to_end += encoded_[k] ? static_cast<double>(c_.ends[i] - u_.byte_begin(k)) : len;
            weighted += len * whole;
        }
        const auto n = static_cast<double>(c_.count());
        f->read = sum / n;
        f->read_to_end = to_end / n;
        f->read_4k = weighted / static_cast<double>(c_.bytes.size());
    }

    const Chunks& c_;
    const Units& u_;
    const std::vector<std::uint32_t>& random_reads_;
    const int repeat_;
    ChunkEncoder encoder_;
    std::vector<char> payloads_, unit_buf_, out_;
    std::vector<std::size_t> payload_ends_;
    std::vector<bool> encoded_;
};

std::string unit_name(std::size_t kib) {
    return kib == 0 ? "per chunk" : "up to " + std::to_string(kib) + " KiB";
}

void print_group_header() {
    std::printf("%-16s %7s %8s %7s %9s %9s %7s %7s %8s %7s %11s %10s\n", "unit", "units",
                "KiB/unit", "stored", "+records", "KiB/read", "to end", "KiB/4K", "us/read",
                "us/4K", "decomp MB/s", "comp s/GiB");
}

void print_group_row(const std::string& name, std::size_t units, const GroupFigures& f,
                     std::size_t chunks) {
    const double raw = static_cast<double>(f.raw), n = static_cast<double>(chunks);
    std::printf(
        "%-16s %7zu %8.1f %7.4f %9.4f %9.1f %7.1f %7.1f %8.2f %7.2f %11.0f %10.2f\n", name.c_str(),
        units, raw / static_cast<double>(units) / 1024, static_cast<double>(f.stored) / raw,
        (static_cast<double>(f.stored) + static_cast<double>(kRecordHeader * units)) / raw,
        f.read / 1024, f.read_to_end / 1024, f.read_4k / 1024, f.chunk_read_s / n * 1e6,
        f.random_read_s / n * 1e6, raw / 1e6 / f.unit_decode_s, f.compress_s / (raw / (1 << 30)));
    std::fflush(stdout);
}

// The chunks that die when a second generation, made by the model in the
// header, is kept and the first deleted.
std::vector<bool> dead_after_second_generation(const Chunks& c, std::uint64_t* deleted,
                                               std::uint64_t* edited) {
    std::vector<std::uint32_t> holders(c.count(), 0);
    for (const std::uint32_t r : c.refs) ++holders[r];
    SplitMix64 rng(0x452821E638D01377ull);
    *deleted = *edited = 0;
    for (std::size_t f = 0; f < c.ref_ends.size(); ++f) {
        const std::size_t a = f == 0 ? 0 : c.ref_ends[f - 1], b = c.ref_ends[f];
        const double x = rng.unit_interval();
        if (a == b) continue;
        if (x < 0.005) {
            ++*deleted;
            for (std::size_t r = a; r < b; ++r) --holders[c.refs[r]];
        } else if (x < 0.045) {
            ++*edited;
            --holders[c.refs[a + (b - a) / 2]];
        }
    }
    std::vector<bool> dead(c.count());
    for (std::size_t i = 0; i < c.count(); ++i) dead[i] = holders[i] == 0;
    return dead;
}

void print_reclaim(const Chunks& c, const std::vector<std::size_t>& sizes,
                   const std::vector<Units>& units) {
    std::uint64_t deleted = 0, edited = 0;
    const std::vector<bool> dead = dead_after_second_generation(c, &deleted, &edited);
    std::uint64_t dead_chunks = 0, dead_bytes = 0;
    for (std::size_t i = 0; i < c.count(); ++i) {
        if (!dead[i]) continue;
        ++dead_chunks;
        dead_bytes += c.len(i);
    }
    std::printf(
        "\nreclaim once the first generation is deleted (model: of %zu files %llu deleted, %llu "
        "edited near the middle): %llu chunks die, %s raw\n",
        c.ref_ends.size(), static_cast<unsigned long long>(deleted),
        static_cast<unsigned long long>(edited), static_cast<unsigned long long>(dead_chunks),
        human_bytes(static_cast<double>(dead_bytes)).c_str());
    std::printf("%-16s %10s %11s %7s %12s %15s\n", "unit", "freed MiB", "pinned MiB", "pinned",
                "mixed units", "live MiB there");
    for (std::size_t g = 0; g < sizes.size(); ++g) {
        const Units& u = units[g];
        std::uint64_t freed = 0, pinned = 0, mixed = 0, live = 0;
        for (std::size_t k = 0; k < u.count(); ++k) {
            std::uint64_t d = 0, l = 0;
            for (std::size_t i = u.first(k); i < u.ends[k]; ++i) (dead[i] ? d : l) += c.len(i);
            if (l == 0) {
                freed += d;
            } else if (d != 0) {
                pinned += d;
                live += l;
                ++mixed;
            }
        }
        const auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
        std::printf("%-16s %10.2f %11.2f %6.1f%% %12llu %15.2f\n", unit_name(sizes[g]).c_str(),
                    mib(freed), mib(pinned),
                    dead_bytes ? 100.0 * mib(pinned) / mib(dead_bytes) : 0.0,
                    static_cast<unsigned long long>(mixed), mib(live));
    }
    std::fflush(stdout);
}

}  // namespace

bool run_group_bench(const Chunks& c, const CodecBenchOptions& o, const DictionarySet& dicts,
                     std::string* error) {
    std::vector<std::size_t> sizes{0};
    for (const std::size_t g : o.group_kib)
        if (g != 0 && std::find(sizes.begin(), sizes.end(), g) == sizes.end()) sizes.push_back(g);
    std::vector<bool> random(c.count());
    for (std::size_t i = 0; i < c.count(); ++i)
        random[i] = looks_incompressible(c.data(i), c.len(i));
    const std::vector<std::uint32_t> random_reads = random_read_chunks(c);
    std::vector<Units> units;
    for (const std::size_t g : sizes) units.push_back(pack(c, g << 10, random));
    std::printf(
        "\ngrouped: units of one file's consecutive new chunks (a chunk over the size, or one "
        "the sample calls random, alone); a read decodes its chunk's whole unit\n"
        "stored, +records: payloads / raw, and with a %llu-byte record header per unit; "
        "KiB/read: decoded per chunk read, to end: if decoding stopped at the chunk's end, "
        "KiB/4K: per random 4 KiB read; us/read, us/4K: CPU per chunk read, per random 4 KiB "
        "read\n",
        static_cast<unsigned long long>(kRecordHeader));
    for (const auto& m : o.methods) {
        for (const bool with_dict : {false, true}) {
            if (with_dict && (dicts.size() == 0 || m.method != CompressionMethod::kZstd)) continue;
            std::printf("\n%s%s\n", compression_name(m).c_str(), with_dict ? " + dictionary" : "");
            print_group_header();
            for (std::size_t g = 0; g < sizes.size(); ++g) {
                GroupMeasure measure(c, units[g], random_reads, o.repeat);
                GroupFigures f;
                if (!measure.run(m, with_dict ? &dicts : nullptr, &f, error)) return false;
                print_group_row(unit_name(sizes[g]), units[g].count(), f, c.count());
            }
        }
    }
    print_reclaim(c, sizes, units);
    return true;
}

}  // namespace hiodsfs::bench
