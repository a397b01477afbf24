# SPDX-License-Identifier: BSD-3-Clause
# A googletest log in, one line out: where the first assertion failed and
# what it printed (up to five lines), and how many more failures followed.
# Used by contrib/ucx-testsuite.sh.
/: Failure$/ {
    nfail++
    if (nfail == 1) {
        where = $0
        sub(/.*\//, "", where)
        n = 5
    } else {
        n = 0
    }
    next
}
/^\[/ { n = 0 }
n > 0 && NF {
    gsub(/^ +| +$/, "")
    what = what " | " $0
    n--
}
END {
    if (nfail > 1)
        what = what " (+" nfail - 1 " more)"
    print where what
}
