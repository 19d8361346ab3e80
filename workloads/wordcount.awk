# heaplab workload: word frequencies with gawk (associative arrays of strings).
{
    $0 = tolower($0)
    n = split($0, words, /[^a-z']+/)
    for (i = 1; i <= n; i++) {
        if (words[i] == "") continue
        count[words[i]]++
        if (prev != "") pair[prev " " words[i]]++
        prev = words[i]
    }
}
END {
    PROCINFO["sorted_in"] = "@val_num_desc"
    k = 0
    for (w in count) { if (++k > 30) break; printf "%8d %s\n", count[w], w }
    d = 0; for (w in count) d++
    p = 0; for (w in pair) p++
    printf "%d distinct words, %d distinct pairs\n", d, p
}
