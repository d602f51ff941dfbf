// Skipping a test case whose precondition the machine lacks (root, an
// installed binary, a CPU feature). Catch2 2.x has no skip of its own, and a
// test case that just returns counts as passed; SKIP_TEST returns from the
// test case and has the shared main (tests/test_main.cc) print, when the test
// case ends without a failure, the one line scripts/test counts as skipped:
//   SKIPPED: <test case name>: <reason>
// Call it from the TEST_CASE body, before its sections and assertions.
#pragma once

#include <sstream>
#include <string>

namespace hiodsfs::test {

// Records why the running test case is skipped; the first reason wins.
void mark_skipped(const std::string& reason);

}  // namespace hiodsfs::test

// SKIP_TEST("needs root") or SKIP_TEST("no " << what << " here").
#define SKIP_TEST(reason)                                          \
    do {                                                           \
        std::ostringstream hiodsfs_skip_reason_;                   \
        hiodsfs_skip_reason_ << reason;                            \
        ::hiodsfs::test::mark_skipped(hiodsfs_skip_reason_.str()); \
        return;                                                    \
    } while (false)
