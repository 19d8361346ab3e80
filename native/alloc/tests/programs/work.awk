# gawk workload: word frequencies, associative arrays, string functions.
{
    for (i = 1; i <= NF; i++) {
        w = tolower($i); freq[w]++; total++
        if (length(w) > 6) long[substr(w, 1, 4)] = long[substr(w, 1, 4)] " " w
    }
    line[NR] = $0
    if (NR % 7 == 0) delete line[NR - 3]
}
END {
    n = asorti(freq, keys)
    printf "records %d words %d distinct %d\n", NR, total, n
    for (i = 1; i <= n && i <= 20; i++) printf "%s %d\n", keys[i], freq[keys[i]]
    m = 0; for (k in long) m += length(long[k])
    printf "long %d\n", m
    s = ""; c = 0; for (k in line) { c++ }
    printf "lines %d\n", c
    for (i = 1; i <= 2000; i++) s = s sprintf("%d,", i * i % 977)
    gsub(/1/, "one", s); printf "gsub %d\n", length(s)
}
