#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Test driver: runs one compatibility test against our libucm and Debian's
# stock UCX 1.13.  Usage: run-compat.sh TEST  (from 'make check').
set -u
test=$1
ours=$(cd "$(dirname "$0")/../../src/ucm/.libs" 2>/dev/null && pwd)/libucm.so.0
[ -n "${BUILD_UCM_DIR:-}" ] && ours=$BUILD_UCM_DIR/libucm.so.0
ours_rcache=$(cd "$(dirname "$0")/../../src/ucs/.libs" 2>/dev/null && pwd)/libucm_rcache.so.0
[ -n "${BUILD_UCM_DIR:-}" ] && ours_rcache=$BUILD_UCM_DIR/../../ucs/.libs/libucm_rcache.so.0
[ -n "${BUILD_UCS_DIR:-}" ] && ours_rcache=$BUILD_UCS_DIR/libucm_rcache.so.0
stock=${STOCK_UCM:-/usr/lib/x86_64-linux-gnu/libucm.so.0}
if [ ! -e "$stock" ]; then
    echo "SKIP: stock UCX libucm not installed at $stock (Debian package libucx0)"
    exit 77
fi
# compat_stock_abi: the test's output (stdout and stderr, file $1) and the
# UCM_RCACHE_STATS=y lines in it: one per cache the test names (EXPECT-STATS),
# the userfaultfd line, and counts the test knows.  Returns 1 on a mismatch.
check_abi_stats() {
    local out=$1 name line bad=0 gets
    for name in $(sed -n 's/^EXPECT-STATS //p' "$out"); do
        if ! grep -Eq "^\[ucm_rcache\] pid [0-9]+: rcache '$name' \((destroyed|live)\): gets " "$out"; then
            echo "FAIL: no UCM_RCACHE_STATS line for cache '$name'"; bad=1
        fi
    done
    grep -Eq "^\[ucm_rcache\] pid [0-9]+: userfaultfd " "$out" ||
        { echo "FAIL: no UCM_RCACHE_STATS userfaultfd line"; bad=1; }
    # the threads' cache: every get counted, every registration undone
    line=$(grep "rcache 'abi-threads' (destroyed)" "$out")
    gets=$(sed -n 's/^EXPECT-GETS abi-threads //p' "$out")
    if [ -n "$line" ] && [ -n "$gets" ]; then
        echo "$line" | grep -q ": gets $gets " ||
            { echo "FAIL: abi-threads: stats do not count $gets gets"; bad=1; }
        [ "$(echo "$line" | sed 's/.* regs \([0-9]*\) .*/\1/')" = \
          "$(echo "$line" | sed 's/.* deregs \([0-9]*\) .*/\1/')" ] ||
            { echo "FAIL: abi-threads: regs != deregs in the stats"; bad=1; }
    fi
    # max_regions 4: the stats saw the evictions the test's oracle saw
    grep "rcache 'abi-lru4' (destroyed)" "$out" | grep -q " evictions [1-9]" ||
        { echo "FAIL: abi-lru4: no evictions in the stats"; bad=1; }
    return $bad
}

# compat_stock_abi, once: preloaded libucm + libucm_rcache, prefix = a
# command to run it under (valgrind); extra environment in "$@" before it.
run_abi() {
    local out r
    out=$(mktemp /tmp/compat_stock_abi.XXXXXX)
    # a hang is a failure too (timeout: 124)
    timeout -k 5 120 env "$@" UCM_RCACHE_STATS=y \
        LD_PRELOAD="$ours:$ours_rcache" $abi_prefix "$test" >"$out" 2>&1
    r=$?
    [ $r -eq 124 ] && echo "FAIL: $test did not finish in 120 s"
    cat "$out"
    if [ $r -eq 0 ]; then
        check_abi_stats "$out" || r=1
    fi
    rm -f "$out"
    return $r
}

# compat_ucm_exports: every ucm symbol that Debian's UCX libraries and
# modules import must be exported by our libucm.  Returns 1 if one is not.
check_stock_imports() {
    local dir lib sym defined bad=0 n=0
    if ! command -v nm >/dev/null 2>&1; then
        echo "--- import check skipped: nm (binutils) not installed"
        return 0
    fi
    dir=$(dirname "$stock")
    defined=$(nm -D --defined-only "$ours" | awk '{print $NF}')
    for lib in "$dir"/libucs.so.0 "$dir"/libuct*.so.0 "$dir"/libucp.so.0 \
               "$dir"/ucx/*.so.0; do
        [ -e "$lib" ] || continue
        for sym in $(nm -D --undefined-only "$lib" | awk '{print $NF}' |
                     sed 's/@.*//' | grep -E '^_*ucm_'); do
            n=$((n + 1))
            if ! echo "$defined" | grep -qx "$sym"; then
                echo "FAIL: $lib imports $sym; $ours does not export it"
                bad=1
            fi
        done
    done
    [ $bad -eq 0 ] && echo "--- all $n libucm imports of $dir's UCX libraries are exported"
    return $bad
}

# compat_stock_rcache with libucm_rcache.so.0 preloaded as well: which
# release the library decides it runs under, checked by its one line
# (rcache_stock_abi.c).  $1: expected "served" or "aside" or "unknown";
# extra environment in "$@" after it.  Returns 1 on a mismatch.
run_rcache_release() {
    local want=$1 out r lines
    shift
    out=$(mktemp /tmp/compat_stock_rcache.XXXXXX)
    timeout -k 5 120 env "$@" UCM_RCACHE_STATS=y \
        LD_PRELOAD="$ours:${fake_ucp:+$fake_ucp:}$ours_rcache" "$test" \
        >"$out" 2>&1
    r=$?
    cat "$out"
    lines=$(grep -c "registration caches left to UCX's libucs\|this library does not know\|release cannot be told" "$out")
    case $want in
    served)
        [ "$lines" -eq 0 ] && grep -q "rcache 'compat' (destroyed)" "$out" ||
            { echo "FAIL: expected this cache to serve (stats line, no step-aside line)"; r=1; } ;;
    aside)
        [ "$lines" -eq 1 ] && grep -q "registration caches left to UCX's libucs" "$out" ||
            { echo "FAIL: expected one step-aside line, got $lines"; r=1; } ;;
    unknown)
        [ "$lines" -eq 1 ] && grep -q "UCX 1.99.0 .*does not know" "$out" ||
            { echo "FAIL: expected one line naming UCX 1.99.0, got $lines"; r=1; } ;;
    esac
    grep -q "is not a power of 2" "$out" &&
        { echo "FAIL: the cache read another release's params"; r=1; }
    rm -f "$out"
    return $r
}

# UCP's own caches (ucp_rcache, 1.17+) through a real libucp: ucx_info
# creates a UCP context.  $1: "clean" (no rcache error line) or "broken"
# (the negative control: the 1.13 path forced, the params misread).
run_ucp_context() {
    local want=$1 out
    shift
    out=$(timeout -k 5 60 env "$@" UCX_TLS=tcp,posix,self \
          LD_PRELOAD="$ours:$ours_rcache" ucx_info -e -u t 2>&1)
    echo "$out" | grep -i "rcache" | sed 's/^/    ucx_info: /'
    if [ "$want" = clean ]; then
        ! echo "$out" | grep -q "\[ucs rcache\] error" ||
            { echo "FAIL: ucx_info: an rcache error line"; return 1; }
    else
        echo "$out" | grep -q "is not a power of 2" ||
            { echo "FAIL: negative control: 1.13's path under this UCX did not misread"; return 1; }
    fi
    return 0
}

rc=0
for mode in bistro reloc; do
    echo "--- $test, UCX_MEM_MMAP_HOOK_MODE=$mode"
    case "$test" in
    *compat_stock_rcache)
        UCX_MEM_MMAP_HOOK_MODE=$mode LD_PRELOAD=$ours "$test" || rc=1 ;;
    *compat_stock_filewatch)
        # a hang is a failure (the test's own alarm, and timeout: 124)
        UCX_MEM_FILE_WATCH=y UCX_MEM_MMAP_HOOK_MODE=$mode LD_PRELOAD=$ours \
            timeout -k 5 90 "$test"
        r=$?; [ $r -eq 77 ] && exit 77; [ $r -eq 0 ] || rc=1 ;;
    *compat_stock_abi)
        if "$test" --ucx-api | grep -q "1.17+"; then
            echo "SKIP: built against UCX 1.17+ headers: libucm_rcache.so.0 hands those releases' calls to UCX's libucs (compat_stock_rcache checks that); this test drives the 1.13 layouts it serves"
            exit 77
        fi
        if [ ! -e "$ours_rcache" ]; then
            echo "FAIL: $ours_rcache not built"; exit 1
        fi
        abi_prefix= run_abi UCX_MEM_MMAP_HOOK_MODE=$mode || rc=1 ;;
    *compat_ucm_exports)
        UCX_MEM_MMAP_HOOK_MODE=$mode LD_BIND_NOW=1 \
            LD_LIBRARY_PATH="$(dirname "$ours")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$test" || rc=1 ;;
    *compat_two_libucm)
        UCX_MEM_MMAP_HOOK_MODE=$mode "$test" "$ours" "$stock"
        r=$?; [ $r -eq 77 ] && exit 77; [ $r -eq 0 ] || rc=1
        echo "--- $test ours-first, UCX_MEM_MMAP_HOOK_MODE=$mode"
        UCX_MEM_MMAP_HOOK_MODE=$mode "$test" "$ours" "$stock" ours-first ||
            rc=1 ;;
    esac
done

# compat_stock_abi under valgrind (memory errors exit 99), once, fewer thread
# iterations: userfaultfd is not available there (the monitor falls back to
# the hooks, the raw-munmap sub-case says it is skipped)
case "$test" in
*compat_stock_rcache)
    if [ ! -e "$ours_rcache" ]; then
        echo "FAIL: $ours_rcache not built"; exit 1
    fi
    release=$("$test" --ucx-api)
    echo "--- $test with libucm_rcache.so.0 preloaded, UCX $release"
    case $release in
    1.13*) run_rcache_release served || rc=1 ;;
    *)     run_rcache_release aside || rc=1 ;;
    esac
    # the table's rows for the newest releases (named, as no such UCX is
    # installed here): upstream 1.22, forky's 1.23
    for named in 1.22.0 1.23.0; do
        echo "--- $test with UCM_RCACHE_UCX=$named"
        run_rcache_release aside UCM_RCACHE_UCX=$named || rc=1
    done
    # a release the table does not know: a libucp that says 1.99.0
    tmp=$(mktemp -d /tmp/compat_fake_ucp.XXXXXX)
    if echo 'void ucp_get_version(unsigned *a, unsigned *b, unsigned *c)
{ *a = 1; *b = 99; *c = 0; }' | ${CC:-cc} -shared -fPIC -x c - -o "$tmp/libucp.so.0" 2>/dev/null; then
        echo "--- $test with a libucp that reports UCX 1.99.0"
        fake_ucp=$tmp/libucp.so.0 run_rcache_release unknown || rc=1
    else
        echo "--- unknown release: skipped: no C compiler (${CC:-cc}) to build the fake libucp"
    fi
    rm -rf "$tmp"
    if ! command -v ucx_info >/dev/null 2>&1; then
        echo "--- UCP context: skipped: ucx_info (ucx-utils) not installed"
    else
        echo "--- UCP context (ucx_info -e -u t) with libucm_rcache.so.0"
        run_ucp_context clean || rc=1
        case $release in
        1.13*) ;;
        *) echo "--- negative control: UCM_RCACHE_UCX=1.13 under UCX $release"
           run_ucp_context broken UCM_RCACHE_UCX=1.13 || rc=1 ;;
        esac
    fi ;;
*compat_ucm_exports)
    check_stock_imports || rc=1 ;;
*compat_stock_abi)
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "--- $test under valgrind: skipped: valgrind not installed"
    else
        echo "--- $test under valgrind, UCX_MEM_MMAP_HOOK_MODE=reloc"
        abi_prefix="valgrind -q --error-exitcode=99 --leak-check=no"
        run_abi UCX_MEM_MMAP_HOOK_MODE=reloc UCX_MEM_UFFD=try \
                COMPAT_ABI_ITERS=20000
        r=$?
        if [ $r -eq 99 ]; then
            echo "FAIL: valgrind reported memory errors"; rc=1
        elif [ $r -ne 0 ]; then
            echo "FAIL: under valgrind (exit status $r)"; rc=1
        fi
    fi
    # opt-in: against a sanitizer build (contrib/build.sh DIR
    # --enable-sanitizers) with libasan preloaded first; leak checking off:
    # a cache destroyed with a held region is leaked on purpose (case 5)
    if [ -n "${COMPAT_SAN_BUILD:-}" ]; then
        asan=$(${CC:-gcc} -print-file-name=libasan.so)
        echo "--- $test with ASan: $COMPAT_SAN_BUILD, $asan"
        abi_prefix=
        ours=$COMPAT_SAN_BUILD/src/ucm/.libs/libucm.so.0
        ours_rcache=$COMPAT_SAN_BUILD/src/ucs/.libs/libucm_rcache.so.0
        ours="$asan:$ours" run_abi ASAN_OPTIONS=detect_leaks=0 || rc=1
    fi ;;
esac
exit $rc
