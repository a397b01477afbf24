#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The tools in a degraded environment that needs no privilege to make:
# each prints one line per degraded thing that matters to it, exactly once
# ('# degraded: ' on stderr; ucm_info -e under its 'Degraded by this
# environment' heading), and its exit status and rows stay as they are.
#
#   test/tools/degraded.sh [BUILD_DIR]      (default: build)
#
# Settings: user nobody (setpriv, when run as root; as another user, that
# user) hides page frame numbers in /proc/self/pagemap and has a finite
# RLIMIT_MEMLOCK without CAP_IPC_LOCK; UCX_MEM_UFFD=no, or valgrind, keeps
# the userfaultfd monitor off; valgrind --trace-children=yes slows the hook
# benchmark's workers; this machine's lack of an RDMA device (or a small
# ulimit -l) degrades uct_perftest.  A case whose prerequisite is missing
# says why it is skipped.  Exit status: 0 all ran cases passed, 1 not.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
b=$(cd "${1:-$top/build}" && pwd)
tools=$b/src/tools
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
failed=0

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
skip() { echo "SKIP: $*"; }

# Runs "$@" as an unprivileged user: nobody when root, else ourselves.
unpriv() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
    else
        "$@"
    fi
}
if [ "$(id -u)" = 0 ] && ! command -v setpriv >/dev/null; then
    nopriv_why="setpriv not installed (util-linux)"
elif ! unpriv test -x "$tools/ucm_info"; then
    nopriv_why="user nobody cannot reach $tools (a directory above it is not world-searchable)"
fi

# expect_once NAME FILE PATTERN
expect_once() {
    local n
    n=$(awk -v p="$3" 'index($0, p) == 1 { n++ } END { print n + 0 }' "$2")
    if [ "$n" = 1 ]; then
        pass "$1: '$3' once"
    else
        fail "$1: '$3' $n times, expected once"
        sed 's/^/    /' "$2" | head -20
    fi
}

# expect_none NAME FILE: no degraded line at all
expect_none() {
    if grep -q '^# degraded: ' "$2"; then
        fail "$1: unexpected degraded line(s):"
        grep '^# degraded: ' "$2" | sed 's/^/    /'
    else
        pass "$1: no degraded line"
    fi
}

# expect_rc NAME GOT WANT
expect_rc() {
    if [ "$2" = "$3" ]; then
        pass "$1: exit status $2"
    else
        fail "$1: exit status $2, expected $3"
    fi
}

# expect_row NAME FILE TEXT: a row of the normal output is there
expect_row() {
    if grep -q -F -- "$3" "$2"; then
        pass "$1: row '$3'"
    else
        fail "$1: row '$3' missing from stdout"
    fi
}

# ---------------------------------------------------------------- ucm_info
# As nobody, with a finite locked-memory limit and the monitor off: the
# three lines under the heading, each once; exit status 0 (information).
if [ -n "${nopriv_why:-}" ]; then
    skip "ucm_info as nobody: $nopriv_why"
else
    (ulimit -l 64 && UCX_MEM_UFFD=no unpriv "$tools/ucm_info" -e) \
        >"$work/info.out" 2>"$work/info.err"
    expect_rc "ucm_info -e (nobody)" $? 0
    expect_once "ucm_info -e (nobody)" "$work/info.out" "#   memlock: RLIMIT_MEMLOCK is 64 KiB without CAP_IPC_LOCK"
    expect_once "ucm_info -e (nobody)" "$work/info.out" "#   pagemap: page frame numbers are hidden"
    expect_once "ucm_info -e (nobody)" "$work/info.out" "#   userfaultfd: disabled by UCX_MEM_UFFD=no"
    expect_row "ucm_info -e (nobody)" "$work/info.out" "  VM_UNMAPPED  ok"
    if grep -q '^#   nothing' "$work/info.out"; then
        fail "ucm_info -e (nobody): '#   nothing' beside degraded lines"
    fi
fi

# ---------------------------------------------------------- ucm_bench_uffd
# Under valgrind the monitor cannot start: the reason once on stderr, the
# baseline row on stdout, exit status 0.
if ! command -v valgrind >/dev/null; then
    skip "ucm_bench_uffd under valgrind: valgrind not installed"
else
    "$b/libtool" --mode=execute valgrind -q "$tools/ucm_bench_uffd" --quick \
        >"$work/uffd.out" 2>"$work/uffd.err"
    expect_rc "ucm_bench_uffd (valgrind)" $? 0
    expect_once "ucm_bench_uffd (valgrind)" "$work/uffd.err" "# degraded: userfaultfd: not supported under valgrind: "
    expect_row "ucm_bench_uffd (valgrind)" "$work/uffd.out" "munmap, no monitor (ns)"
fi

# --------------------------------------------------------- ucs_bench_rcache
# As nobody with the monitor off: the monitor's line once, no pagemap line
# (UCX_RCACHE_CHECK_PFN is off, so hidden frames do not matter) and no
# memlock line (its registration is fake).
if [ -n "${nopriv_why:-}" ]; then
    skip "ucs_bench_rcache as nobody: $nopriv_why"
else
    (unset UCX_RCACHE_CHECK_PFN
     UCX_MEM_UFFD=no unpriv "$tools/ucs_bench_rcache" --quick) \
        >"$work/rcache.out" 2>"$work/rcache.err"
    expect_rc "ucs_bench_rcache (nobody, UCX_MEM_UFFD=no)" $? 0
    expect_once "ucs_bench_rcache (nobody, UCX_MEM_UFFD=no)" "$work/rcache.err" "# degraded: userfaultfd: disabled by UCX_MEM_UFFD=no: "
    if [ "$(grep -c '^# degraded: ' "$work/rcache.err")" = 1 ]; then
        pass "ucs_bench_rcache (nobody, UCX_MEM_UFFD=no): nothing else degraded"
    else
        fail "ucs_bench_rcache (nobody, UCX_MEM_UFFD=no): other degraded lines"
    fi
    expect_row "ucs_bench_rcache (nobody, UCX_MEM_UFFD=no)" "$work/rcache.out" "hit get+put, 1 region (ns)"
fi

# ---------------------------------------------------------- ucm_bench_hooks
# As nobody nothing that matters to it is degraded: no line.  With its
# workers under valgrind: one valgrind line (every worker reports it).
if [ -x "$tools/ucm_bench_hooks" ]; then
    if [ -n "${nopriv_why:-}" ]; then
        skip "ucm_bench_hooks as nobody: $nopriv_why"
    else
        unpriv "$tools/ucm_bench_hooks" --quick >"$work/hooks.out" 2>"$work/hooks.err"
        expect_rc "ucm_bench_hooks (nobody)" $? 0
        expect_none "ucm_bench_hooks (nobody)" "$work/hooks.err"
    fi
    if ! command -v valgrind >/dev/null; then
        skip "ucm_bench_hooks under valgrind: valgrind not installed"
    else
        "$b/libtool" --mode=execute valgrind -q --trace-children=yes \
            "$tools/ucm_bench_hooks" --quick >"$work/hooksvg.out" 2>"$work/hooksvg.err"
        expect_rc "ucm_bench_hooks (valgrind)" $? 0
        expect_once "ucm_bench_hooks (valgrind)" "$work/hooksvg.err" "# degraded: valgrind: the workers run under valgrind"
        expect_row "ucm_bench_hooks (valgrind)" "$work/hooksvg.out" "first install (us)"
    fi
else
    skip "ucm_bench_hooks: not built"
fi

# ------------------------------------------------------------- uct_perftest
# Server and client on this host, as nobody with 64 KiB of locked memory
# and a 1 MiB message: each side says once that RLIMIT_MEMLOCK is below
# what it pins, and, without an RDMA device, that there is none; without a
# device both exit 1 as they do undegraded, with the same other lines.
perftest=$b/src/tools/perf/uct_perftest
run_pair() { # OUTPREFIX PORT WRAPPER...: server and client, status in files
    local out=$1 port=$2; shift 2
    ("$@" "$perftest" -p "$port" >"$out.srv" 2>&1; echo $? >"$out.srv.rc") &
    local spid=$!
    sleep 0.5
    "$@" "$perftest" 127.0.0.1 -p "$port" -t put_bw -d rxe0:1 -s 1048576 \
        -n 10 -w 1 >"$out.cli" 2>&1
    echo $? >"$out.cli.rc"
    wait $spid
}
limited() { (ulimit -l 64 && unpriv "$@"); }
if [ ! -x "$perftest" ]; then
    skip "uct_perftest: not built (no libibverbs)"
elif [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    skip "uct_perftest: this host has an RDMA device (contrib/vm-tests/20-perftest.sh covers runs on one)"
elif [ -n "${nopriv_why:-}" ]; then
    skip "uct_perftest as nobody: $nopriv_why"
else
    port=$((20000 + RANDOM % 20000))
    run_pair "$work/pt" "$port" env
    run_pair "$work/ptd" "$((port + 1))" limited
    for side in srv cli; do
        name="uct_perftest $side (nobody, ulimit -l 64, no device)"
        expect_rc "$name" "$(cat "$work/ptd.$side.rc")" "$(cat "$work/pt.$side.rc")"
        expect_once "$name" "$work/ptd.$side" "# degraded: rdma: no RDMA device"
        expect_once "$name" "$work/ptd.$side" "# degraded: memlock: RLIMIT_MEMLOCK is 64 KiB without CAP_IPC_LOCK, this run pins about 2048 KiB: "
        # the rest as undegraded (the server's client port differs)
        if diff <(grep -v '^# degraded: ' "$work/ptd.$side" | grep -v '^Accepted connection') \
                <(grep -v '^# degraded: ' "$work/pt.$side" | grep -v '^Accepted connection') >/dev/null; then
            pass "$name: other output as undegraded"
        else
            fail "$name: other output differs from the undegraded run"
            diff <(grep -v '^# degraded: ' "$work/ptd.$side") "$work/pt.$side" | head | sed 's/^/    /'
        fi
    done
fi

[ $failed -eq 0 ] && echo "degraded tools: all passed" || echo "degraded tools: FAILED"
exit $failed
