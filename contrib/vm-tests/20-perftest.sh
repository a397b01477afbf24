#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# uct_perftest smoke test inside the soft-RoCE VM (contrib/run-vm-tests.sh):
# every test type runs once as server + client over TCP loopback on
# $RXE_VM_DEV:1 with a few iterations, under its own timeout.  Asserts the
# exit codes of both sides (the tool checks the transferred data itself and
# fails otherwise), that the table and the CSV output parse, and that bad
# options exit 2 with a message.  Numbers are not checked (benchmark only:
# contrib/bench-ib.sh).
#
#   bash contrib/vm-tests/20-perftest.sh TOP BUILD_DIR
set -uo pipefail
top=$1
build=$2
bin=$build/src/tools/perf/uct_perftest
dev=${RXE_VM_DEV:-rxe0}:1
host=127.0.0.1
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
T=60    # seconds per side and test (a TCG run takes a few)

if [ ! -x "$bin" ]; then
    echo "SKIP: $bin not built (configure found no libibverbs?)"
    exit 0
fi

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run_pair NAME CLIENT_ARGS...: server + client; client output in $tmp/NAME.out
run_pair() {
    local name=$1 spid src crc
    shift
    port=$((port + 1))
    timeout -k 5 $T "$bin" -p $port > "$tmp/$name.srv" 2>&1 &
    spid=$!
    timeout -k 5 $T "$bin" $host -p $port -d "$dev" "$@" > "$tmp/$name.out" 2>&1
    crc=$?
    wait $spid
    src=$?
    if [ $crc != 0 ] || [ $src != 0 ]; then
        fail "$name: client exit $crc, server exit $src ($*)"
        sed 's/^/  client: /' "$tmp/$name.out" | tail -n 15
        sed 's/^/  server: /' "$tmp/$name.srv" | tail -n 15
        return 1
    fi
    return 0
}

# the last table row ("Final:", or unlabelled with -f): iterations == $2,
# 7 numbers after it, all but the bandwidth positive
check_table() {
    local name=$1 iters=$2
    awk -v n="$iters" '
        /^Final: / || /^ +[0-9]/ { row = $0 }
        END { k = split(row, f, " "); o = (f[1] == "Final:")
              if (k != 8 + o || f[1 + o] != n) exit 1
              for (i = 2 + o; i <= k; i++) {   # bandwidth may round to 0.00
                  if (f[i] !~ /^[0-9]+(\.[0-9]+)?$/) exit 1
                  if (i != 5 + o && i != 6 + o && !(f[i] + 0 > 0)) exit 1 } }' "$tmp/$name.out" ||
        { fail "$name: no well-formed final row"; cat "$tmp/$name.out"; return 1; }
    grep -q '^| Test: ' "$tmp/$name.out" || { fail "$name: no description box"; return 1; }
    echo "ok   $name: $(grep -E '^Final: |^ +[0-9]' "$tmp/$name.out" | tail -n 1 | tr -s ' ')"
}

# CSV: the header, then rows of 8 numbers; the last one has iterations == $2
check_csv() {
    local name=$1 iters=$2
    awk -F, -v n="$iters" '
        NR == 1 { if ($0 !~ /^iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr$/) bad = 1; next }
        { if (NF != 8) bad = 1; for (i = 1; i <= 8; i++) if ($i !~ /^[0-9.]+$/) bad = 1; last = $1 }
        END { exit !(NR >= 2 && !bad && last == n) }' "$tmp/$name.out" ||
        { fail "$name: CSV does not parse"; cat "$tmp/$name.out"; return 1; }
    echo "ok   $name: $(tail -n 1 "$tmp/$name.out")"
}

# bad usage: exit 2 and one line naming the problem, without a peer
check_usage() {
    local want=$1 out rc
    shift
    out=$(timeout 60 "$bin" "$@" 2>&1)
    rc=$?
    if [ $rc != 2 ] || ! grep -qi -- "$want" <<< "$out"; then
        fail "usage '$*': exit $rc, output '$out' (want 2 and '$want')"
    else
        echo "ok   usage '$*' -> 2: $out"
    fi
}

echo "uct_perftest on $dev, TCP exchange on $host"
run_pair put_bw  -t put_bw  -s 65536 -n 60  -w 5 -f && check_table put_bw 60
run_pair put_lat -t put_lat -s 8     -n 300 -w 20  && check_table put_lat 300
run_pair get_bw  -t get_bw  -s 65536 -n 60  -w 5 -v -f && check_csv get_bw 60
run_pair get_lat -t get_lat -s 8     -n 200 -w 10 -f && check_table get_lat 200
run_pair am_bw   -t am_bw   -s 4096  -n 400 -w 10 -f -W 16 && check_table am_bw 400
run_pair am_lat  -t am_lat  -s 64    -n 300 -w 20 -v && check_csv am_lat 300
# io-vector lists, and the registration test (cached and direct, new buffers)
run_pair put_iov -t put_bw  -s 100,4000,3 -n 40 -w 2 -f && check_table put_iov 40
run_pair am_iov  -t am_lat  -s 20,300  -n 50 -w 2 -f && check_table am_iov 50
run_pair reg_rcache -t put_bw -s 16384 -n 60 -w 4 -f -G reuse && check_table reg_rcache 60
UCX_IB_REG_METHODS=direct run_pair reg_direct -t get_bw -s 16384 -n 60 -w 4 -f -G reuse &&
    check_table reg_direct 60
run_pair reg_new -t get_bw -s 16384 -n 40 -w 2 -f -G new && check_table reg_new 40
run_pair reg_new_put -t put_bw -s 8192 -n 40 -w 2 -f -G new && check_table reg_new_put 40

check_usage "unknown option" -Z
check_usage "not supported" -x ud_verbs
check_usage "not supported" -D bcopy
check_usage "not supported" -l
check_usage "unsupported test" $host -t tag_bw -d "$dev"
check_usage "needs -d" $host -t put_bw
check_usage "invalid message size" $host -t put_bw -d "$dev" -s 0
check_usage "-G works with" $host -t am_lat -d "$dev" -G reuse

# a device that does not exist: both sides fail cleanly (exit 1), no hang
port=$((port + 1))
timeout -k 5 $T "$bin" -p $port > "$tmp/nodev.srv" 2>&1 &
spid=$!
timeout -k 5 $T "$bin" $host -p $port -d nosuchdev0:1 -t put_bw -n 10 > "$tmp/nodev.out" 2>&1
crc=$?
wait $spid
src=$?
if [ $crc = 1 ] && [ $src = 1 ] && grep -q "nosuchdev0" "$tmp/nodev.out"; then
    echo "ok   missing device -> exit 1 on both sides: $(head -n 1 "$tmp/nodev.out")"
else
    fail "missing device: client $crc, server $src"; cat "$tmp/nodev.out" "$tmp/nodev.srv"
fi

if [ $fails != 0 ]; then
    echo "20-perftest: $fails failure(s)"
    exit 1
fi
echo "20-perftest: all passed"
