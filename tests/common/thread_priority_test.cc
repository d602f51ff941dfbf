// common/thread_priority.h: a nice value set here is the calling thread's
// alone (what the kernel reports for its thread id), it goes back to 0 with
// the privilege, and a daemon that may not lower its nice value again stays
// niced and says so.
#include "common/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <thread>

#include "../skip.h"

using namespace hiodsfs;

namespace {

int kernel_nice_of_this_thread() {
    errno = 0;
    return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

}  // namespace

TEST_CASE("a thread's nice value is its own", "[common][thread_priority]") {
    const int main_before = kernel_nice_of_this_thread();
    int inside = -1, back_at_0 = -1, reported = -1;
    std::thread([&] {
        set_thread_nice(19);
        inside = kernel_nice_of_this_thread();
        reported = thread_nice();
        set_thread_nice(0);
        back_at_0 = kernel_nice_of_this_thread();
    }).join();
    CHECK(inside == 19);
    CHECK(reported == 19);
    if (::geteuid() == 0) CHECK(back_at_0 == 0);  // lowering it again needs the privilege
    CHECK(kernel_nice_of_this_thread() == main_before);
    CHECK(thread_nice() == 0);
}

TEST_CASE("values outside 0..19 are clamped", "[common][thread_priority]") {
    int got = -1;
    std::thread([&] {
        set_thread_nice(40);
        got = kernel_nice_of_this_thread();
    }).join();
    CHECK(got == 19);
}

TEST_CASE("without the privilege a thread stays niced and is told so", "[common][thread_priority]") {
    if (::geteuid() != 0) SKIP_TEST("needs root (to drop to another user in a child)");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // A child of its own: it gives up root, and RLIMIT_NICE 0 forbids
        // lowering a nice value again.
        const rlimit none{0, 0};
        if (::setrlimit(RLIMIT_NICE, &none) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(10);
        if (!set_thread_nice(10) || kernel_nice_of_this_thread() != 10) ::_exit(11);
        if (set_thread_nice(0)) ::_exit(12);                         // refused
        if (kernel_nice_of_this_thread() != 10) ::_exit(13);         // and unchanged
        if (thread_nice() != 10) ::_exit(14);
        if (set_thread_nice(5)) ::_exit(15);                         // any lower value too
        if (!set_thread_nice(19) || kernel_nice_of_this_thread() != 19) ::_exit(16);  // up is fine
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
