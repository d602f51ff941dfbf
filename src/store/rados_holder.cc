#include "store/rados_holder.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <sstream>

namespace hiodsfs {
namespace {

constexpr const char* kHolderMagic = "hiodsfs store holder";

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
    return name;
}

std::string boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (!(in >> id)) return "unknown";
    return id;
}

// "pid:[4026531836]" -> "4026531836".
std::string pid_namespace() {
    char link[64] = {};
    const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);
    if (n <= 0) return "unknown";
    std::string s(link, static_cast<std::size_t>(n));
    const auto open = s.find('['), close = s.find(']');
    if (open == std::string::npos || close == std::string::npos || close <= open + 1)
        return "unknown";
    return s.substr(open + 1, close - open - 1);
}

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool parse_u32(const std::string& s, std::uint32_t* out) {
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
        return false;
    const unsigned long long v = std::stoull(s);
    if (v > UINT32_MAX) return false;
    *out = static_cast<std::uint32_t>(v);
    return true;
}

}  // namespace

std::string this_process_cookie() {
    return host_name() + " pid " + std::to_string(::getpid()) + " boot " + boot_id() + " pidns " +
           pid_namespace();
}

bool parse_cookie(const std::string& cookie, CookieOwner* out) {
    // From the end: the host name may hold spaces of its own.
    const std::string pid_key = " pid ";
    const auto at = cookie.rfind(pid_key);
    if (at == std::string::npos || at == 0) return false;
    std::istringstream in(cookie.substr(at + pid_key.size()));
    std::string pid, boot_key, boot, ns_key, ns, extra;
    if (!(in >> pid >> boot_key >> boot >> ns_key >> ns) || (in >> extra)) return false;
    if (!all_digits(pid) || boot_key != "boot" || ns_key != "pidns" || boot.empty() || ns.empty())
        return false;
    out->host = cookie.substr(0, at);
    out->pid = static_cast<pid_t>(std::stol(pid));
    out->boot_id = boot;
    out->pid_ns = ns;
    return true;
}

pid_t pid_of_this_machine(const std::string& cookie) {
    CookieOwner owner;
    if (!parse_cookie(cookie, &owner) || owner.pid <= 0) return 0;
    if (owner.boot_id != boot_id() || owner.pid_ns != pid_namespace()) return 0;
    return owner.pid;
}

std::string encode_holder(const HolderRecord& r) {
    return std::string(kHolderMagic) + "\nepoch " + std::to_string(r.epoch) + "\nsegments " +
           std::to_string(r.first_segment) + " " + std::to_string(r.reserved) + "\nreleased " +
           (r.released ? "1" : "0") + "\naddress " + r.address + "\ncookie " + r.cookie + "\n";
}

bool decode_holder(const std::string& text, HolderRecord* out) {
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != kHolderMagic) return false;
    HolderRecord r;
    bool epoch = false, segments = false, released = false;
    while (std::getline(in, line)) {
        const auto space = line.find(' ');
        const std::string key = line.substr(0, space);
        const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
        if (key == "epoch") {
            epoch = parse_u32(value, &r.epoch);
        } else if (key == "segments") {
            const auto sp = value.find(' ');
            segments = sp != std::string::npos &&
                       parse_u32(value.substr(0, sp), &r.first_segment) &&
                       parse_u32(value.substr(sp + 1), &r.reserved);
        } else if (key == "released") {
            released = value == "0" || value == "1";
            r.released = value == "1";
        } else if (key == "address") {
            r.address = value;
        } else if (key == "cookie") {
            r.cookie = value;
        }
    }
    if (!epoch || !segments || !released) return false;
    *out = r;
    return true;
}

}  // namespace hiodsfs
