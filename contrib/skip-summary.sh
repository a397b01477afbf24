#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What 'make check' skipped in a build tree, and why: every googletest case
# reported SKIPPED (with the reason its GTEST_SKIP printed), every sub-case
# a test printed as "SKIP ...", and every test program that exited 77, one
# line each, from the test logs.  Prints nothing when nothing was skipped.
#   contrib/skip-summary.sh BUILD_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
cd "$1"
logs=$(find test -name '*.log' ! -name test-suite.log 2>/dev/null | sort)
[ -n "$logs" ] || exit 0
awk '
    function add(lf, name, why,   k) {
        k = lf SUBSEP why
        if (!(k in n)) { order[++nk] = k }
        n[k]++
        if (n[k] <= 3) names[k] = (names[k] == "" ? name : names[k] ", " name)
    }
    FNR == 1 { reason = ""; inskip = 0 }
    /: Skipped$/ { inskip = 1; reason = ""; next }
    /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ {
        add(FILENAME, $4, (reason == "" ? "(no reason given)" : reason))
        inskip = 0; next
    }
    /^\[/ { inskip = 0 }
    inskip { reason = (reason == "" ? $0 : reason " " $0); next }
    /exit status: 77\)$/ { next } # the automake trailer: the reason came before
    /^ *SKIP[ :(]/ { line = $0; sub(/^ *SKIP[ :(][^:]*: */, "", line); add(FILENAME, "", line) }
    END {
        for (i = 1; i <= nk; ++i) {
            split(order[i], f, SUBSEP)
            printf "%s: %d skipped: %s", f[1], n[order[i]], f[2]
            if (names[order[i]] != "") printf " [%s%s]", names[order[i]], (n[order[i]] > 3 ? ", ..." : "")
            printf "\n"
        }
    }
' $logs
