#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own googletest cases of libucm (malloc_hook*, memtype_hooks), of
# the registration cache (test_rcache*) and of the memory-type cache
# (test_memtype_cache*), of release 1.13.1 (Debian 12), 1.18.1 (Debian 13)
# or 1.22.0 (upstream), run in both hook modes first on the libucm of a
# fresh UCX build of that release (the baseline), then with only our
# libucm.so.0 swapped in (UCX's libucs stays its own): through
# LD_LIBRARY_PATH where UCX's gtest binary has a RUNPATH (1.13), through
# LD_PRELOAD where it has an RPATH to its own libucm (1.18 on, which
# LD_LIBRARY_PATH cannot override); either way the loader is checked to
# initialise our libucm and no other, and UCX's libucs to bind to it.
# Each case runs in a process of its own ("bistro", "reloc"), and all
# of them once more in one process in UCX's order, as UCX's CI runs them
# ("bistro-1proc", "reloc-1proc": some cases count on what an earlier one
# installed).  Prints per run what passed, failed, died or was skipped on
# each, lists every case that differs, and fails when a case that passes on
# UCX's libucm does not pass on ours.
#
#   contrib/ucx-testsuite.sh [options]
#
#   --release VER    the UCX release: 1.13.1 (default), 1.18.1, 1.22.0, or
#                    another 1.13 or 1.18+ release with --src; with --src,
#                    the tree must be that release (default: the release
#                    the tree's configure.ac names)
#   --src DIR|FILE   UCX source tree, or a tar archive of one (as git
#                    archive makes it).  Default for 1.13.1: Debian's
#                    source package ucx=1.13.1-1 through apt-get source,
#                    with deb-src lines derived from the system's apt
#                    sources, in a private apt directory; the system's apt
#                    state is not touched (contrib/ucx-source.sh).  Default
#                    for another release: ucx-VER.tar.xz in $UCX_SRC_DIR,
#                    else in ../shared/ucx-src/ beside the checkout
#   --ucm PATH       our libucm.so.0 (default: build/src/ucm/.libs/libucm.so.0)
#   --workdir DIR    source, UCX build and logs go there and stay; a rerun
#                    with the same DIR and source reuses the build (another
#                    release or source rebuilds; give each release a DIR of
#                    its own to keep them all) (default: a new directory
#                    under $TMPDIR, removed at exit unless --keep)
#   --keep           keep the default work directory (its path is printed)
#   --jobs N         make -jN for the UCX build; 2 or more also runs UCX's
#                    libucm and ours side by side (default 2)
#   --filter PAT     gtest filter of the cases (default: every case above)
#   --quick          only the registration-cache cases (test_rcache*)
#   --modes LIST     hook modes, space separated (default "bistro reloc")
#   --timeout S      per case, in seconds (default 120; 5 times that for
#                    the one-process runs)
#   --retries N      rerun a case where ours is worse up to N times (the
#                    whole process for a one-process run); a pass on a
#                    rerun is reported as FLAKY and still fails the run
#                    unless a known-failures entry whose reason starts
#                    with "timing:" names it (default 1)
#   --known-failures FILE
#                    lines "RELEASE MODE CASE REASON" (RELEASE such as
#                    1.18.1, or a pattern with '*' such as 1.1* or *; MODE
#                    bistro, reloc, bistro-1proc, reloc-1proc, or a pattern
#                    such as bistro* or *): those differences are reported
#                    but do not fail the run
#
# Exit status: 0 no regression; 1 a case that passes on UCX's libucm does
# not pass on ours (and is not a known failure); 2 bad usage; 3 the UCX
# build failed or the library swap did not take; 77 a prerequisite is
# missing (no source tree and apt-get source failed, no release archive,
# no autoreconf, no libucm.so.0 of ours), with the reason on stderr.
#
# Needs: apt-get and dpkg-source (or tar and patch) for Debian's source,
# autoconf, automake, libtool, g++, make, readelf.  Runs go one at a time (several speed and
# mapping checks of UCX's suite assume an idle machine).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# UCX_VERSION (Debian's, 1.13.1), ucx_source_prepare_release,
# ucx_source_version
# shellcheck source-path=SCRIPTDIR source=ucx-source.sh
. "$(dirname "$0")/ucx-source.sh"

readonly DEFAULT_FILTER='malloc_hook*:*memtype_hooks*:test_rcache*:*test_memtype_cache*'
readonly QUICK_FILTER='test_rcache*'

# Cases UCX's own CI (contrib/test_jenkins.sh) runs once more in a process of
# their own with glibc's malloc thresholds set; without them the first one
# only skips.  "CASE|VARIABLES".
readonly VARIANTS=(
    "malloc_hook_cplusplus.mallopt|UCX_IB_RCACHE=n MALLOC_TRIM_THRESHOLD_=-1 MALLOC_MMAP_THRESHOLD_=-1"
    "malloc_hook_cplusplus.mmap_ptrs|MALLOC_MMAP_THRESHOLD_=16384"
)

src_dir=""
release=""
ucm_lib="$top/build/src/ucm/.libs/libucm.so.0"
workdir=""
keep=0
jobs=2
filter=$DEFAULT_FILTER
modes="bistro reloc"
case_timeout=120
retries=1
known_file=""

usage() {
    sed -n '/^#   contrib/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --src) src_dir=${2:?}; shift ;;
    --release) release=${2:?}; shift ;;
    --ucm) ucm_lib=${2:?}; shift ;;
    --workdir) workdir=${2:?}; shift ;;
    --keep) keep=1 ;;
    --jobs) jobs=${2:?}; shift ;;
    --filter) filter=${2:?}; shift ;;
    --quick) filter=$QUICK_FILTER ;;
    --modes) modes=${2:?}; shift ;;
    --timeout) case_timeout=${2:?}; shift ;;
    --retries) retries=${2:?}; shift ;;
    --known-failures) known_file=${2:?}; shift ;;
    -h | --help) usage ;;
    *) echo "unknown option $1" >&2; usage ;;
    esac
    shift
done

skip() {
    echo "ucx-testsuite: skipped: $*" >&2
    exit 77
}
die() {
    echo "ucx-testsuite: error: $*" >&2
    exit 3
}
log() { echo "--- $*"; }

for tool in autoreconf automake libtoolize g++ make timeout readelf; do
    command -v $tool >/dev/null || skip "$tool not installed (contrib/deps.sh installs it)"
done
[ -f "$ucm_lib" ] || skip "our libucm not found at $ucm_lib (build first, or --ucm PATH)"
[ -z "$known_file" ] || [ -f "$known_file" ] || die "no such file: $known_file"
if [ -n "$src_dir" ]; then
    [ -f "$src_dir/configure.ac" ] || [ -f "$src_dir" ] ||
        die "--src $src_dir: neither a tree with configure.ac nor a file"
elif [ -n "$release" ] && [ "$release" != "$UCX_VERSION" ]; then
    # An upstream release archive, where the checkout's neighbours keep it.
    for d in ${UCX_SRC_DIR:+"$UCX_SRC_DIR"} "$top/../shared/ucx-src"; do
        if [ -f "$d/ucx-$release.tar.xz" ]; then
            src_dir=$d/ucx-$release.tar.xz
            break
        fi
    done
    [ -n "$src_dir" ] || skip "no ucx-$release.tar.xz in ${UCX_SRC_DIR:+$UCX_SRC_DIR or }$top/../shared/ucx-src (give --src or UCX_SRC_DIR)"
fi

if [ -n "$workdir" ]; then
    mkdir -p "$workdir"
    workdir=$(cd "$workdir" && pwd)
else
    workdir=$(mktemp -d "${TMPDIR:-/tmp}/ucx-testsuite.XXXXXX")
    if [ $keep -eq 0 ]; then
        trap 'rm -rf "$workdir"' EXIT
    else
        echo "ucx-testsuite: work directory $workdir (kept)"
    fi
fi
t_start=$SECONDS

# --- 1. the source ------------------------------------------------------

ucx_src=$workdir/src
# With --src and no --release, any release the tree is; without --src,
# Debian's 1.13.1.
[ -n "$src_dir" ] || release=${release:-$UCX_VERSION}
want=$release
ucx_source_prepare_release "$workdir" "$src_dir" "$release" "$workdir/build" || case $? in
    77) skip "no --src, and $UCX_SOURCE_ERROR" ;;
    *) die "$UCX_SOURCE_ERROR" ;;
    esac
release=$(ucx_source_version "$ucx_src")
[ -z "$want" ] || [ "$want" = "$release" ] || die "the tree in $ucx_src is UCX $release, not $want"
t_src=$SECONDS

# --- 2. UCX's libraries and the selected part of its gtest ----------------

bld=$workdir/build
gt=$bld/test/gtest
# UCX's gtest objects that the selected cases need: the harness (main,
# test, helpers, memory buffers; from 1.14 on also the common test base and
# the watchdog) and the three case files.  The rest of the suite (uct, ucp,
# perf) is left out, and so are libuct/libucp.  Make variables of UCX's
# test/gtest/Makefile, replaced on its command line.
GTEST_OBJS=(common/gtest-main.o common/gtest-test.o
    common/gtest-test_helpers.o common/gtest-mem_buffer.o
    ucm/gtest-malloc_hook.o ucs/gtest-test_rcache.o
    ucs/gtest-test_memtype_cache.o)
case $release in
1.13.*) ;;
1.1[4-9].* | 1.[2-9][0-9].*)
    GTEST_OBJS+=(common/gtest-test_gtest_cmn.o common/gtest-test_watchdog.o) ;;
*) die "UCX $release: no build recipe for its gtest (1.13 and 1.14 on are known)" ;;
esac
readonly GTEST_OBJS
# shellcheck disable=SC2016 # expanded by make
readonly GTEST_LDADD=('$(top_builddir)/src/ucs/libucs.la'
    '$(top_builddir)/src/ucm/libucm.la' common/googletest/libgtest.la
    '$(OPENMP_CFLAGS)')

build_ucx() {
    mkdir -p "$bld"
    if [ ! -f "$bld/config.status" ]; then
        log "configure (UCX $release, no GPU, no verbs)"
        (cd "$bld" && "$ucx_src/configure" --prefix="$workdir/prefix" \
            --enable-gtest --enable-mt --disable-doxygen-doc --disable-examples \
            --without-cuda --without-rocm --without-verbs --without-rdmacm \
            --without-knem --without-xpmem --without-ugni --without-java \
            --without-go --without-fuse3 --without-gdrcopy --without-mpi \
            --with-bfd=no) >"$workdir/configure.log" 2>&1 ||
            die "UCX configure failed (see $workdir/configure.log)"
    fi
    # UCX's sources predate the compiler's newest warnings (its gtest
    # compares freed pointers on purpose): they stay warnings here.
    local mk=(make -j"$jobs" CFLAGS=-Wno-error CXXFLAGS=-Wno-error)
    log "make libucm, libucs; UCX gtest (UCM, rcache, memtype cases only)"
    {
        "${mk[@]}" -C "$bld/src/ucm" &&
            "${mk[@]}" -C "$bld/src/ucs" &&
            "${mk[@]}" -C "$gt/common/googletest" &&
            "${mk[@]}" -C "$gt/ucm/test_dlopen" &&
            "${mk[@]}" -C "$gt" gtest gtest_OBJECTS="${GTEST_OBJS[*]}" \
                gtest_DEPENDENCIES= gtest_LDADD="${GTEST_LDADD[*]}"
    } >"$workdir/make.log" 2>&1 || {
        grep -m5 -E 'error|Error' "$workdir/make.log" >&2 || true
        die "UCX build failed (see $workdir/make.log)"
    }
}
build_ucx
t_build=$SECONDS

# --- 3. the cases, one process each ---------------------------------------

ours_dir=$workdir/ours
rm -rf "$ours_dir" && mkdir -p "$ours_dir"
cp -L "$ucm_lib" "$ours_dir/libucm.so.0"
ucx_ucm=$(readlink -f "$bld/src/ucm/.libs/libucm.so.0")

# How ours replaces UCX's: a RUNPATH in UCX's gtest binary (1.13) yields to
# LD_LIBRARY_PATH; an RPATH (1.18 on links it with --disable-new-dtags) is
# searched first, so there ours goes in by LD_PRELOAD, and the loader then
# takes it for every later request of the name libucm.so.0.
if readelf -d "$gt/gtest" | grep -q '(RPATH)'; then
    swap=LD_PRELOAD
    swap_value=$ours_dir/libucm.so.0
else
    swap=LD_LIBRARY_PATH
    swap_value=$ours_dir
fi

# Runs a command in the environment of a run on LIB (ucx or ours): nothing
# inherited that could load another libucm; errors end the process with a
# backtrace (UCX's default for its gtest, "freeze", would wait for the
# timeout).  More VAR=VALUE may lead the command.
with_env() {
    local lib=$1 e
    shift
    e=(env -u LD_PRELOAD -u LD_LIBRARY_PATH UCX_HANDLE_ERRORS=bt
        UCX_LOG_LEVEL=warn UCX_LOG_PRINT_ENABLE=y GTEST_COLOR=no)
    [ "$lib" = ours ] && e+=("$swap=$swap_value")
    "${e[@]}" "$@"
}

# The loader must initialise exactly one libucm, the expected one, bind
# UCX's libucs and the gtest binary to it (at least one ucm_* symbol each:
# libucs calls ucm_set_global_opts at its start, the gtest binary
# copy-relocates ucm_global_opts), and bind no ucm_* symbol to another
# libucm.
check_swap() {
    local lib=$1 want=$2 dbg got bad
    dbg=$(with_env "$lib" LD_DEBUG=files,bindings "$gt/gtest" \
        --gtest_list_tests --gtest_filter=none 2>&1 >/dev/null)
    got=$(echo "$dbg" | sed -n 's/.*calling init: \(.*libucm\.so[.0-9]*\)$/\1/p' | sort -u)
    if [ "$(echo "$got" | wc -l)" -ne 1 ] || [ "$(readlink -f "$got")" != "$want" ]; then
        die "$lib run loads libucm '$got', expected $want"
    fi
    bad=$(echo "$dbg" | awk -v want="$got" -f "$top/contrib/ucx-testsuite/ucm-bindings.awk") ||
        die "$lib run: $bad"
    echo "$lib: loader initialises $got; libucs and gtest bind to it${3:+ ($3)}"
}
check_swap ucx "$ucx_ucm"
check_swap ours "$(readlink -f "$ours_dir/libucm.so.0")" "swapped in by $swap"

# Full names of the selected cases (suite lines end with '.', test lines
# are indented; comments after '#').
list_cases() {
    with_env ucx "$gt/gtest" --gtest_list_tests --gtest_filter="$filter" |
        awk '/^\[/ { next }
             /^[^ ]/ { sub(/ *#.*/, ""); suite = $1; next }
             /^  [^ ]/ { sub(/ *#.*/, ""); print suite $1 }'
}
mapfile -t cases < <(list_cases)
[ ${#cases[@]} -gt 0 ] || die "no case matches the filter '$filter'"
for v in "${VARIANTS[@]}"; do
    for c in "${cases[@]}"; do
        if [ "$c" = "${v%%|*}" ]; then
            vars=${v#*|}
            cases+=("${c}[${vars// /,}]")
        fi
    done
done

# Result of one finished run: passed, skipped, failed, died, notrun; and a
# one-line detail.
classify() {
    local rc=$1 logf=$2 secs=$3 sig
    if [ "$rc" -eq 0 ] && grep -q '^\[  PASSED  \] 1 test' "$logf"; then
        if grep -q '^\[ *\(SKIP\|SKIPPED\) *\]' "$logf"; then
            echo "skipped	$(grep -m1 '^\[ *\(SKIP\|SKIPPED\) *\]' "$logf" | sed 's/^\[[^]]*\] *//')"
        else
            echo "passed	"
        fi
    elif [ "$rc" -eq 0 ] && grep -q '^\[  PASSED  \] 0 tests' "$logf"; then
        echo "notrun	no such case"
    elif [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "$secs" -ge "$case_timeout" ]; }; then
        echo "died	timeout after ${case_timeout}s: $(grep '^\[ RUN' "$logf" | tail -1)"
    elif grep -q 'symbol lookup error' "$logf"; then
        echo "died	$(grep -m1 'symbol lookup error' "$logf" | sed 's/.*symbol lookup error: //')"
    elif [ "$rc" -gt 128 ]; then
        sig=$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))
        echo "died	SIG$sig: $(grep -m1 -E 'Caught signal|Assertion|assert|error' "$logf" | cut -c1-160)"
    elif grep -q '^\[  FAILED  \]' "$logf"; then
        echo "failed	$(awk -f "$top/contrib/ucx-testsuite/first-failure.awk" "$logf" | cut -c1-240)"
    else
        echo "died	exit $rc: $(grep -v '^$' "$logf" | tail -1 | cut -c1-160)"
    fi
}

# run_case LIB MODE CASE -> "result<TAB>detail<TAB>seconds"
run_case() {
    local lib=$1 mode=$2 c=$3 name vars="" logf rc t0 secs
    name=${c%%\[*}
    if [ "$name" != "$c" ]; then
        vars=${c#*\[}
        vars=${vars%\]}
        vars=${vars//,/ }
    fi
    logf=$workdir/logs/$mode/$lib/$(echo "$c" | tr '/[]=,' '_____').log
    mkdir -p "$(dirname "$logf")"
    t0=$SECONDS
    set +e
    # shellcheck disable=SC2086
    with_env "$lib" UCX_MEM_MMAP_HOOK_MODE="$mode" $vars \
        timeout -k 10 "$case_timeout" stdbuf -o0 -e0 "$gt/gtest" \
        --gtest_filter="$name" >"$logf" 2>&1 </dev/null
    rc=$?
    set -e
    secs=$((SECONDS - t0))
    printf '%s\t%s\n' "$(classify $rc "$logf" $secs)" "$secs"
}

# One process for all the selected cases (without the variants), in UCX's
# order, as UCX's own CI runs them: some cases count on what an earlier one
# installed.  run_one_process LIB MODE TAG -> "case<TAB>result<TAB>detail"
run_one_process() {
    local lib=$1 mode=$2 tag=$3 logf rc
    logf=$workdir/logs/$mode-1proc/$lib$tag.log
    mkdir -p "$(dirname "$logf")"
    set +e
    with_env "$lib" UCX_MEM_MMAP_HOOK_MODE="$mode" \
        timeout -k 10 $((case_timeout * 5)) stdbuf -o0 -e0 "$gt/gtest" \
        --gtest_filter="$filter" >"$logf" 2>&1 </dev/null
    rc=$?
    set -e
    awk -v rc=$rc -f "$top/contrib/ucx-testsuite/one-process.awk" \
        "$workdir/cases-1proc.txt" "$logf"
}

results=$workdir/results.tsv
: >"$results"
rm -f "$workdir"/retry-*.tsv
printf '%s\n' "${cases[@]}" | grep -v '\[' >"$workdir/cases-1proc.txt"
# run_lib MODE LIB: every case a process each, then all in one process;
# its rows go to $workdir/rows-MODE-LIB.tsv.
run_lib() {
    local mode=$1 lib=$2 c r rows=$workdir/rows-$1-$2.tsv
    : >"$rows"
    for c in "${cases[@]}"; do
        r=$(run_case "$lib" "$mode" "$c")
        printf '%s\t%s\t%s\t%s\n' "$mode" "$lib" "$c" "$r" >>"$rows"
    done
    run_one_process "$lib" "$mode" "" |
        awk -v r="$mode-1proc" -v l="$lib" '{ print r "\t" l "\t" $0 "\t" }' >>"$rows"
}

# UCX's libucm and ours side by side when there are two CPUs for it
# (--jobs): the cases are single-threaded processes, and this halves the
# stage on the 2-core CI machine.
runs=()
for mode in $modes; do
    runs+=("$mode" "$mode-1proc")
    log "mode $mode: ${#cases[@]} cases, a process each, then one process; ucx and ours libucm"
    if [ "$jobs" -ge 2 ]; then
        run_lib "$mode" ucx &
        pid_ucx=$!
        run_lib "$mode" ours || die "mode $mode, ours: the runner failed"
        wait $pid_ucx || die "mode $mode, ucx: the runner failed"
    else
        run_lib "$mode" ucx
        run_lib "$mode" ours
    fi
    cat "$workdir/rows-$mode-ucx.tsv" "$workdir/rows-$mode-ours.tsv" >>"$results"
done

# A case where ours is worse runs again on ours (a run of its own, or the
# whole one-process run): a pass is reported as flaky (and still counted).
# RUN CASE -> rerun number that passed.
retry_case() {
    local run=$1 c=$2 i r f
    for ((i = 1; i <= retries; i++)); do
        if [ "${run%-1proc}" != "$run" ]; then
            f=$workdir/retry-$run-$i.tsv
            [ -f "$f" ] || run_one_process ours "${run%-1proc}" "-retry$i" >"$f"
            r=$(awk -F'\t' -v c="$c" '$1 == c { print $2 }' "$f")
        else
            r=$(run_case ours "$run" "$c")
            r=${r%%	*}
        fi
        if [ "$r" = passed ]; then
            echo "$i"
            return 0
        fi
    done
    return 1
}

# --- 4. the report --------------------------------------------------------

result_of() { # MODE LIB CASE
    awk -F'\t' -v m="$1" -v l="$2" -v c="$3" '$1 == m && $2 == l && $3 == c { print $4 "\t" $5 }' "$results"
}
known_reason() { # MODE CASE
    [ -n "$known_file" ] || return 1
    awk -v r="$release" -v m="$1" -v c="$2" '
        function glob(p) { gsub(/\./, "\\.", p); gsub(/\*/, ".*", p); return "^" p "$" }
        /^[ \t]*(#|$)/ { next }
        r ~ glob($1) && m ~ glob($2) && $3 == c {
            $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); print; found = 1; exit
        }
        END { exit !found }' "$known_file"
}

regressions=0
echo
echo "=== UCX $release gtest (filter '$filter'): UCX's libucm vs ours ($ucm_lib)"
for run in "${runs[@]}"; do
    mapfile -t run_cases < <(awk -F'\t' -v m="$run" '$1 == m && $2 == "ucx" { print $3 }' "$results")
    echo
    if [ "${run%-1proc}" = "$run" ]; then
        echo "mode $run, a process per case (known-failures MODE: $run)"
    else
        echo "mode ${run%-1proc}, one process in UCX's order (known-failures MODE: $run)"
    fi
    printf '  %-20s %12s %8s\n' "" "UCX libucm" "ours"
    for res in passed failed died skipped notrun; do
        nu=$(awk -F'\t' -v m="$run" -v r="$res" '$1 == m && $2 == "ucx" && $4 == r' "$results" | wc -l)
        no=$(awk -F'\t' -v m="$run" -v r="$res" '$1 == m && $2 == "ours" && $4 == r' "$results" | wc -l)
        [ "$res" = notrun ] && [ "$nu" -eq 0 ] && [ "$no" -eq 0 ] && continue
        printf '  %-20s %12d %8d\n' "$res" "$nu" "$no"
    done
    printf '  %-20s %12d %8d\n' total ${#run_cases[@]} ${#run_cases[@]}
    for c in "${run_cases[@]}"; do
        ru=$(result_of "$run" ucx "$c")
        ro=$(result_of "$run" ours "$c")
        u=${ru%%	*}
        o=${ro%%	*}
        [ "$u" = "$o" ] && continue
        detail=${ro#*	}
        if [ "$o" = passed ]; then
            echo "  better  $c: UCX $u (${ru#*	}), ours passed"
            continue
        fi
        reason=$(known_reason "$run" "$c") || reason=
        if [ -n "$reason" ] && [ "${reason#timing:}" = "$reason" ]; then
            echo "  known   $c: UCX $u, ours $o: $detail"
            echo "          known failure: $reason"
            continue
        fi
        # A failure that a rerun does not repeat is still a failure (the
        # rerun only tells an intermittent one from a steady one), unless
        # a "timing:" entry explains it; a steady one always is.
        if n=$(retry_case "$run" "$c"); then
            if [ -n "$reason" ]; then
                echo "  known   $c: UCX $u, ours $o, then passed on rerun $n: $detail"
                echo "          known intermittent failure: $reason"
                continue
            fi
            echo "  FLAKY   $c: UCX $u, ours $o, then passed on rerun $n: $detail"
        else
            echo "  WORSE   $c: UCX $u, ours $o: $detail"
        fi
        regressions=$((regressions + 1))
        if [ "${run%-1proc}" = "$run" ]; then
            echo "          log: $workdir/logs/$run/ours/$(echo "$c" | tr '/[]=,' '_____').log"
        else
            echo "          log: $workdir/logs/$run/ours.log"
        fi
    done
    failed_ucx=$(awk -F'\t' -v m="$run" '$1 == m && $2 == "ucx" && ($4 == "failed" || $4 == "died")' "$results" | wc -l)
    [ "$failed_ucx" -eq 0 ] || echo "  ($failed_ucx case(s) fail on UCX's own libucm too)"
done

# Known failures that pass now: stale entries to remove.
if [ -n "$known_file" ]; then
    while read -r r m c why; do
        case "$r" in '' | '#'*) continue ;; esac
        # a timing entry names a case that passes on most runs
        [ "${why#timing:}" = "$why" ] || continue
        # shellcheck disable=SC2053 # RELEASE and MODE are patterns
        [[ $release == $r ]] || continue
        for run in "${runs[@]}"; do
            # shellcheck disable=SC2053
            [[ $run == $m ]] || continue
            [ "$(result_of "$run" ours "$c" | cut -f1)" = passed ] &&
                echo "note: known failure '$r $m $c' passes in $run: remove it from $known_file"
        done
    done <"$known_file"
fi

echo
echo "time: source $((t_src - t_start)) s, build $((t_build - t_src)) s," \
    "cases $((SECONDS - t_build)) s, total $((SECONDS - t_start)) s"
if [ $regressions -gt 0 ]; then
    echo "FAILED: $regressions case(s) pass on UCX's libucm and not on ours"
    exit 1
fi
echo "ok: every case that passes on UCX's libucm passes on ours (or is a listed known failure)"
