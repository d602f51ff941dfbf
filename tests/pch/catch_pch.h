// Precompiled for every test translation unit: Catch2's single header is
// most of what each test file's compiler has to parse.
#include <catch2/catch.hpp>
