# shellcheck shell=bash
# scripts/bench-lib/common.sh — helpers for the benchmark scripts, sourced
# (not run). Needs bash; sets nothing on its own.

# bench_is_mounted DIR: DIR is a mount point of this namespace now.
bench_is_mounted() { awk -v m="$1" '$2 == m {f = 1} END {exit !f}' /proc/self/mounts; }

# bench_default_daemon REPO: the hiodsfs binary a run uses when none is
# given: the build tree's, else the installed one. Prints nothing if neither.
bench_default_daemon() {
    if [ -x "$1/build/src/fuse/hiodsfs" ]; then
        echo "$1/build/src/fuse/hiodsfs"
    else
        command -v hiodsfs || true
    fi
}

# bench_cpu_s PID: user + system CPU seconds of a live process.
bench_cpu_s() {
    local rest
    # Fields after "(comm)": utime is the 12th, stime the 13th.
    rest=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    awk -v r="$rest" -v t="$(getconf CLK_TCK)" 'BEGIN {split(r, f, " "); printf "%.2f\n", (f[12] + f[13]) / t}'
}

# bench_mem_kib PID FIELD...: the named /proc/PID/status figures (VmRSS,
# RssAnon, RssFile, RssShmem, VmHWM ...) in KiB, blank-separated, in order.
bench_mem_kib() {
    local pid=$1; shift
    awk -v want="$*" '
        BEGIN {n = split(want, w, " ")}
        {sub(/:$/, "", $1); v[$1] = $2}
        END {for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), ((w[i] in v) ? v[w[i]] : "-"); print ""}
    ' "/proc/$pid/status"
}

# bench_fuse_params: the header line of the FUSE module's parameters, which
# change every FUSE target's figures (wake_here: docs/architecture.md, "What
# a request's round trip costs"); nothing where the module shows none.
bench_fuse_params() {
    local params=/sys/module/fuse/parameters p line=''
    [ -d "$params" ] || return 0
    for p in "$params"/*; do
        [ -r "$p" ] && line+="${line:+ }$(basename "$p")=$(cat "$p" 2>/dev/null)"
    done
    echo "fuse params: ${line:-none}"
}

# bench_machine DIR: the machine lines of a results header (CPUs, memory,
# kernel, OS, the file system and disk that hold DIR, load now).
bench_machine() {
    local dev
    dev=$(findmnt -n -o SOURCE -T "$1")
    echo "host cpus:   $(nproc) × $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "memory:      $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "kernel:      $(uname -srm)"
    bench_fuse_params
    echo "os:          $(grep -oP '^PRETTY_NAME="?\K[^"]*' /etc/os-release)"
    echo "test dir:    $1 on $dev ($(findmnt -n -o FSTYPE,OPTIONS -T "$1"))"
    echo "disk:        $(lsblk -dn -o NAME,SIZE,ROTA,MODEL "$dev" 2>/dev/null | awk '{printf "%s %s rotational=%s %s", $1, $2, $3, $4}')"
    echo "load avg:    $(cut -d' ' -f1-3 /proc/loadavg) at start"
}

# bench_build_passthrough WORKDIR LOGFILE: compiles libfuse's passthrough_ll
# from Debian's libfuse3-dev example into WORKDIR/bin (never committed) and
# prints its path; on failure prints the compiler's errors to stderr and
# returns 1. Debian may ship the examples gzipped; passthrough_ll.c
# includes passthrough_helpers.h from the same directory.
bench_build_passthrough() {
    local work=$1 log=$2 examples=/usr/share/doc/libfuse3-dev/examples f
    mkdir -p "$work/pt-src" "$work/bin"
    for f in passthrough_ll.c passthrough_helpers.h; do
        if [ -f "$examples/$f" ]; then
            cp -- "$examples/$f" "$work/pt-src/$f"
        elif [ -f "$examples/$f.gz" ]; then
            gzip -dc "$examples/$f.gz" >"$work/pt-src/$f"
        else
            echo "$examples/$f not found: apt-get install libfuse3-dev" >&2
            return 1
        fi
    done
    # shellcheck disable=SC2046  # pkg-config output must split into words
    gcc -O2 -o "$work/bin/passthrough_ll" "$work/pt-src/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) \
        2>"$log" || { cat "$log" >&2; return 1; }
    echo "$work/bin/passthrough_ll"
}
