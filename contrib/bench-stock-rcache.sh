#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Registration-heavy stock workload (Debian's Open MPI 4.1, pml/ucx over
# rc_verbs on soft-RoCE) with and without this project's registration cache:
# test/mpi/mpi_reg_bench sends 1 MiB messages from a ring of 8 buffers that
# are freed and malloc()ed again before every message (on both ranks).
# Configurations, each run REPEAT times, alternating:
#   stock   Debian's libucm + libucs (UCX's own cache)
#   ours    our libucm.so.0, Debian's libucs cache   (contrib/ucm-run)
#   rcache  our libucm + our cache                   (contrib/ucm-run --rcache)
# and two allocator behaviours: glibc's default (a freed 1 MiB block mostly
# comes back at the same address: cache hits) and -m (every free() is a
# munmap(): an invalidation and a new registration per message).
# Prints MB/s, wall and CPU time (getrusage, user + system) per message of
# each rank, the medians and the rcache/stock ratios (UCX polls while it
# waits: CPU time per message is close to wall time under soft-RoCE, whose
# own work runs in kernel threads).  Nothing is asserted
# (soft-RoCE under TCG: speeds vary x2-x8 between runs; compare within one
# run only).  By hand, not in CI; needs root (the VM) and mpicc:
#
#   contrib/bench-stock-rcache.sh BUILD_DIR [ITERS [REPEAT]]     (default 100 3)
#
# On the host it builds BUILD_DIR/test/mpi/mpi_reg_bench and reruns itself inside one VM boot
# (contrib/rxe-vm/rxe-vm.sh).  Extra mpi_reg_bench options: BENCH_ARGS.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd -P)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [ITERS [REPEAT]]" >&2; exit 2; }
build=$(cd "$1" && pwd -P) || exit 2
iters=${2:-100}
repeat=${3:-3}
bin="$build/test/mpi/mpi_reg_bench"

if [ "${RXE_VM:-0}" != 1 ]; then
    command -v mpicc >/dev/null || { echo "$0: mpicc not found (libopenmpi-dev)" >&2; exit 2; }
    make -C "$build/test/mpi" mpi_reg_bench >/dev/null || exit 1
    export RXE_VM_EXTRA_PKGS="${RXE_VM_EXTRA_PKGS:-ucx-utils perftest openmpi-bin libopenmpi-dev}"
    export RXE_VM_RW_DIRS="$build${RXE_VM_RW_DIRS:+:$RXE_VM_RW_DIRS}"
    export RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-1800}"
    cd "$top"
    exec bash "$top/contrib/rxe-vm/rxe-vm.sh" -- bash "$top/contrib/bench-stock-rcache.sh" "$build" "$iters" "$repeat"
fi

# inside the VM
dev=${RXE_VM_DEV:-rxe0}
run="$top/contrib/ucm-run"
ours=$("$run" --libucm "$build" --print) || exit 1
"$run" --libucm "$ours" --rcache --print >/dev/null || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "bench-stock-rcache: $dev, kernel $(uname -r), $(nproc) cpus, $iters messages x $repeat runs per configuration"

# one CONFIG MALLOC_OPT RUN: prints mpi_reg_bench's line, keeps it in $work
one() {
    local cfg=$1 mopt=$2 i=$3 wrap=() log
    case $cfg in
    ours)   wrap=("$run" --libucm "$ours") ;;
    rcache) wrap=("$run" --libucm "$ours" --rcache) ;;
    esac
    log="$work/$cfg${mopt}.$i"
    timeout -k 5 600 mpirun -np 2 --allow-run-as-root --bind-to none \
        --mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any --mca btl self \
        -x UCX_NET_DEVICES="$dev:1" -x UCX_TLS=self,rc_verbs,ud_verbs \
        -x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_RC_TIMEOUT=10s -x UCX_WARN_UNUSED_ENV_VARS=n \
        -x UCM_RCACHE_STATS=y \
        "${wrap[@]}" "$bin" -n "$iters" -w 10 $mopt ${BENCH_ARGS:-} >"$log" 2>&1
    printf '  %-7s run %d: ' "$cfg" "$i"
    grep "^mpi_reg_bench:" "$log" || { echo "FAILED:"; tail -5 "$log"; }
}

# med CONFIG MALLOC_OPT FIELD: median over the runs of a number of the line
# (FIELD: the word before it: "MB/s", "us/msg", "rank0", "rank1")
med() {
    cat "$work/$1$2".* | awk -v f="$3" '/^mpi_reg_bench:/ {
        for (i = 1; i < NF; ++i) if ($i == f) v[n++] = $(i + 1)
    } END {
        if (n == 0) { print "?"; exit }
        for (i = 0; i < n; ++i) for (j = i + 1; j < n; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
    }'
}

for mopt in "" -m; do
    if [ -z "$mopt" ]; then echo "=== glibc's default allocator (freed blocks come back)"
    else echo "=== -m: every free() munmap()s, every malloc() mmap()s"; fi
    for i in $(seq 1 "$repeat"); do
        for cfg in stock ours rcache; do one "$cfg" "$mopt" "$i"; done
    done
    echo "  our cache's statistics (last rcache run):"
    grep -h "^\[ucm_rcache\]" "$work/rcache$mopt.$repeat" | sed 's/^/    /'
    printf '  %-7s %9s %9s %12s %12s\n' median MB/s us/msg cpu_us_rank0 cpu_us_rank1
    for cfg in stock ours rcache; do
        printf '  %-7s %9s %9s %12s %12s\n' $cfg "$(med $cfg "$mopt" MB/s)" "$(med $cfg "$mopt" us/msg)" \
            "$(med $cfg "$mopt" rank0)" "$(med $cfg "$mopt" rank1)"
    done
    awk -v a="$(med rcache "$mopt" MB/s)" -v b="$(med stock "$mopt" MB/s)" \
        -v c0="$(med rcache "$mopt" rank0)" -v s0="$(med stock "$mopt" rank0)" \
        -v c1="$(med rcache "$mopt" rank1)" -v s1="$(med stock "$mopt" rank1)" 'BEGIN {
        if (b > 0 && s0 > 0 && s1 > 0)
            printf "  rcache/stock: throughput x%.2f, cpu per message rank0 x%.2f rank1 x%.2f\n", a / b, c0 / s0, c1 / s1
    }'
done
