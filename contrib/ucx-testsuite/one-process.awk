# SPDX-License-Identifier: BSD-3-Clause
# The log of one googletest process that ran many cases in, one line per
# expected case out: "CASE<TAB>RESULT<TAB>DETAIL", RESULT passed, skipped,
# failed, died (the process ended inside it) or notrun.
#   awk -v rc=EXIT_STATUS -f one-process.awk CASES_FILE LOG
# CASES_FILE: one full case name a line.  Used by contrib/ucx-testsuite.sh.
FNR == NR {
    order[++ncases] = $1
    next
}
/^\[ RUN      \] / {
    current = $4
    n = 0
    skipped = 0
    skip_why = ""
    detail = ""
    next
}
current != "" && /^\[ *(SKIP|SKIPPED) *\]/ {
    skipped = 1
    if (skip_why == "") {
        skip_why = $0
        sub(/^\[[^]]*\] */, "", skip_why)
    }
    next
}
current != "" && /: Failure$/ {
    n = 0
    if (detail == "") {
        detail = $0
        sub(/.*\//, "", detail)
        n = 5
    }
    next
}
/^\[/ { n = 0 }
current != "" && n > 0 && NF {
    line = $0
    gsub(/^ +| +$/, "", line)
    detail = detail " | " line
    n--
    next
}
current != "" && /^\[       OK \] / {
    result[current] = skipped ? "skipped" : "passed"
    why[current] = skipped ? skip_why : ""
    current = ""
    next
}
current != "" && /^\[  FAILED  \] / {
    result[current] = "failed"
    why[current] = detail
    current = ""
    next
}
END {
    if (current != "") {
        result[current] = "died"
        why[current] = "the process ended in this case (exit " rc ")"
    }
    for (i = 1; i <= ncases; i++) {
        c = order[i]
        if (c in result)
            printf "%s\t%s\t%s\n", c, result[c], why[c]
        else
            printf "%s\tnotrun\t%s\n", c,
                (current != "" ? "after the process died" : "not reached")
    }
}
