#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions and simulated cache misses per operation of the hot rows
# (ucm_bench_hooks --count, ucs_bench_rcache --count), compared with a
# baseline in the tree.  Figures from callgrind do not depend on the
# machine's load: a row of ours whose instructions (or, where the baseline
# has at least 0.1, LL misses) grow by more than 10% fails, and is named.
#
#   contrib/bench-counts.sh [--build DIR] [--check [FILE]] [--write FILE]
#     (no option)    print the figures
#     --check [FILE] compare with FILE (default contrib/bench-counts/baseline.txt)
#     --write FILE   write the figures as a new baseline
#     --build DIR    the build directory (default: build)
# Exit: 0, 1 when a row grew or a benchmark failed, 2 on usage errors,
# 77 with one line when valgrind is missing or the baseline was counted
# with another toolchain (gcc, glibc, valgrind, machine: its header says).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
baseline=$top/contrib/bench-counts/baseline.txt
mode=print
out=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --check)
        mode=check
        if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then baseline=$2; shift; fi
        shift ;;
    --write) mode=write; out=${2:?--write needs a file}; shift 2 ;;
    -h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-counts.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if ! command -v valgrind >/dev/null 2>&1; then
    echo "bench-counts.sh: skipped: valgrind is not installed (apt-get install valgrind)"
    exit 77
fi
tools=$build/src/tools
for t in ucm_bench_hooks ucs_bench_rcache; do
    if [ ! -x "$tools/$t" ]; then
        echo "bench-counts.sh: $tools/$t is missing: build first (contrib/build.sh)" >&2
        exit 1
    fi
done

# what the counts depend on besides our code: the compiler that built it,
# glibc (its wrappers and malloc are in the rows) and valgrind
toolchain="gcc $(gcc -dumpfullversion 2>/dev/null || echo '?'), glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}'), $(valgrind --version), $(uname -m)"
if [ $mode = check ] && [ -f "$baseline" ]; then
    base_tc=$(sed -n 's/^# toolchain: //p' "$baseline")
    if [ "$base_tc" != "$toolchain" ]; then
        echo "bench-counts.sh: skipped: the baseline was counted with $base_tc, this is $toolchain (--write a baseline of this toolchain to compare)"
        exit 77
    fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
status=0
"$tools/ucm_bench_hooks" --count --csv >"$tmp/hooks.csv" || status=$?
"$tools/ucs_bench_rcache" --count --csv >"$tmp/rcache.csv" || status=$?
if [ $status -ne 0 ]; then
    echo "bench-counts.sh: a benchmark failed (exit $status)" >&2
    exit 1
fi
# bench row config instructions d1-misses ll-misses, per operation
{
    awk -F, 'NR > 1 && $4 != "" { print "hooks", $1, $2, $3, $4, $5 }' "$tmp/hooks.csv"
    awk -F, 'NR > 1 && $4 != "" { print "rcache", $1, $2, $3, $4, $5 }' "$tmp/rcache.csv"
} >"$tmp/now.txt"

case $mode in
print)
    printf '%-7s %-18s %-12s %10s %8s %8s\n' bench row config instr/op D1/op LL/op
    awk '{ printf "%-7s %-18s %-12s %10s %8s %8s\n", $1, $2, $3, $4, $5, $6 }' "$tmp/now.txt"
    ;;
write)
    {
        echo "# bench row config instructions/op D1-misses/op LL-misses/op"
        echo "# contrib/bench-counts.sh --write; callgrind, I1/D1 32 KiB 8-way, LL 8 MiB 16-way"
        echo "# change only in a commit that says why"
        echo "# toolchain: $toolchain"
        cat "$tmp/now.txt"
    } >"$out"
    echo "bench-counts.sh: wrote $(wc -l <"$tmp/now.txt") rows to $out"
    ;;
check)
    if [ ! -f "$baseline" ]; then
        echo "bench-counts.sh: no baseline $baseline (--write it)" >&2
        exit 1
    fi
    # hot rows: ours in every configuration
    if ! awk '
        FNR == NR { if ($0 !~ /^#/) { ir[$1 " " $2 " " $3] = $4; ll[$1 " " $2 " " $3] = $6 }; next }
        $3 ~ /^(ours|stock-abi)/ {
            key = $1 " " $2 " " $3
            if (!(key in ir)) { printf "  new row (not in the baseline): %s %.1f\n", key, $4; next }
            seen[key] = 1
            if ($4 > ir[key] * 1.10 + 0.5) {
                printf "  GREW: %s: %.1f instructions/op, baseline %.1f (+%.0f%%)\n", key, $4, ir[key], 100 * ($4 / ir[key] - 1)
                bad = 1
            } else if (ll[key] >= 0.1 && $6 > ll[key] * 1.10) {
                printf "  GREW: %s: %.3f LL misses/op, baseline %.3f\n", key, $6, ll[key]
                bad = 1
            }
            n++
        }
        END {
            for (key in ir) if (key ~ / (ours|stock-abi)/ && !(key in seen)) { printf "  MISSING: %s\n", key; bad = 1 }
            printf "bench-counts.sh: %d rows of ours compared\n", n
            exit bad
        }' "$baseline" "$tmp/now.txt"; then
        echo "bench-counts.sh: FAILED: rows above grew more than 10% over $baseline"
        exit 1
    fi
    ;;
esac
echo "bench-counts.sh: $((SECONDS - start)) s"
