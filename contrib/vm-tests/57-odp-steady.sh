#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-mtu: 9000
# Opt-in (ODP_STEADY=1, exported to the VM by run-vm-tests.sh): steady-state
# figures of on-demand paging in the boot that 50-odp.sh uses.  Per round:
# uct_perftest put_bw (64 KiB) and put_lat (4 KiB) with pinned registrations
# (UCX_IB_REG_METHODS=direct) and with odp (=odp, events off), then
# perftest's ib_write_bw / ib_write_lat plain and with its --odp, same
# sizes.  Prints each figure and the odp/pinned ratio of the round; asserts
# nothing about speed (a run that fails is reported, and makes the exit 1).
# ODP_STEADY_ROUNDS (2), ODP_STEADY_ITERS (300).
#   bash 57-odp-steady.sh TOP BUILD_DIR   (run by contrib/run-vm-tests.sh)
set -uo pipefail
build=$2
if [ "${ODP_STEADY:-0}" != 1 ]; then
    echo "57-odp-steady: skipped (benchmark only: ODP_STEADY=1 runs it)"
    exit 0
fi
ours=$build/src/tools/perf/uct_perftest
dev=${RXE_VM_DEV:-rxe0}
gid=${RXE_VM_GID_INDEX:-1}
rounds=${ODP_STEADY_ROUNDS:-2}
iters=${ODP_STEADY_ITERS:-300}
port=$((30000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
T=150
errors=0
command -v ib_write_bw > /dev/null || { echo "57-odp-steady: no perftest"; exit 1; }
echo "57-odp-steady: kernel $(uname -r), perftest $(dpkg-query -W -f='${Version}' perftest 2> /dev/null)"

# one SERVER_ARGS... -- CLIENT_ARGS...: both sides, client output in $tmp/cli
one() {
    local -a s=() c=()
    local spid crc src
    port=$((port + 1))
    while [ "$1" != -- ]; do s+=("${1//PORT/$port}"); shift; done
    shift
    for a in "$@"; do c+=("${a//PORT/$port}"); done
    timeout -k 5 $T "${s[@]}" > "$tmp/srv" 2>&1 &
    spid=$!
    for _ in $(seq 300); do # until the server listens (TCG: seconds)
        ss -Hltn "( sport = :$port )" 2> /dev/null | grep -q . && break
        sleep 0.2
    done
    timeout -k 5 $T "${c[@]}" > "$tmp/cli" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    if [ $crc != 0 ] || [ $src != 0 ]; then
        echo "  FAILED (client $crc, server $src): ${c[*]}"
        tail -n 4 "$tmp/cli" "$tmp/srv" | sed 's/^/    /'
        errors=$((errors + 1))
        return 1
    fi
}
# figures: uct_perftest -v -f last CSV line (overall_bw; 50th percentile
# latency), perftest's row after "#bytes" (BW average; t_typical)
csv_bw() { tail -n 1 "$tmp/cli" | awk -F, 'NF == 8 { print $6 }'; }
csv_lat() { tail -n 1 "$tmp/cli" | awk -F, 'NF == 8 { print $2 }'; }
pt_bw() { awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 4 { v = $4 } END { print v }' "$tmp/cli"; }
pt_lat() { awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 6 { v = $5 } END { print v }' "$tmp/cli"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }'; }

OURS=(-d "$dev:1" -f -v -p PORT)
PT=(-d "$dev" -x "$gid" -F -p PORT)
export UCX_MEM_EVENTS=no
for r in $(seq "$rounds"); do
    declare -A v=()
    for m in direct odp; do
        UCX_IB_REG_METHODS=$m one "$ours" -p PORT -- "$ours" 127.0.0.1 "${OURS[@]}" \
            -t put_bw -s 65536 -n "$iters" -w 20 && v[bw_$m]=$(csv_bw)
        UCX_IB_REG_METHODS=$m one "$ours" -p PORT -- "$ours" 127.0.0.1 "${OURS[@]}" \
            -t put_lat -s 4096 -n "$iters" -w 20 && v[lat_$m]=$(csv_lat)
    done
    for o in plain odp; do
        opt=()
        [ $o = odp ] && opt=(--odp)
        one ib_write_bw "${PT[@]}" "${opt[@]}" -s 65536 -n "$iters" -- \
            ib_write_bw "${PT[@]}" "${opt[@]}" -s 65536 -n "$iters" 127.0.0.1 &&
            v[ibw_$o]=$(pt_bw)
        one ib_write_lat "${PT[@]}" "${opt[@]}" -s 4096 -n "$iters" -- \
            ib_write_lat "${PT[@]}" "${opt[@]}" -s 4096 -n "$iters" 127.0.0.1 &&
            v[ibl_$o]=$(pt_lat)
        if [ $o = odp ] && [ -z "${v[ibw_odp]:-}" ]; then
            echo "  ib_write_bw --odp said:"; sed 's/^/    /' "$tmp/cli" | tail -n 6
        fi
    done
    echo "round $r:"
    echo "  put_bw 64 KiB MB/s: pinned ${v[bw_direct]:--} odp ${v[bw_odp]:--} (odp/pinned $(ratio "${v[bw_odp]:-}" "${v[bw_direct]:-}"))"
    echo "  ib_write_bw 64 KiB MB/s: plain ${v[ibw_plain]:--} --odp ${v[ibw_odp]:--} (odp/plain $(ratio "${v[ibw_odp]:-}" "${v[ibw_plain]:-}"))"
    echo "  put_lat 4 KiB median us: pinned ${v[lat_direct]:--} odp ${v[lat_odp]:--} (odp/pinned $(ratio "${v[lat_odp]:-}" "${v[lat_direct]:-}"))"
    echo "  ib_write_lat 4 KiB t_typical us: plain ${v[ibl_plain]:--} --odp ${v[ibl_odp]:--} (odp/plain $(ratio "${v[ibl_odp]:-}" "${v[ibl_plain]:-}"))"
    unset v
done
[ $errors = 0 ]
