#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench-ib.sh - IB benchmark of uct_perftest (our RC verbs transport) against
# Debian's perftest (ib_write_bw, ib_write_lat, ib_read_bw, ib_send_lat) and
# Debian's stock UCX ucx_perftest, on the same soft-RoCE device, in one VM
# session (server and client both in the VM, loopback), plus the registration
# test: put_bw with a registration per iteration (uct_perftest -G reuse)
# through the cache (UCX_IB_REG_METHODS=rcache) vs ibv_reg_mr every time
# (=direct).
#
#   contrib/bench-ib.sh BUILD_DIR        # from the host (as root): boots the VM
# which is the same as
#   RXE_VM_EXTRA_PKGS="ucx-utils perftest" RXE_VM_RW_DIRS=BUILD_DIR \
#       bash contrib/rxe-vm/rxe-vm.sh -- bash contrib/bench-ib.sh BUILD_DIR
#
# Environment: BENCH_ROUNDS (3): every pair of runs is repeated, the best of
# each is kept (the emulated VM's speed varies x2-x8 between runs, see
# contrib/rxe-vm/README.md: only ratios within one session mean anything);
# BENCH_BW_SIZE (65536), BENCH_BW_ITERS (400), BENCH_LAT_ITERS (1000),
# BENCH_REG_SIZES ("4096 65536": registration test sizes; below 64 KiB they
# run BENCH_LAT_ITERS iterations), BENCH_TESTS ("put_bw put_lat get_bw am_lat
# reg": the groups to run, e.g. "put_lat am_lat" while tuning latency).
# Latency is compared by median (robust to the VM's stalls) and average.
# Output: one line per run, then a table of ratios with the goals of the
# verbs issue (bandwidth >= 0.95x ib_write_bw, latency <= 1.05x ib_write_lat,
# not behind stock UCX).  Exit status 0 when every run worked (a missed goal
# is reported, not an error), 1 otherwise.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd -P)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd -P)

if [ "${RXE_VM:-0}" != 1 ]; then
    export RXE_VM_EXTRA_PKGS="${RXE_VM_EXTRA_PKGS:-ucx-utils perftest}"
    export RXE_VM_RW_DIRS="$build${RXE_VM_RW_DIRS:+:$RXE_VM_RW_DIRS}"
    cd "$top"
    exec bash "$top/contrib/rxe-vm/rxe-vm.sh" -- bash "$top/contrib/bench-ib.sh" "$build"
fi

# ------------------------------------------------------------ in the VM ----
ours=$build/src/tools/perf/uct_perftest
dev=$RXE_VM_DEV
gid=$RXE_VM_GID_INDEX
host=127.0.0.1
rounds=${BENCH_ROUNDS:-3}
bw_size=${BENCH_BW_SIZE:-65536}
bw_iters=${BENCH_BW_ITERS:-400}
lat_iters=${BENCH_LAT_ITERS:-1000}
reg_sizes=${BENCH_REG_SIZES:-4096 65536}
tests=" ${BENCH_TESTS:-put_bw put_lat get_bw am_lat reg} "
T=300
port=$((30000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
errors=0
declare -A best

for b in "$ours" ib_write_bw ib_write_lat ib_read_bw ib_send_lat ucx_perftest; do
    command -v "$b" > /dev/null || { echo "bench-ib: $b not found" >&2; exit 1; }
done

wait_listen() {
    local i
    for i in $(seq 600); do
        ss -Hltn "( sport = :$1 )" 2> /dev/null | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

# pair KEY EXTRACT SERVER_CMD... -- CLIENT_CMD...: run a server and a client,
# extract a number from the client's output, keep the best (max for bw, min
# for lat: KEY ends in _bw or _lat).  HOSTPORT and PORT in the commands are
# replaced by the host and a fresh port.
pair() {
    local key=$1 extract=$2 spid crc src v a
    local -a s=() c=()
    shift 2
    port=$((port + 1))
    while [ "$1" != -- ]; do a=${1//PORT/$port}; s+=("$a"); shift; done
    shift
    for a in "$@"; do a=${a//PORT/$port}; c+=("${a//HOST/$host}"); done
    timeout -k 5 $T "${s[@]}" > "$tmp/srv" 2>&1 &
    spid=$!
    if ! wait_listen "$port"; then
        echo "  $key: server did not listen"; kill "$spid" 2> /dev/null
    fi
    timeout -k 5 $T "${c[@]}" > "$tmp/cli" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    v=$($extract < "$tmp/cli")
    if [ $crc != 0 ] || [ $src != 0 ] || [ -z "$v" ]; then
        echo "  $key: FAILED (client $crc, server $src): ${c[*]}"
        tail -n 5 "$tmp/cli" "$tmp/srv" | sed 's/^/    /'
        errors=$((errors + 1))
        return 1
    fi
    echo "  $key: $v"
    # perftest prints "inf" when its timing went wrong: not a sample
    if ! awk -v v="$v" 'BEGIN { n = split(v, a, " ")
            for (i = 1; i <= n; ++i) if (a[i] !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 }'; then
        echo "  $key: not a number, ignored"
        return 0
    fi
    set -- $v
    keep_best "$key" "$1"
    [ $# -lt 2 ] || keep_best "${key}_avg" "$2"
}

want() { [[ $tests == *" $1 "* ]]; }

# keep_best KEY VALUE: max for *_bw, min for latencies
keep_best() {
    if [ -z "${best[$1]:-}" ] ||
       awk -v v="$2" -v b="${best[$1]}" -v k="$1" \
           'BEGIN { exit !((k ~ /_bw$/) ? v > b : v < b) }'; then
        best[$1]=$2
    fi
}

# extractors.  uct_perftest / ucx_perftest -v -f: the last CSV line (stock
# indents it); bandwidth = overall_bw, latency = "percentile average".
# perftest: the data row after the "#bytes" header; BW average, or latency
# "t_typical t_avg" (t_typical is perftest's median).
csv_bw() { tail -n 1 | awk -F, '{ sub(/^ +/, "") } NF == 8 && $1 ~ /^[0-9]+$/ { print $6 }'; }
csv_lat() { tail -n 1 | awk -F, '{ sub(/^ +/, "") } NF == 8 && $1 ~ /^[0-9]+$/ { print $2, $4 }'; }
pt_bw() { awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 4 { v = $4 } END { print v }'; }
pt_lat() { awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 6 { v = $5 " " $6 } END { print v }'; }

PT=(-d "$dev" -x "$gid" -F -p PORT)
UCX=(-x rc_verbs -d "$dev:1" -D zcopy -f -v -p PORT)
OURS=(-d "$dev:1" -f -v -p PORT)

echo "bench-ib: $dev (GID index $gid), kernel $(uname -r), $(nproc) cpus, $rounds rounds;" \
     "bw ${bw_size} B x $bw_iters, lat 8 B x $lat_iters"
for r in $(seq "$rounds"); do
    echo "round $r"
    want put_bw && pair ours_put_bw csv_bw "$ours" -p PORT -- "$ours" HOST "${OURS[@]}" -t put_bw -s "$bw_size" -n "$bw_iters" -w 20
    want put_bw && pair ibw_put_bw pt_bw ib_write_bw "${PT[@]}" -s "$bw_size" -n "$bw_iters" -- ib_write_bw "${PT[@]}" -s "$bw_size" -n "$bw_iters" HOST
    want put_bw && pair ucx_put_bw csv_bw ucx_perftest -p PORT -- ucx_perftest HOST "${UCX[@]}" -t put_bw -s "$bw_size" -n "$bw_iters" -w 20
    want put_lat && pair ours_put_lat csv_lat "$ours" -p PORT -- "$ours" HOST "${OURS[@]}" -t put_lat -s 8 -n "$lat_iters" -w 50
    want put_lat && pair ibw_put_lat pt_lat ib_write_lat "${PT[@]}" -s 8 -n "$lat_iters" -- ib_write_lat "${PT[@]}" -s 8 -n "$lat_iters" HOST
    want get_bw && pair ours_get_bw csv_bw "$ours" -p PORT -- "$ours" HOST "${OURS[@]}" -t get_bw -s "$bw_size" -n "$bw_iters" -w 20
    want get_bw && pair ibr_get_bw pt_bw ib_read_bw "${PT[@]}" -s "$bw_size" -n "$bw_iters" -- ib_read_bw "${PT[@]}" -s "$bw_size" -n "$bw_iters" HOST
    want am_lat && pair ours_am_lat csv_lat "$ours" -p PORT -- "$ours" HOST "${OURS[@]}" -t am_lat -s 8 -n "$lat_iters" -w 50
    want am_lat && pair ibs_am_lat pt_lat ib_send_lat "${PT[@]}" -s 8 -n "$lat_iters" -- ib_send_lat "${PT[@]}" -s 8 -n "$lat_iters" HOST
    want am_lat && pair ucx_am_lat csv_lat ucx_perftest -p PORT -- ucx_perftest HOST "${UCX[@]}" -t am_lat -s 8 -n "$lat_iters" -w 50
    want reg || continue
    for sz in $reg_sizes; do
        n=$bw_iters
        [ "$sz" -ge 65536 ] || n=$lat_iters
        UCX_IB_REG_METHODS=rcache pair reg_rcache_${sz}_bw csv_bw "$ours" -p PORT -- \
            "$ours" HOST "${OURS[@]}" -t put_bw -s "$sz" -n "$n" -w 20 -G reuse
        UCX_IB_REG_METHODS=direct pair reg_direct_${sz}_bw csv_bw "$ours" -p PORT -- \
            "$ours" HOST "${OURS[@]}" -t put_bw -s "$sz" -n "$n" -w 20 -G reuse
    done
done

# row LABEL OURS_KEY BASE_KEY BASE_NAME GOAL(min:X | max:X | none)
row() {
    local o=${best[$2]:-} b=${best[$3]:-}
    awk -v l="$1" -v o="$o" -v b="$b" -v n="$4" -v g="$5" 'BEGIN {
        if (o == "" || b == "" || b + 0 == 0) { printf "%-28s %10s  %-22s %10s  %7s  %s\n", l, o, n, b, "-", "no data"; exit }
        r = o / b; split(g, gg, ":"); verdict = ""
        if (gg[1] == "min") verdict = (r >= gg[2]) ? "ok (goal >= " gg[2] "x)" : "BELOW GOAL (>= " gg[2] "x)"
        if (gg[1] == "max") verdict = (r <= gg[2]) ? "ok (goal <= " gg[2] "x)" : "ABOVE GOAL (<= " gg[2] "x)"
        printf "%-28s %10.2f  %-22s %10.2f  %6.2fx  %s\n", l, o, n, b, r, verdict }'
}

echo
echo "bench-ib results (best of $rounds rounds; bandwidth MB/s = 2^20 B/s, latency usec one-way;"
echo " median = uct_perftest/ucx_perftest 50.0%ile, perftest t_typical)"
printf "%-28s %10s  %-22s %10s  %7s  %s\n" "uct_perftest" "ours" "baseline" "value" "ratio" "goal"
row "put_bw ${bw_size} B (MB/s)" ours_put_bw ibw_put_bw "ib_write_bw" min:0.95
row "put_bw ${bw_size} B (MB/s)" ours_put_bw ucx_put_bw "ucx_perftest put_bw" min:1.00
row "put_lat 8 B median (usec)" ours_put_lat ibw_put_lat "ib_write_lat" max:1.05
row "put_lat 8 B average (usec)" ours_put_lat_avg ibw_put_lat_avg "ib_write_lat" max:1.05
row "get_bw ${bw_size} B (MB/s)" ours_get_bw ibr_get_bw "ib_read_bw" min:0.95
row "am_lat 8 B median (usec)" ours_am_lat ibs_am_lat "ib_send_lat" max:1.05
row "am_lat 8 B average (usec)" ours_am_lat_avg ibs_am_lat_avg "ib_send_lat" max:1.05
row "am_lat 8 B median (usec)" ours_am_lat ucx_am_lat "ucx_perftest am_lat" max:1.00
row "am_lat 8 B average (usec)" ours_am_lat_avg ucx_am_lat_avg "ucx_perftest am_lat" max:1.00
for sz in $reg_sizes; do
    row "put_bw $sz B -G reuse (MB/s)" reg_rcache_${sz}_bw reg_direct_${sz}_bw "same, REG_METHODS=direct" none
done
echo "(registration test: uct_perftest -t put_bw -G reuse registers and deregisters the"
echo " source buffer every iteration; ratio = bandwidth through the rcache / with ibv_reg_mr each time)"
if [ $errors != 0 ]; then
    echo "bench-ib: $errors run(s) failed"
    exit 1
fi
