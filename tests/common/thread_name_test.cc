// common/thread_name.h: a thread's name is what /proc shows for it (top -H,
// perf, gdb), cut at the kernel's 15 bytes rather than refused.
#include "common/thread_name.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <thread>

using namespace hiodsfs;

namespace {

std::string comm_of_this_thread() {
    std::ifstream in("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
}

}  // namespace

TEST_CASE("a thread's name shows in /proc, cut at 15 bytes", "[common][thread_name]") {
    std::string short_name, long_name;
    std::thread([&] {
        name_this_thread("hiod-commit");
        short_name = comm_of_this_thread();
        name_this_thread("hiodsfs-background-pass");
        long_name = comm_of_this_thread();
    }).join();
    CHECK(short_name == "hiod-commit");
    CHECK(long_name == "hiodsfs-backgro");
}
