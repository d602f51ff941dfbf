#include "meta/lmdb_file_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace hiodsfs {
namespace {

// LMDB 0.9's file layout (mdb.c; a 64-bit build, native byte order). Every
// page starts with a 16-byte header: its number (8), a pad (2), its flags
// (2), then the lower and upper bounds of its free space (2 + 2), or, in
// the first page of an overflow run, the run's length in pages (4).
constexpr std::size_t kHeader = 16;
constexpr std::uint16_t kBranch = 0x01, kLeaf = 0x02, kOverflow = 0x04, kMetaFlag = 0x08;
// A node: data size (or a branch's child page) in two 16-bit halves, flags
// (or the child page's top 16 bits), key size; then the key and the data.
constexpr std::size_t kNode = 8;
constexpr std::uint16_t kBigData = 0x01,
                        kSubData = 0x02;  // the data is on an overflow run / a database record
// A database record (MDB_db), the value of a name in the list of databases
// and twice in a meta page: pad (4), flags (2), depth (2), branch, leaf and
// overflow pages, entries, root page (8 each).
constexpr std::size_t kDbRecord = 48;
// The meta page after its header: magic (4), version (4), map address (8),
// map size (8), the free list's and the list of databases' records (the
// former's pad holds the page size), the last page in use, the txn id.
constexpr std::uint32_t kMagic = 0xBEEFC0DE;
constexpr std::uint32_t kDataVersion = 1;
constexpr std::size_t kMetaMagic = 16, kMetaDbs = 40, kMetaLastPage = 136, kMetaTxnid = 144,
                      kMetaEnd = 152;
constexpr std::uint64_t kNoPage = ~std::uint64_t{0};
constexpr int kMaxDepth = 32;  // LMDB's cursor stack
constexpr std::size_t kMaxKey = 511;

template <class T>
T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

std::size_t even(std::size_t n) { return (n + 1) & ~std::size_t{1}; }

struct DbRecord {
    std::uint32_t pad = 0;
    std::uint16_t flags = 0, depth = 0;
    std::uint64_t branch = 0, leaf = 0, overflow = 0, entries = 0, root = kNoPage;
};

DbRecord decode_record(const char* p) {
    DbRecord r;
    r.pad = load<std::uint32_t>(p);
    r.flags = load<std::uint16_t>(p + 4);
    r.depth = load<std::uint16_t>(p + 6);
    r.branch = load<std::uint64_t>(p + 8);
    r.leaf = load<std::uint64_t>(p + 16);
    r.overflow = load<std::uint64_t>(p + 24);
    r.entries = load<std::uint64_t>(p + 32);
    r.root = load<std::uint64_t>(p + 40);
    return r;
}

std::string u(std::uint64_t v) { return std::to_string(v); }

// One tree as the walk goes through it.
struct Tree {
    enum class Kind { kFree, kMain, kNamed };
    std::string name;
    Kind kind = Kind::kNamed;
    DbRecord record;
    bool whole = true;  // else the paths to the first and last records only
    std::uint64_t branch = 0, leaf = 0, overflow = 0, entries = 0;
    // In-order key checks: the last leaf key, and the separator the next
    // one must not be below (set on the way down into a child past the first).
    std::string last;
    bool has_last = false;
    std::optional<std::string> lower;
};

class Checker {
public:
    Checker(int fd, const std::string& path, const LmdbCheckOptions& options)
        : fd_(fd), path_(path), options_(options) {}

    Status run(LmdbFileSummary* summary);

private:
    enum class Side { kAll, kFirst, kLast, kEnds };

    Status read_metas();
    Status read(std::uint64_t page, std::size_t bytes, std::string* out) {
        return read_at(page * psize_, bytes, out);
    }
    Status read_at(std::uint64_t offset, std::size_t bytes, std::string* out);
    Status damaged(std::uint64_t page, const std::string& db, const std::string& what) const {
        return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: page " + u(page) +
                                          (db.empty() ? "" : " (" + db + ")") + " " + what);
    }
    // Marks `page` used by t, as `from` (the page naming it) says.
    Status use(std::uint64_t page, std::uint64_t from, const Tree& t);
    Status walk(Tree& t);
    Status visit(Tree& t, std::uint64_t page, std::uint64_t parent, int level, Side side);
    Status check_key(Tree& t, std::uint64_t page, std::string_view key);
    int compare(const Tree& t, std::string_view a, std::string_view b) const;
    Status leaf_value(Tree& t, std::uint64_t page, std::string_view key, const char* node,
                      std::uint16_t flags, std::size_t size);
    Status free_list(const Tree& t, std::uint64_t page, std::string_view ids);

    int fd_;
    const std::string& path_;
    const LmdbCheckOptions& options_;
    std::uint64_t file_bytes_ = 0;
    std::uint32_t psize_ = 0;
    std::uint64_t pages_ = 0;
    DbRecord free_record_, main_record_;
    std::vector<bool> used_, free_;
    std::uint64_t used_count_ = 0, free_count_ = 0;
    std::vector<std::pair<std::string, DbRecord>> named_;
};

Status Checker::read_at(std::uint64_t offset, std::size_t bytes, std::string* out) {
    out->resize(bytes);
    std::size_t done = 0;
    const auto at = static_cast<off_t>(offset);
    while (done < bytes) {
        const ssize_t n =
            ::pread(fd_, out->data() + done, bytes - done, at + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return Status::from_errno(errno, "read " + path_ + " at byte " + u(offset + done));
        if (n == 0)
            return Status::error(
                EUCLEAN, "metadata file " + path_ + " is cut short at byte " + u(offset + done));
        done += static_cast<std::size_t>(n);
    }
    return Status::ok();
}

// Both meta pages must be whole, as LMDB refuses a file otherwise; it uses
// the one with the higher txn id (the first on a tie), and reads the second
// at the first one's page size.
Status Checker::read_metas() {
    struct Meta {
        std::uint32_t psize = 0;
        std::uint64_t last = 0, txnid = 0;
        DbRecord free, main;
    } metas[2];
    std::uint32_t psize = 0;
    for (std::uint64_t i = 0; i < 2; ++i) {
        std::string p;
        if (file_bytes_ < i * psize + kMetaEnd)
            return Status::error(EUCLEAN, "metadata file " + path_ +
                                              " is cut short: it ends before meta page " + u(i));
        HIODSFS_TRY(read_at(i * psize, kMetaEnd, &p));
        const auto flags = load<std::uint16_t>(p.data() + 10);
        if (load<std::uint64_t>(p.data()) != i || (flags & kMetaFlag) == 0 ||
            load<std::uint32_t>(p.data() + kMetaMagic) != kMagic)
            return damaged(i, "", "is not an LMDB meta page");
        if (load<std::uint32_t>(p.data() + kMetaMagic + 4) != kDataVersion)
            return damaged(
                i, "",
                "has LMDB data version " + u(load<std::uint32_t>(p.data() + kMetaMagic + 4)));
        Meta& m = metas[i];
        m.free = decode_record(p.data() + kMetaDbs);
        m.main = decode_record(p.data() + kMetaDbs + kDbRecord);
        m.psize = m.free.pad;
        m.last = load<std::uint64_t>(p.data() + kMetaLastPage);
        m.txnid = load<std::uint64_t>(p.data() + kMetaTxnid);
        if (m.psize < 512 || m.psize > 65536 || (m.psize & (m.psize - 1)) != 0)
            return damaged(i, "", "gives a page size of " + u(m.psize));
        if (i == 0) psize = m.psize;
    }
    const Meta& m = metas[metas[0].txnid < metas[1].txnid ? 1 : 0];
    if (m.psize != psize) return damaged(1, "", "gives another page size than meta page 0");
    psize_ = m.psize;
    if (m.last < 1 || m.last >= (std::uint64_t{1} << 48))
        return damaged(metas[0].txnid < metas[1].txnid ? 1 : 0, "",
                       "gives " + u(m.last) + " as the last page");
    pages_ = m.last + 1;
    free_record_ = m.free;
    main_record_ = m.main;
    return Status::ok();
}

Status Checker::use(std::uint64_t page, std::uint64_t from, const Tree& t) {
    if (page < 2 || page >= pages_)
        return damaged(
            from, t.name,
            "refers to page " + u(page) + ", outside the " + u(pages_) + " pages in use");
    if (used_[page])
        return damaged(from, t.name,
                       "refers to page " + u(page) + ", which another page refers to too");
    if (free_[page]) return damaged(page, t.name, "is in use and on the free list");
    if ((page + 1) * psize_ > file_bytes_)
        return Status::error(EUCLEAN, "metadata file " + path_ + " is cut short: it holds " +
                                          u(file_bytes_) + " bytes, and page " + u(page) + " (" +
                                          t.name + "), which its state uses, lies past them");
    used_[page] = true;
    ++used_count_;
    return Status::ok();
}

int Checker::compare(const Tree& t, std::string_view a, std::string_view b) const {
    if (t.kind == Tree::Kind::kFree) {  // txn ids, native integers
        const auto x = load<std::uint64_t>(a.data()), y = load<std::uint64_t>(b.data());
        return x < y ? -1 : x > y;
    }
    return a.compare(b);  // LMDB's default order: bytes, then length
}

// Leaf keys come in order across the whole tree, and not below the
// separator that led to the leaf.
Status Checker::check_key(Tree& t, std::uint64_t page, std::string_view key) {
    if (t.lower && compare(t, key, *t.lower) < 0)
        return damaged(page, t.name, "has a key below its parent's bound");
    t.lower.reset();
    if (t.has_last && compare(t, t.last, key) >= 0)
        return damaged(page, t.name, "has keys out of order");
    t.last.assign(key);
    t.has_last = true;
    return Status::ok();
}

// A free-list record: a count, then that many page numbers, highest first
// (LMDB may reserve more room than the count fills).
Status Checker::free_list(const Tree& t, std::uint64_t page, std::string_view ids) {
    if (ids.size() < 8 || ids.size() % 8 != 0)
        return damaged(page, t.name, "holds a list of free pages of a bad size");
    const auto n = load<std::uint64_t>(ids.data());
    if (n > ids.size() / 8 - 1)
        return damaged(page, t.name, "holds a list of free pages longer than its record");
    std::uint64_t before = kNoPage;
    for (std::uint64_t i = 1; i <= n; ++i) {
        const auto id = load<std::uint64_t>(ids.data() + 8 * i);
        if (id < 2 || id >= pages_ || id >= before)
            return damaged(page, t.name, "lists page " + u(id) + " as free, out of range or order");
        if (free_[id]) return damaged(page, t.name, "lists page " + u(id) + " as free twice");
        free_[id] = true;
        ++free_count_;
        before = id;
    }
    return Status::ok();
}

Status Checker::leaf_value(Tree& t, std::uint64_t page, std::string_view key, const char* node,
                           std::uint16_t flags, std::size_t size) {
    const char* data = node + kNode + key.size();
    std::string run;  // an overflow run, when its bytes are needed
    std::string_view value(data, (flags & kBigData) ? 0 : size);
    if (flags & kBigData) {
        // The run's first page says how long it is: LMDB keeps a run when a
        // smaller value replaces the one it was made for.
        const auto first = load<std::uint64_t>(data);
        const std::uint64_t needed = (kHeader - 1 + size) / psize_ + 1;
        if (first < 2 || first >= pages_)
            return damaged(page, t.name,
                           "names page " + u(first) + " for a value, outside the pages in use");
        HIODSFS_TRY(use(first, page, t));
        HIODSFS_TRY(read(first, kHeader, &run));
        const auto count = load<std::uint32_t>(run.data() + 12);
        if (load<std::uint64_t>(run.data()) != first ||
            load<std::uint16_t>(run.data() + 10) != kOverflow || count < needed ||
            count > pages_ - first)
            return damaged(first, t.name, "is not the first page of a value's run of pages");
        for (std::uint64_t p = first + 1; p < first + count; ++p) HIODSFS_TRY(use(p, page, t));
        if (options_.on_page)
            for (std::uint64_t p = first; p < first + count; ++p)
                options_.on_page(p, t.name, LmdbPageKind::kOverflow);
        t.overflow += count;
        if (t.kind == Tree::Kind::kFree) {  // its bytes are needed
            HIODSFS_TRY(read_at(first * psize_ + kHeader, size, &run));
            value = run;
        }
    }
    switch (t.kind) {
        case Tree::Kind::kFree:
            if (key.size() != 8)
                return damaged(page, t.name, "has a key of " + u(key.size()) + " bytes");
            return free_list(t, page, value);
        case Tree::Kind::kMain:
            if (flags != kSubData || size != kDbRecord)
                return damaged(page, t.name, "holds an entry that is not a database record");
            named_.emplace_back(std::string(key), decode_record(value.data()));
            return Status::ok();
        case Tree::Kind::kNamed:
            if (flags & ~kBigData)
                return damaged(page, t.name, "holds an entry of a kind hiodsfs does not make");
            return Status::ok();
    }
    return Status::ok();
}

Status Checker::visit(Tree& t, std::uint64_t page, std::uint64_t parent, int level, Side side) {
    if (level > t.record.depth || level > kMaxDepth)
        return damaged(parent, t.name, "lies deeper than its tree's depth of " + u(t.record.depth));
    HIODSFS_TRY(use(page, parent, t));
    std::string p;
    HIODSFS_TRY(read(page, psize_, &p));
    const auto flags = load<std::uint16_t>(p.data() + 10);
    const bool branch = flags == kBranch;
    if (load<std::uint64_t>(p.data()) != page)
        return damaged(page, t.name, "carries another page's number");
    if (!branch && flags != kLeaf) return damaged(page, t.name, "is not a tree page");
    if (branch == (level == t.record.depth))
        return damaged(
            page, t.name,
            branch ? "is a branch where the tree has leaves" : "is a leaf above the tree's depth");
    if (options_.on_page)
        options_.on_page(page, t.name, branch ? LmdbPageKind::kBranch : LmdbPageKind::kLeaf);
    (branch ? t.branch : t.leaf) += 1;
    const auto lower = load<std::uint16_t>(p.data() + 12),
               upper = load<std::uint16_t>(p.data() + 14);
    if (lower < kHeader || lower > upper || upper > psize_ || (lower - kHeader) % 2 != 0)
        return damaged(page, t.name, "has bad free-space bounds");
    const std::size_t n = (lower - kHeader) / 2;
    if (n < (branch && t.kind != Tree::Kind::kFree ? 2u : 1u))
        return damaged(page, t.name, "has too few entries");

    // Nodes lie packed from `upper` to the page's end, each inside it.
    struct Node {
        std::size_t at, size;
    };
    std::vector<Node> nodes(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = load<std::uint16_t>(p.data() + kHeader + 2 * i);
        if (at < upper || at % 2 != 0 || at + kNode > psize_)
            return damaged(page, t.name, "has a node outside it");
        const char* node = p.data() + at;
        const std::size_t ksize = load<std::uint16_t>(node + 6);
        std::size_t size = kNode + ksize;
        if (!branch) {
            const std::size_t dsize =
                load<std::uint16_t>(node) | (std::size_t{load<std::uint16_t>(node + 2)} << 16);
            size += (load<std::uint16_t>(node + 4) & kBigData) ? 8 : dsize;
        }
        if (even(size) > psize_ - at || ksize > kMaxKey)
            return damaged(page, t.name, "has a node outside it");
        nodes[i] = Node{at, even(size)};
    }
    std::vector<Node> packed = nodes;
    std::sort(packed.begin(), packed.end(),
              [](const Node& a, const Node& b) { return a.at < b.at; });
    std::size_t end = upper;
    for (const Node& nd : packed) {
        if (nd.at != end) return damaged(page, t.name, "has nodes that overlap or leave gaps");
        end += nd.size;
    }
    if (end != psize_) return damaged(page, t.name, "has nodes that overlap or leave gaps");

    auto key_of = [&p](const Node& nd) {
        return std::string_view(p.data() + nd.at + kNode,
                                load<std::uint16_t>(p.data() + nd.at + 6));
    };
    if (!branch) {
        for (const Node& nd : nodes) {
            const char* node = p.data() + nd.at;
            const std::string_view key = key_of(nd);
            if (t.kind == Tree::Kind::kFree && key.size() != 8)
                return damaged(page, t.name, "has a key of another size");
            if (side == Side::kAll) HIODSFS_TRY(check_key(t, page, key));
            const std::size_t dsize =
                load<std::uint16_t>(node) | (std::size_t{load<std::uint16_t>(node + 2)} << 16);
            HIODSFS_TRY(leaf_value(t, page, key, node, load<std::uint16_t>(node + 4), dsize));
            ++t.entries;
        }
        if (side != Side::kAll) {  // the keys of this page alone
            for (std::size_t i = 1; i < n; ++i)
                if (compare(t, key_of(nodes[i - 1]), key_of(nodes[i])) >= 0)
                    return damaged(page, t.name, "has keys out of order");
        }
        return Status::ok();
    }
    // A branch: the first node's key is not used; the others separate the
    // children and come in order.
    for (std::size_t i = 1; i < n; ++i) {
        if (t.kind == Tree::Kind::kFree && key_of(nodes[i]).size() != 8)
            return damaged(page, t.name, "has a key of another size");
        if (i > 1 && compare(t, key_of(nodes[i - 1]), key_of(nodes[i])) >= 0)
            return damaged(page, t.name, "has keys out of order");
    }
    for (std::size_t i = 0; i < n; ++i) {
        Side next = Side::kAll;
        if (side == Side::kAll)
            next = Side::kAll;
        else if (i == 0 && (side == Side::kFirst || side == Side::kEnds))
            next = Side::kFirst;
        else if (i == n - 1 && (side == Side::kLast || side == Side::kEnds))
            next = Side::kLast;
        else
            continue;
        const char* node = p.data() + nodes[i].at;
        const std::uint64_t child = load<std::uint16_t>(node) |
                                    (std::uint64_t{load<std::uint16_t>(node + 2)} << 16) |
                                    (std::uint64_t{load<std::uint16_t>(node + 4)} << 32);
        if (side == Side::kAll && i > 0) {
            const std::string_view sep = key_of(nodes[i]);
            if (t.has_last && compare(t, t.last, sep) >= 0)
                return damaged(page, t.name, "has keys out of order");
            t.lower.emplace(sep);
        }
        HIODSFS_TRY(visit(t, child, page, level + 1, next));
    }
    return Status::ok();
}

Status Checker::walk(Tree& t) {
    const DbRecord& r = t.record;
    if (r.root == kNoPage) {
        if (r.depth != 0 || r.branch != 0 || r.leaf != 0 || r.overflow != 0 || r.entries != 0)
            return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: the record of " +
                                              t.name + " counts pages for an empty tree");
        return Status::ok();
    }
    if (r.depth == 0)
        return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: the record of " +
                                          t.name + " gives a tree of depth 0");
    HIODSFS_TRY(visit(t, r.root, r.root, 1, t.whole ? Side::kAll : Side::kEnds));
    if (t.whole && (t.branch != r.branch || t.leaf != r.leaf || t.overflow != r.overflow ||
                    t.entries != r.entries))
        return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: " + t.name +
                                          " holds " + u(t.entries) + " entries in " + u(t.branch) +
                                          "+" + u(t.leaf) + "+" + u(t.overflow) +
                                          " pages, its record says " + u(r.entries) + " in " +
                                          u(r.branch) + "+" + u(r.leaf) + "+" + u(r.overflow));
    return Status::ok();
}

Status Checker::run(LmdbFileSummary* summary) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::from_errno(errno, "stat " + path_);
    if (!S_ISREG(st.st_mode))
        return Status::error(EUCLEAN, "metadata file " + path_ + " is not a regular file");
    file_bytes_ = static_cast<std::uint64_t>(st.st_size);
    HIODSFS_TRY(read_metas());
    // One bit per page for the used and free maps: 64 MiB of them for the
    // 2^31 pages of an 8 TiB file, beyond any map hiodsfs sets.
    if (pages_ > (std::uint64_t{1} << 31))
        return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: its state claims " +
                                          u(pages_) + " pages");
    used_.assign(pages_, false);
    free_.assign(pages_, false);
    used_[0] = used_[1] = true;
    used_count_ = 2;
    if (options_.on_page) {
        options_.on_page(0, "", LmdbPageKind::kMeta);
        options_.on_page(1, "", LmdbPageKind::kMeta);
    }

    // The free list first: every page it names is free for what follows.
    Tree free_tree{"free", Tree::Kind::kFree, free_record_};
    HIODSFS_TRY(walk(free_tree));
    Tree main_tree{"main", Tree::Kind::kMain, main_record_};
    HIODSFS_TRY(walk(main_tree));
    std::uint64_t budget = options_.walk_bytes;
    auto bytes_of = [this](const DbRecord& r) {
        const std::uint64_t n = r.branch + r.leaf + r.overflow;
        return n > pages_ ? ~std::uint64_t{0} : n * psize_;
    };
    for (const DbRecord* r : {&free_record_, &main_record_})
        budget -= std::min(budget, bytes_of(*r));
    std::sort(named_.begin(), named_.end(), [&](const auto& a, const auto& b) {
        return bytes_of(a.second) < bytes_of(b.second);
    });
    bool whole = true;
    for (const auto& [name, record] : named_) {
        Tree t{name, Tree::Kind::kNamed, record};
        if (record.flags != 0 || record.pad != 0)
            return Status::error(EUCLEAN, "metadata file " + path_ + " is damaged: the record of " +
                                              name + " is not of a database hiodsfs makes");
        t.whole = bytes_of(record) <= budget;
        budget -= t.whole ? bytes_of(record) : 0;
        whole = whole && t.whole;
        HIODSFS_TRY(walk(t));
    }
    // LMDB's file may end before its last pages, if they are free (a commit
    // that freed them does not write them); any it uses were found above.
    for (std::uint64_t page = file_bytes_ / psize_; page < pages_; ++page) {
        if (!free_[page] && !(whole && !used_[page]))
            return Status::error(EUCLEAN, "metadata file " + path_ + " is cut short: it holds " +
                                              u(file_bytes_) + " bytes of the " +
                                              u(pages_ * psize_) + " its state may use");
    }
    if (summary != nullptr) {
        summary->page_bytes = psize_;
        summary->pages = pages_;
        summary->file_bytes = file_bytes_;
        summary->used_pages = used_count_;
        summary->free_pages = free_count_;
        summary->whole = whole;
    }
    return Status::ok();
}

}  // namespace

Status check_lmdb_file(const std::string& path, const LmdbCheckOptions& options,
                       LmdbFileSummary* summary) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(errno, "open " + path);
    Checker checker(fd, path, options);
    Status result = checker.run(summary);
    ::close(fd);
    return result;
}

}  // namespace hiodsfs
