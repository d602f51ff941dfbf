# scripts/bench-lib/compression.awk — the summary's compression section,
# put before scripts/bench-lib/summarize's program, which calls
# compression_section() from its END with its tables filled: tid, nt,
# label, kind, opts, status (targets), med, had, cpu, wrote, readb, space
# (figures), refpt (each target's passthrough_ll), size, cpct, sumf.
#
# A configuration's reference without compression is the one with the same
# other options and compression=none,compression_background=none.

# The value of -o option NAME of target t, "" when not given.
function optval(t, name,    n, a, i) {
    n = split(opts[t], a, ",")
    for (i = 1; i <= n; i++) if (index(a[i], name "=") == 1) return substr(a[i], length(name) + 2)
    return ""
}
# The mode a configuration runs in (the daemon's default is hybrid).
function mode_of(t,    m) { m = optval(t, "mode"); return (m == "") ? "hybrid" : m }
function uncompressed(t) { return optval(t, "compression") == "none" && optval(t, "compression_background") == "none" }
# The options of t other than the two compression ones, sorted: two targets
# with the same key differ in compression only.
function other_opts(t,    n, a, i, j, x, out) {
    n = split(opts[t], a, ",")
    for (i = 2; i <= n; i++) {
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
    out = ""
    for (i = 1; i <= n; i++)
        if (a[i] !~ /^compression(_background)?=/) out = out "," a[i]
    return out
}
function name_of(t) { return (kind[t] == "hiodsfs") ? substr(label[t], 9) : label[t] }
function mib(v) { return (v == "") ? "—" : num(v, "MiB/s") }
function gib(v) { return (v == "") ? "—" : sprintf("%.2f", v) }
function space_mib(k,    sp) { sp = median(space[k]); return (sp == "") ? "—" : sprintf("%d", sp / 1024 + 0.5) }

# One row of the table: target t on the data of workloads W (write) and R
# (read).
function comp_row(t, data, W, R,    kw, kr, line) {
    kw = t SUBSEP W; kr = t SUBSEP R
    if (!had[kw] && !had[kr]) return
    line = "| " name_of(t) " | " data " | " mib(med[kw])
    if (kind[t] != "raw") line = line " · " fr(ratio(med[kw], med[refpt[t] SUBSEP W], "MiB/s"))
    line = line " | " ((none_of[t] == "") ? "—" : fr(ratio(med[kw], med[none_of[t] SUBSEP W], "MiB/s")))
    line = line " | " ((kind[t] == "raw") ? "—" : gib(cpugib(kw))) " | " space_mib(kw)
    line = line " | " mib(med[kr])
    if (kind[t] != "raw") line = line " · " fr(ratio(med[kr], med[refpt[t] SUBSEP R], "MiB/s"))
    line = line " | " ((none_of[t] == "") ? "—" : fr(ratio(med[kr], med[none_of[t] SUBSEP R], "MiB/s")))
    line = line " | " ((kind[t] == "raw") ? "—" : gib(cpugib_read(kr))) " |"
    print line >sumf
}

# A target of issue 45 over every configuration it applies to (applies_to:
# "deferred" for deferred ones with compression, "readback" for those whose
# write path compresses, "inline-default" for inline with the default
# compression, "random" for every one with compression): ratio of workload w
# to the reference ("pt" or "none"), at least g.
function comp_target(text, applies_to, w, against, g,    j, t, m, r, ref, n, cell) {
    n = 0
    for (j = 1; j <= nt; j++) {
        t = tid[j]; if (kind[t] != "hiodsfs") continue
        m = mode_of(t)
        if (applies_to == "deferred" && (m != "deferred" || uncompressed(t))) continue
        if (applies_to == "readback" && (m == "deferred" || optval(t, "compression") == "none")) continue
        if (applies_to == "inline-default" && (m != "inline" || optval(t, "compression") != "")) continue
        if (applies_to == "random" && uncompressed(t)) continue
        n++
        ref = (against == "pt") ? refpt[t] : none_of[t]
        if (!had[t SUBSEP w]) cell = ((status[t] != "ok") ? "skipped" : "not run") " | —"
        else if (ref == "") cell = "no configuration without compression to compare with | —"
        else {
            r = ratio(med[t SUBSEP w], med[ref SUBSEP w], "MiB/s")
            if (r == "") cell = "— | —"
            else cell = sprintf("%.2f (%s ÷ %s MiB/s of %s) | %s", r, mib(med[t SUBSEP w]), mib(med[ref SUBSEP w]),
                                name_of(ref), verdict(r, g, "min"))
        }
        print "| " text " | " name_of(t) " | " cell " |" >sumf
    }
    if (!n) print "| " text " | — | no configuration of this run it applies to | — |" >sumf
}

function compression_section(    j, u, t) {
    if (!("seqwrite-comp" in seen)) return
    for (j = 1; j <= nt; j++) {
        t = tid[j]; none_of[t] = ""
        if (kind[t] != "hiodsfs") continue
        if (uncompressed(t)) { none_of[t] = t; continue }
        for (u = 1; u <= nt; u++)
            if (kind[tid[u]] == "hiodsfs" && uncompressed(tid[u]) && other_opts(tid[u]) == other_opts(t)) {
                none_of[t] = tid[u]; break
            }
    }
    print "## Compression: compressible and random data" >sumf
    print "" >sumf
    print "Sequential 1 MiB writes (end_fsync) and reads after a remount, " size " files: *compressible* is the `comp` group (" cpct " % of every 4 KiB zeros, the rest random), *random* the `seq` group (random bytes, which no codec shrinks)." >sumf
    print "Write and read cells: median MiB/s · × pt. **× none**: against the configuration with the same other options and `compression=none,compression_background=none`, in the same run. **CPU s/GiB**: the daemon's user + system CPU seconds during the run (`/proc/PID/stat` before and after it) per GiB fio wrote or read; deferred writes count only what of the background pass ran during them. **space**: the store after the write (deferred: mostly before the pass)." >sumf
    print "" >sumf
    print "| target | data | write MiB/s · × pt | × none | CPU s/GiB written | space MiB | read MiB/s · × pt | × none | CPU s/GiB read |" >sumf
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|" >sumf
    for (j = 1; j <= nt; j++) {
        comp_row(tid[j], "compressible", "seqwrite-comp", "seqread-comp")
        comp_row(tid[j], "random", "seqwrite-unique", "seqread-unique")
    }
    print "" >sumf
    print "### Issue 45's speed targets (reported, not asserted)" >sumf
    print "" >sumf
    if (size != "1G") print "The targets are stated for 1 GiB files; this run's are " size "." >sumf
    print "Deferred writes are stored as they come (the background pass compresses them), so the read target is judged on configurations whose write path compresses." >sumf
    print "" >sumf
    print "| target | configuration | figure | verdict |" >sumf
    print "|---|---|---|---|" >sumf
    comp_target("deferred with compression: write, compressible, ≥ 0.9 × without", "deferred", "seqwrite-comp", "none", 0.9)
    comp_target("read after remount, compressible, ≥ 1.0 × passthrough_ll", "readback", "seqread-comp", "pt", 1.0)
    comp_target("inline, default compression: write, compressible, ≥ 0.6 × passthrough_ll", "inline-default", "seqwrite-comp", "pt", 0.6)
    comp_target("random data: write ≥ 0.95 × compression=none", "random", "seqwrite-unique", "none", 0.95)
    print "" >sumf
}
