#include "cli/passphrase.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hiodsfs::cli {

namespace {

constexpr const char* kAskPasswordPaths[] = {"/usr/bin/systemd-ask-password", "/bin/systemd-ask-password"};

// The terminal's echo off while a passphrase is typed, and back after.
class EchoOff {
public:
    explicit EchoOff(int fd) : fd_(fd) {
        if (::tcgetattr(fd_, &saved_) != 0) return;
        struct termios quiet = saved_;
        quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        quiet.c_lflag |= ECHONL;
        on_ = ::tcsetattr(fd_, TCSANOW, &quiet) == 0;  // typeahead stays: it is the answer
    }
    ~EchoOff() {
        if (on_) ::tcsetattr(fd_, TCSANOW, &saved_);
    }
    EchoOff(const EchoOff&) = delete;
    EchoOff& operator=(const EchoOff&) = delete;

private:
    int fd_;
    struct termios saved_ {};
    bool on_ = false;
};

Status from_terminal(const std::string& prompt, Passphrase* out) {
    std::fprintf(stderr, "%s: ", prompt.c_str());
    std::fflush(stderr);
    EchoOff quiet(STDIN_FILENO);
    return read_passphrase_line(STDIN_FILENO, out);
}

// systemd-ask-password PROMPT, its answer read from a pipe.
Status from_ask_password(const char* program, const std::string& prompt, Passphrase* out) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::from_errno(errno, "pipe");
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int e = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        return Status::from_errno(e, "fork");
    }
    if (pid == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        const std::string text = prompt + ":";
        ::execl(program, "systemd-ask-password", "--id=hiodsfs", text.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(fds[1]);
    Status read = read_passphrase_line(fds[0], out);
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return Status::error(EACCES, std::string(program) + " gave no passphrase");
    return read;
}

}  // namespace

Status read_passphrase_line(int fd, Passphrase* out) {
    std::string line;
    bool any = false;
    struct Wipe {
        std::string& s;
        ~Wipe() { explicit_bzero(s.data(), s.size()); }
    } wipe{line};
    line.reserve(Passphrase::kMaxBytes + 2);
    for (;;) {
        char c = 0;
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::from_errno(errno, "reading the passphrase");
        if (n == 0) break;
        any = true;
        if (c == '\n') break;
        if (line.size() > Passphrase::kMaxBytes) continue;  // refused below; the rest of the line is read
        line.push_back(c);
    }
    if (!any) return Status::error(ENODATA, "no passphrase was given (end of input)");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) return Status::error(EINVAL, "the passphrase is empty");
    if (line.size() > Passphrase::kMaxBytes)
        return Status::error(EINVAL, "the passphrase is longer than " + std::to_string(Passphrase::kMaxBytes) +
                                         " bytes");
    *out = Passphrase(std::string(line));
    return Status::ok();
}

Status ask_passphrase(const std::string& prompt, bool confirm, Passphrase* out) {
    // Asks with ask, and a second time to confirm.
    auto twice = [&](auto ask) -> Status {
        HIODSFS_TRY(ask(prompt, out));
        if (!confirm) return Status::ok();
        Passphrase again;
        HIODSFS_TRY(ask(prompt + " (again)", &again));
        if (again.text() == out->text()) return Status::ok();
        *out = Passphrase();
        return Status::error(EINVAL, "the two passphrases differ");
    };
    if (::isatty(STDIN_FILENO) == 1) return twice(from_terminal);
    struct stat st {};
    if (::fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode)))
        return read_passphrase_line(STDIN_FILENO, out);
    for (const char* program : kAskPasswordPaths)
        if (::access(program, X_OK) == 0)
            return twice([program](const std::string& p, Passphrase* o) { return from_ask_password(program, p, o); });
    return Status::error(ENXIO, "key=ask: no terminal to ask on, no passphrase on standard input, and no "
                                "systemd-ask-password");
}

}  // namespace hiodsfs::cli
