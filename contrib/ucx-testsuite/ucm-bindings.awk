# SPDX-License-Identifier: BSD-3-Clause
# LD_DEBUG=bindings output in; checks that every ucm_* symbol that libucs
# or the gtest binary looks up binds to the libucm WANT (the path the
# loader printed), and that each of the two binds at least one.  Prints one
# line saying what is wrong and exits 1, or prints nothing and exits 0.
#   awk -v want=PATH -f ucm-bindings.awk
# Used by contrib/ucx-testsuite.sh.
/binding file .* to .*: normal symbol `ucm_/ {
    from = $0
    sub(/.*binding file /, "", from)
    sub(/ \[[0-9]+\] to .*/, "", from)
    to = $0
    sub(/.* \[[0-9]+\] to /, "", to)
    sub(/ \[[0-9]+\]: .*/, "", to)
    sym = $0
    sub(/.*normal symbol `/, "", sym)
    sub(/'.*/, "", sym)
    if (from ~ /libucs\.so[.0-9]*$/)
        who = "libucs"
    else if (from ~ /(^|\/)gtest$/)
        who = "gtest"
    else
        next
    if (to ~ /libucm\.so[.0-9]*$/) {
        if (to != want && bad == "")
            bad = who " binds " sym " to " to ", not to " want
        else if (to == want)
            seen[who]++
    }
}
END {
    if (bad == "" && !("libucs" in seen))
        bad = "libucs binds no ucm_* symbol to " want
    if (bad == "" && !("gtest" in seen))
        bad = "gtest binds no ucm_* symbol to " want
    if (bad != "") {
        print bad
        exit 1
    }
}
