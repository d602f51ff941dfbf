// The check of data.mdb that comes before LMDB maps it.
//
// LMDB trusts its file: it maps it and follows the offsets and page numbers
// it finds. A file cut short faults (SIGBUS) at the first page past its end;
// a page of other bytes sends it to wild addresses (SIGSEGV), trips one of
// its assertions (SIGABRT), hands back a value from a page that is not one
// (a large value's page overwritten), or, worst, names a page the trees
// still use as free, so that the next commit writes over it.
//
// check_lmdb_file() reads the file itself, with pread and no map, as LMDB
// 0.9 lays it out (data version 1, unchanged since 0.9.0), and refuses a
// file LMDB could not use safely, with one line that names the page and
// the database: both meta pages as LMDB reads them; the snapshot the newer
// one describes, which the file must hold to its last page (a shorter file
// is allowed only where the pages it lacks are free, as LMDB leaves one
// whose last commit freed its last pages); every page of every tree, each
// reached once, of the kind and at the depth its parent says, its nodes
// packed inside it with their keys in order, a large value's pages with
// their header; each tree's counts against its record; the free-page list,
// whose pages must lie in the file, each named once and none of them used.
// What it cannot see: the bytes of a value past the first page of its
// overflow run carry no structure (a large extended attribute: a damaged
// second page reads as other bytes).
//
// Thread-safety: a free function on a file nothing else writes meanwhile
// (the caller holds the store's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hiodsfs/status.h"

namespace hiodsfs {

enum class LmdbPageKind { kMeta, kBranch, kLeaf, kOverflow };

struct LmdbCheckOptions {
    // Trees are read whole, smallest first, while their pages together fit
    // in this many bytes; of a larger one only the pages on the paths to its
    // first and last records. The free-page list and the list of databases
    // are always read whole: a damaged free list is what would make LMDB
    // write over live pages.
    std::uint64_t walk_bytes = ~std::uint64_t{0};
    // Called for every page of the snapshot the check read: its number, the
    // database it belongs to ("free" for LMDB's free-page list, "main" for
    // its list of databases, "" for a meta page) and its kind.
    std::function<void(std::uint64_t page, std::string_view db, LmdbPageKind kind)> on_page;
};

struct LmdbFileSummary {
    std::uint32_t page_bytes = 0;
    std::uint64_t pages = 0;  // the snapshot's last page + 1
    std::uint64_t file_bytes = 0;
    std::uint64_t used_pages = 0;  // meta and tree pages read
    std::uint64_t free_pages = 0;  // named by the free list
    bool whole = false;            // every tree was read whole
};

// EUCLEAN (damage, or a file cut short) or the open's or a read's errno,
// with a message naming `path`; ENOENT if the file is not there.
Status check_lmdb_file(const std::string& path, const LmdbCheckOptions& options,
                       LmdbFileSummary* summary = nullptr);

}  // namespace hiodsfs
