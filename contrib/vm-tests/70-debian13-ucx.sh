#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-root: debian13
# vm-timeout: 600
# Debian 13's ucx_perftest (UCX 1.18) over rc_verbs on the soft-RoCE device,
# server and client in this VM (TCP exchange on loopback), in the boot whose
# root is a Debian 13 userland (contrib/run-vm-tests.sh, "# vm-root"), on
# the tree built in that userland.  Three stacks per test:
#   stock   Debian 13's libucm, libucs and its registration cache
#   ours    our libucm.so.0 (contrib/ucm-run), the rest Debian's
#   rcache  our libucm.so.0 + our stock-ABI cache libucm_rcache.so.0
#           (contrib/ucm-run --rcache, UCM_RCACHE_STATS=y)
# Tests: UCT put_bw (zero copy, 64 KiB) and UCP tag_bw (1 MiB, rendezvous
# get_zcopy from one buffer: since UCX 1.17 each rendezvous registers
# through UCP's memory-handle cache 'ucp_rcache'; the IB memory domain has
# no cache of its own any more).  Asserted:
#   - every run exits 0 on both sides (the tool checks its data);
#   - ours/rcache: our libucm is mapped in the server, Debian's is not;
#   - ours: UCP's cache (UCX_RCACHE_MEM_PRIO=777) installed its VM_UNMAPPED
#     handler with our libucm (UCM_STATS);
#   - rcache: 'ucp_rcache' is ours in both processes, with >= 20 hits (one
#     per rendezvous after the first), and no process printed libucs's
#     rcache error lines (a cache that refused the parameters leaves UCP
#     uncached: its runs pass, which proves nothing).  Where our cache
#     says that it leaves this UCX release's caches to libucs, that is
#     reported (NOT MET) instead.
# Debian 13's ucx_perftest is built with MPI and would wait for an MPI peer
# set: -P 0 makes it use its TCP exchange.  Bandwidths are printed, never
# asserted.
#   bash 70-debian13-ucx.sh TOP BUILD_DIR     (inside the VM)
set -uo pipefail
top=$1
build=$2
dev=${RXE_VM_DEV:-rxe0}
run="$top/contrib/ucm-run"
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not in this root (ucx-utils)"; exit 0; }
ours=$("$run" --libucm "$build" --print) || exit 1
rclib=$("$run" --libucm "$build" --rcache --print | tail -n 1) || exit 1
stock=$(ldconfig -p | awk '$1 == "libucm.so.0" {print $NF; exit}')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prio=777
failures=0
not_met=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
echo "70-debian13-ucx: $(. /etc/os-release && echo "$PRETTY_NAME"), UCX $(ucx_info -v | awk '/version/ {print $NF; exit}')"
echo "  libucm: Debian's $stock, ours $ours; cache $rclib"

# run_pair NAME [wrapper...]: server + client running ucx_perftest
# "${test_args[@]}" (lib/perftest-pair.sh); logs $work/NAME.{srv,cli}, the
# server's UCX libraries $work/NAME.maps; a failure counts
# shellcheck source=contrib/vm-tests/lib/perftest-pair.sh
. "$top/contrib/vm-tests/lib/perftest-pair.sh"
PAIR_SERVER_LIMIT=180
PAIR_CLIENT_LIMIT=150
run_pair() { perftest_pair "$@" || fail "$1: client or server failed"; }

# MB/s of the client's final line
bandwidth() { perftest_bandwidth "$work/$1.cli"; }

# only_ours NAME: our libucm replaced Debian's in the server
only_ours() {
    grep -qx "$(readlink -f "$ours")" "$work/$1.maps" || fail "$1: our libucm is not mapped in the server"
    [ -n "$stock" ] && grep -qx "$(readlink -f "$stock")" "$work/$1.maps" &&
        fail "$1: Debian's libucm is mapped too"
    return 0
}

# rc_stat LOG FIELD: FIELD of our cache 'ucp_rcache' in LOG ('' if none)
rc_stat() {
    awk -v f="$2" '/^\[ucm_rcache\] pid [0-9]+: rcache / && index($0, "rcache '"'ucp_rcache'"' (") {
        for (i = 1; i < NF; ++i) if ($i == f) s += $(i + 1)
        found = 1 } END { if (found) print s + 0 }' "$1"
}

# our_cache NAME MIN_HITS: 'ucp_rcache' is ours in both processes, or our
# cache said that it leaves this UCX release's caches to libucs (reported)
our_cache() {
    local side log regs hits
    for side in srv cli; do
        log="$work/$1.$side"
        grep -h "^\[ucm_rcache\]\|rcache.*error\|not a power of 2\|left to UCX's libucs" "$log" |
            sed "s/^/  $side: /"
        regs=$(rc_stat "$log" regs); hits=$(rc_stat "$log" hits)
        grep -q "not a power of 2\|\[ucs rcache\] error" "$log" && fail "$1 $side: libucs's rcache error line"
        if [ -z "$regs" ] && grep -q "registration caches left to UCX's libucs" "$log"; then
            echo "NOT MET: $1 $side: our cache stood aside for this UCX release ('ucp_rcache' is libucs's)"
            not_met=$((not_met + 1))
        elif [ -z "$regs" ]; then
            fail "$1 $side: no statistics of our cache 'ucp_rcache' (UCP ran without it)"
        elif [ "$regs" -lt 1 ] || [ "$hits" -lt "$2" ]; then
            fail "$1 $side: our 'ucp_rcache' regs $regs hits $hits (want >= 1, >= $2)"
        fi
    done
}

export UCX_RCACHE_MEM_PRIO=$prio UCX_WARN_UNUSED_ENV_VARS=n UCM_RCACHE_STATS=y
# UCT put_bw, zero copy (no registration cache in UCX 1.18's IB md)
test_args=(-P 0 -t put_bw -x rc_verbs -d "$dev:1" -D zcopy -s 65536 -n 300 -w 20)
run_pair uct-stock env LD_PRELOAD=
run_pair uct-ours "$run" --libucm "$ours"
only_ours uct-ours
run_pair uct-rcache "$run" --libucm "$ours" --rcache
only_ours uct-rcache

# UCP tag_bw, 1 MiB rendezvous get_zcopy from one buffer
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES="$dev:1" UCX_UD_VERBS_ETH_DGID_CHECK=n \
       UCX_RNDV_THRESH=65536 UCX_RNDV_SCHEME=get_zcopy UCX_RC_TIMEOUT=10s
test_args=(-P 0 -t tag_bw -s 1048576 -n 40 -w 5)
run_pair ucp-stock env LD_PRELOAD=
UCM_STATS=y run_pair ucp-ours "$run" --libucm "$ours"
only_ours ucp-ours
for side in srv cli; do
    grep -qE "UCM STATS \[[0-9]+\] installed: handler #[0-9]+ libucs\.so\.0\+0x[0-9a-f]+ .*VM_UNMAPPED.* priority $prio:" \
        "$work/ucp-ours.$side" || fail "ucp-ours $side: UCP's cache did not install its VM_UNMAPPED handler with our libucm"
done
run_pair ucp-rcache "$run" --libucm "$ours" --rcache
only_ours ucp-rcache
grep -qx "$(readlink -f "$rclib")" "$work/ucp-rcache.maps" || fail "ucp-rcache: our cache library is not mapped"
our_cache ucp-rcache 20

echo "put_bw zcopy 64 KiB on $dev: stock $(bandwidth uct-stock) MB/s, ours $(bandwidth uct-ours) MB/s," \
     "ours + our cache $(bandwidth uct-rcache) MB/s"
echo "tag_bw rndv get_zcopy 1 MiB: stock $(bandwidth ucp-stock) MB/s, ours $(bandwidth ucp-ours) MB/s," \
     "ours + our cache $(bandwidth ucp-rcache) MB/s (same VM session; not asserted)"
if [ $failures -ne 0 ]; then
    echo "70-debian13-ucx: $failures failure(s)"
    exit 1
fi
if [ $not_met -ne 0 ]; then
    echo "70-debian13-ucx: passed, but our cache stood aside in $not_met process(es) (NOT MET above)"
    exit 0
fi
echo "70-debian13-ucx: passed"
