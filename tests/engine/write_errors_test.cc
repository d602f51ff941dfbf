// WriteErrors (src/engine/write_errors.cc) on its own: a lost write is told
// the way Linux tells a writeback error, once to every file that was open
// when it was lost, and to a later opener only if nobody was told yet.
// tests/engine/write_behind_test.cc shows it through the engine.
#include "engine/write_errors.h"

#include <catch2/catch.hpp>
#include <cerrno>

using namespace hiodsfs;

namespace {

const Status kWhy = Status::error(ENOSPC, "the store's file system is full");

}  // namespace

TEST_CASE("a loss is told once to each file open when it happened", "[engine][write_errors]") {
    WriteErrors errors;
    WriteErrorCursor a = errors.sample(7), b = errors.sample(7), other = errors.sample(8);
    errors.record(7, kWhy);

    const Status first = errors.check(7, &a);
    CHECK(first.err() == EIO);
    CHECK(first.message() == "writes acknowledged earlier were lost: the store's file system is full");
    CHECK(errors.check(7, &a).is_ok());  // told once
    CHECK(errors.check(7, &b).err() == EIO);  // a's close took nothing from b
    CHECK(errors.check(7, &b).is_ok());
    CHECK(errors.check(8, &other).is_ok());  // another file lost nothing

    // A second loss is told again to both.
    errors.record(7, kWhy);
    CHECK(errors.check(7, &a).err() == EIO);
    CHECK(errors.check(7, &b).err() == EIO);
}

TEST_CASE("a later opener is told only of a loss nobody was told of", "[engine][write_errors]") {
    WriteErrors errors;
    errors.record(7, kWhy);
    // Nobody open was told: the first to open and ask is.
    WriteErrorCursor late = errors.sample(7);
    CHECK(errors.check(7, &late).err() == EIO);
    // Now someone was told: a file opened after that starts past the loss.
    WriteErrorCursor later = errors.sample(7);
    CHECK(errors.check(7, &later).is_ok());
}

TEST_CASE("a told loss is dropped with the last reference, an untold one kept", "[engine][write_errors]") {
    WriteErrors errors;
    errors.record(7, kWhy);
    errors.record(8, kWhy);
    WriteErrorCursor c7 = errors.sample(7);
    REQUIRE(errors.check(7, &c7).err() == EIO);

    errors.forget_if_told(7);
    errors.forget_if_told(8);  // nobody was told of 8's: kept
    WriteErrorCursor fresh7 = errors.sample(7), fresh8 = errors.sample(8);
    CHECK(errors.check(7, &fresh7).is_ok());
    CHECK(errors.check(8, &fresh8).err() == EIO);

    errors.record(9, kWhy);
    errors.forget(9);  // the file is gone
    WriteErrorCursor fresh9 = errors.sample(9);
    CHECK(errors.check(9, &fresh9).is_ok());
}

TEST_CASE("stamps never repeat, even for a file forgotten and seen again", "[engine][write_errors]") {
    WriteErrors errors;
    errors.record(7, kWhy);
    WriteErrorCursor c = errors.sample(7);
    REQUIRE(errors.check(7, &c).err() == EIO);
    errors.forget(7);
    errors.record(7, kWhy);  // a new loss must not look like the one c saw
    CHECK(errors.check(7, &c).err() == EIO);
}
