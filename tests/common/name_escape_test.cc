// common/name_escape.h: names and paths in report and log lines, escaped
// as `ls -b` does, so no name can end a line, forge another or drive the
// terminal; checked against ls itself.
#include "common/name_escape.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../engine/engine_test_util.h"

using namespace hiodsfs;

TEST_CASE("names are escaped as ls -b does", "[escape]") {
    CHECK(escape_name("a.txt") == "a.txt");
    CHECK(escape_name("caf\xc3\xa9 \xe6\x97\xa5") ==
          "caf\xc3\xa9\\ \xe6\x97\xa5");  // UTF-8 prints as it is
    CHECK(escape_name("a b") == "a\\ b");
    CHECK(escape_name("back\\slash") == "back\\\\slash");
    CHECK(escape_name("new\nline\ttab\rcr") == "new\\nline\\ttab\\rcr");
    CHECK(escape_name("\x1b[31mred") == "\\033[31mred");
    CHECK(escape_name(std::string("nul\0x", 5)) == "nul\\000x");
    CHECK(escape_name("del\x7f") == "del\\177");
    CHECK(escape_name("\xff\xfe") == "\\377\\376");                 // not UTF-8
    CHECK(escape_name("c1\xc2\x85x") == "c1\\302\\205x");           // U+0085, a C1 control
    CHECK(escape_name("ls\xe2\x80\xa8x") == "ls\\342\\200\\250x");  // U+2028
    CHECK(escape_name("\xc0\xaf") == "\\300\\257");                 // overlong '/'
    CHECK(escape_name("\xed\xa0\x80") == "\\355\\240\\200");        // a surrogate
    CHECK(escape_name("cut\xe2\x80") == "cut\\342\\200");           // a sequence cut short
    CHECK(escape_name("a/b") == "a\\057b");                         // no name holds one
    CHECK(escape_path("/srv/my store/f\n") == "/srv/my\\ store/f\\n");
}

TEST_CASE("bidi controls are escaped too, which ls leaves", "[escape]") {
    CHECK(escape_name("rtl\xe2\x80\xaeX") == "rtl\\342\\200\\256X");  // U+202E
    CHECK(escape_name("iso\xe2\x81\xa6X") == "iso\\342\\201\\246X");  // U+2066
}

TEST_CASE("a line keeps its spaces and backslashes; nothing in it ends it", "[escape]") {
    CHECK(escape_line("bad chunk 5: it holds /a b\\c") == "bad chunk 5: it holds /a b\\c");
    CHECK(escape_line("x\nERROR: forged\r\x1b[2K") == "x\\012ERROR: forged\\015\\033[2K");
    CHECK(escape_line("\xff") == "\\377");
}

TEST_CASE("escape_name agrees with ls -b in a UTF-8 locale", "[escape]") {
    test::TempDir dir;
    const std::vector<std::string> names = {
        "plain",    "a b",         "back\\slash", "new\nline",      "tab\t",   "\x1b[31m",
        "\xff\xfe", "caf\xc3\xa9", "c1\xc2\x85",  "ls\xe2\x80\xa8", "q\"uote", "it's",
        "#x",       "~t",          "\x01\x02",    "del\x7f"};
    for (const std::string& n : names) std::ofstream(dir.path() + "/" + n).put('x');
    const std::string cmd = "cd '" + dir.path() + "' && LC_ALL=C.UTF-8 ls -b1 --sort=none";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    REQUIRE(::pclose(p) == 0);
    std::vector<std::string> listed;
    for (std::size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
        listed.push_back(out.substr(at, nl - at));
    REQUIRE(listed.size() == names.size());
    for (const std::string& n : names) {
        INFO("escaped: " << escape_name(n));
        CHECK(std::find(listed.begin(), listed.end(), escape_name(n)) != listed.end());
    }
}
