// The one Catch2 main shared by every test binary, with the listener that
// reports the test cases SKIP_TEST (tests/skip.h) skipped.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "skip.h"

namespace {

std::string skip_reason;  // of the running test case; "" when it runs in full

struct SkipListener : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;

    void testCaseStarting(Catch::TestCaseInfo const& info) override {
        skip_reason.clear();
        TestEventListenerBase::testCaseStarting(info);
    }

    // A test case that failed before it skipped is a failure, not a skip.
    void testCaseEnded(Catch::TestCaseStats const& stats) override {
        if (!skip_reason.empty() && stats.totals.assertions.failed == 0) {
            Catch::cout() << "SKIPPED: " << stats.testInfo.name << ": " << skip_reason << std::endl;
        }
        TestEventListenerBase::testCaseEnded(stats);
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(SkipListener)

void hiodsfs::test::mark_skipped(const std::string& reason) {
    if (skip_reason.empty()) skip_reason = reason.empty() ? "(no reason given)" : reason;
}
