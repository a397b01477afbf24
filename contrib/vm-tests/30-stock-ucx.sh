#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's ucx_perftest (UCT put_bw, zero-copy, rc_verbs on the soft-RoCE
# device; server and client in this VM, TCP exchange on loopback) on our
# libucm.so.0 (contrib/ucm-run), with proof through our libucm (UCM_STATS=y,
# UCX_MEM_LOG_LEVEL=debug) that:
#   - only libucm was replaced: ours is mapped, Debian's libucm is not,
#     libucs/libuct are Debian's;
#   - UCX's IB registration cache installed its VM_UNMAPPED handler with us
#     (identified by its priority: UCX_IB_RCACHE_MEM_PRIO=777);
#   - VM_UNMAPPED events reached that handler while it was installed, among
#     them the unmap of the perftest's own buffer (UCT's perftest mmap()s it
#     with exactly the message size, registers it through the cache, and
#     munmaps it before closing the memory domain; UCM_STATS=v lists every
#     delivery with address and size).
# The same transfer with Debian's own libucm runs first as the bandwidth
# baseline (printed, never asserted: the VM's speed varies by x2-x8).
#
# Then with our registration cache too (contrib/ucm-run --rcache: our
# libucm.so.0 + libucm_rcache.so.0, UCM_RCACHE_STATS=y), proof from its
# statistics at exit that Debian's UCX registered through it:
#   - the same UCT put_bw: the IB memory domain's cache (UCX names it after
#     the device, e.g. 'rxe0') registered regions in server and client (UCT's
#     perftest registers each buffer once: no hits to expect);
#   - UCP tag_bw, 1 MiB messages over rc_verbs with rendezvous zero-copy
#     (UCX_RNDV_SCHEME=get_zcopy) from the same buffer: with UCX 1.13's
#     default protocols each rendezvous registers through the IB md's cache,
#     which must hit in both processes; with the new protocols
#     (UCX_PROTO_ENABLE=y) through UCP's memory-handle cache 'ucp_rcache',
#     which must hit in both processes.
# Both UCP runs also run on Debian's libucm/libucs: bandwidths printed only.
#   bash 30-stock-ucx.sh TOP BUILD_DIR      (inside the VM: contrib/run-vm-tests.sh)
set -uo pipefail
top=$1
build=$2
dev=${RXE_VM_DEV:-rxe0}
run="$top/contrib/ucm-run"
ours=$("$run" --libucm "$build" --print) || exit 1
stock=/usr/lib/x86_64-linux-gnu/libucm.so.0
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not installed (Debian ucx-utils)"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prio=777
size=65536
test_args=(-t put_bw -x rc_verbs -d "$dev:1" -D zcopy -s $size -n 300 -w 20)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run_pair NAME [wrapper...]: server + client running ucx_perftest
# "${test_args[@]}", logs in $work/NAME.{srv,cli} (lib/perftest-pair.sh)
# shellcheck source=contrib/vm-tests/lib/perftest-pair.sh
. "$top/contrib/vm-tests/lib/perftest-pair.sh"
run_pair() { perftest_pair "$@"; }
bandwidth() { perftest_bandwidth "$1"; }

export UCX_IB_RCACHE_MEM_PRIO=$prio
run_pair stock env LD_PRELOAD= || fail "perftest with Debian's libucm failed: $(tail -3 "$work/stock.cli")"

if ! UCM_STATS=v UCX_MEM_LOG_LEVEL=debug run_pair ours "$run" --libucm "$ours"; then
    fail "perftest on our libucm failed"
    tail -20 "$work/ours.cli" "$work/ours.srv"
fi
echo "server's UCX libraries on ours:"; sed 's/^/  /' "$work/ours.maps"
grep -qx "$(readlink -f "$ours")" "$work/ours.maps" || fail "our libucm ($ours) is not mapped in the server"
grep -q "^$stock\$" "$work/ours.maps" && fail "Debian's libucm is mapped too: ours does not replace it"
grep -q "^/usr/lib/x86_64-linux-gnu/libucs.so.0" "$work/ours.maps" || fail "Debian's libucs is not the one in use"

for side in srv cli; do
    log="$work/ours.$side"
    echo "--- ours, $side: memory-event lines"
    grep -E "UCM STATS|event handler .* (added|removed)" "$log" | sed 's/^/  /'
    # the IB rcache's handler: installed from libucs, VM_UNMAPPED, our priority
    inst=$(grep -E "UCM STATS \[[0-9]+\] installed: handler #[0-9]+ libucs\.so\.0\+0x[0-9a-f]+ .*events VM_UNMAPPED priority $prio:" "$log" | head -1)
    [ -n "$inst" ] || { fail "$side: no VM_UNMAPPED handler of libucs with priority $prio installed"; continue; }
    grep -q "UCM DEBUG event handler .* events 0x20000 priority $prio added" "$log" ||
        fail "$side: no UCX_MEM_LOG_LEVEL=debug line for the handler"
    last=$(grep -E "UCM STATS \[[0-9]+\] (removed|at exit): handler #[0-9]+ libucs\.so\.0\+0x[0-9a-f]+ .*priority $prio " "$log" | tail -1)
    n=$(sed -n 's/.* VM_UNMAPPED=\([0-9]*\).*/\1/p' <<<"$last")
    max=$(sed -n 's/.* unmapped_max=\([0-9]*\).*/\1/p' <<<"$last")
    echo "  => $side: UCX's IB rcache handler got ${n:-?} VM_UNMAPPED events, largest ${max:-?} bytes"
    [ "${n:-0}" -ge 1 ] || fail "$side: no VM_UNMAPPED event reached UCX's rcache handler"
    # UCT's perftest mmap()s its buffers with exactly the message size and
    # munmaps them (after deregistering: the region stays cached) before it
    # closes the memory domain: the rcache must hear about them
    hnum=$(sed -n 's/.* handler #\([0-9]*\) .*/\1/p' <<<"$inst")
    nbuf=$(grep -c "UCM STATS \[[0-9]*\] event VM_UNMAPPED 0x[0-9a-f]* size $size to handler #$hnum\$" "$log")
    echo "  => $side: ... of them $nbuf for a $size-byte range (perftest's buffers)"
    [ "$nbuf" -ge 1 ] || fail "$side: the unmap of the $size-byte perftest buffer did not reach UCX's rcache"
done

# rc_stat LOG NAME FIELD: FIELD ("gets", "hits", "regs", ...) summed over
# the UCM_RCACHE_STATS lines of LOG for the caches named NAME ('' if none)
rc_stat() {
    awk -v n="'$2'" -v f="$3" '
        /^\[ucm_rcache\] pid [0-9]+: rcache / && index($0, "rcache " n " (") {
            for (i = 1; i < NF; ++i) if ($i == f) s += $(i + 1)
            found = 1
        }
        END { if (found) print s + 0 }' "$1"
}

# check_rcache NAME CACHE MIN_HITS: both processes of run NAME have our
# cache CACHE with registrations (and at least MIN_HITS hits)
check_rcache() {
    local name=$1 cache=$2 min_hits=$3 side log regs hits
    for side in srv cli; do
        log="$work/$name.$side"
        regs=$(rc_stat "$log" "$cache" regs); hits=$(rc_stat "$log" "$cache" hits)
        echo "  => $name $side: our cache '$cache': regs ${regs:-none} hits ${hits:-none}"
        if [ -z "$regs" ]; then
            fail "$name $side: no statistics of our cache '$cache' (UCM_RCACHE_STATS)"
            continue
        fi
        [ "$regs" -ge 1 ] || fail "$name $side: our cache '$cache' registered nothing"
        [ "$hits" -ge "$min_hits" ] || fail "$name $side: our cache '$cache' had $hits hits (< $min_hits)"
    done
}

# print_rcache NAME: the statistics lines of both processes
print_rcache() {
    local side
    for side in srv cli; do
        echo "--- $1, $side: our cache's statistics"
        grep "^\[ucm_rcache\]" "$work/$1.$side" | sed 's/^/  /'
    done
}

# (a) UCT put_bw with our cache: the IB md's cache is ours
export UCM_RCACHE_STATS=y
if ! run_pair rcache "$run" --libucm "$ours" --rcache; then
    fail "perftest on our libucm + our rcache failed"
    tail -20 "$work/rcache.cli" "$work/rcache.srv"
fi
rclib=$("$run" --libucm "$ours" --rcache --print | tail -1)
grep -qx "$(readlink -f "$rclib")" "$work/rcache.maps" || fail "our libucm_rcache ($rclib) is not mapped in the server"
print_rcache rcache
# UCT's perftest registers its send and receive buffers once each, and
# UCT's own memory pools: registrations, not necessarily hits
check_rcache rcache "$dev" 0
br=$(bandwidth "$work/rcache.cli")

# (b) UCP tag_bw, rendezvous zero-copy from the same 1 MiB buffer: from
# the second message on, a cache hit per rendezvous in both processes
ucp_size=1048576
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES="$dev:1" UCX_UD_VERBS_ETH_DGID_CHECK=n \
       UCX_RNDV_THRESH=65536 UCX_RNDV_SCHEME=get_zcopy UCX_RC_TIMEOUT=10s UCX_WARN_UNUSED_ENV_VARS=n
# ucp_pair NAME CACHE MIN_HITS [env...]: Debian's stack, then ours + our rcache
ucp_pair() {
    local name=$1 cache=$2 min=$3; shift 3
    run_pair $name-stock env LD_PRELOAD= "$@" ||
        fail "UCP tag_bw ($name) with Debian's libucm/libucs failed: $(tail -3 "$work/$name-stock.cli")"
    if ! run_pair $name-rcache env "$@" "$run" --libucm "$ours" --rcache; then
        fail "UCP tag_bw ($name) on our libucm + our rcache failed"
        tail -20 "$work/$name-rcache.cli" "$work/$name-rcache.srv"
    fi
    print_rcache $name-rcache
    check_rcache $name-rcache "$cache" "$min"
}
test_args=(-t tag_bw -s $ucp_size -n 40 -w 5)
ucp_pair ucp "$dev" 20                      # UCX 1.13's default protocols
ucp_pair ucp2 ucp_rcache 20 UCX_PROTO_ENABLE=y
bus=$(bandwidth "$work/ucp-stock.cli"); bur=$(bandwidth "$work/ucp-rcache.cli")
bus2=$(bandwidth "$work/ucp2-stock.cli"); bur2=$(bandwidth "$work/ucp2-rcache.cli")

bs=$(bandwidth "$work/stock.cli"); bo=$(bandwidth "$work/ours.cli")
echo "put_bw zcopy $size B on $dev: stock libucm ${bs:-?} MB/s, ours ${bo:-?} MB/s, ours + our rcache ${br:-?} MB/s (same VM session; not asserted)"
echo "tag_bw rndv get_zcopy $ucp_size B on $dev: stock libucm/libucs ${bus:-?} MB/s, ours + our rcache ${bur:-?} MB/s;"
echo "  with UCX_PROTO_ENABLE=y: stock ${bus2:-?} MB/s, ours + our rcache ${bur2:-?} MB/s (not asserted)"
if [ $failures -ne 0 ]; then
    echo "30-stock-ucx: $failures failure(s)"
    exit 1
fi
echo "30-stock-ucx: passed"
