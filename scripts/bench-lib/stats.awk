# Shared by scripts/bench-lib/summarize and plot, put before their programs.
# median("3 1 2") → 2: the median of blank-separated numbers, "" for none
# (mawk has no asort: an insertion sort, the lists are short).
function median(list,    a, n, i, j, x) {
    n = split(list, a, " ")
    if (n == 0) return ""
    for (i = 2; i <= n; i++) {
        x = a[i] + 0
        for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
    return (n % 2) ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
}
