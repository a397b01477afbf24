# SPDX-License-Identifier: BSD-3-Clause
# One-line apt sources ("deb [options] URI suite components") in, their
# deb-src copies out; comments and deb-src lines are dropped.  With
# -v uris="U1 U2" only lines with one of those URIs (trailing '/' ignored)
# are kept.  Used by contrib/ucx-source.sh (ucx_source_fetch).
BEGIN {
    nwant = split(uris, want, " ")
}
$1 != "deb" {
    next
}
{
    i = 2
    if ($2 ~ /^\[/) {
        while (i <= NF && $i !~ /\]$/)
            i++
        i++
    }
    u = $i
    sub(/\/+$/, "", u)
    ok = (nwant == 0)
    for (k = 1; k <= nwant; k++)
        if (want[k] == u)
            ok = 1
    if (ok) {
        $1 = "deb-src"
        print
    }
}
