#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run the tests that need a verbs device inside one soft-RoCE VM boot
# (contrib/rxe-vm/rxe-vm.sh): every contrib/vm-tests/NN-*.sh in order.
#
#   contrib/run-vm-tests.sh BUILD_DIR [PATTERN]
#
# BUILD_DIR is a configured and built tree (contrib/build.sh); it is shared
# read-write with the guest.  PATTERN (a glob, default '*') selects scripts.
# Each script runs as "bash SCRIPT TOP BUILD_DIR" with its own time limit
# (VM_TEST_TIMEOUT seconds, default 600 or the script's "# vm-timeout: N")
# and prints its own results; this
# driver prints one line per script and exits 1 if any failed.  The host
# needs root (the VM setup installs qemu and fetches Debian's kernel once).
# Scripts run on the host release's kernel (6.1), one boot for all; those
# marked "# vm-kernel: new" (and/or "# vm-mtu: N") in one more boot per
# such combination, of rxe-vm.sh's newer kernel (RXE_VM_KERNEL=new), or are
# reported SKIPPED with the reason when that kernel cannot be fetched.
# Scripts marked "# vm-root: debian13" run in a boot of their own whose
# root file system is a Debian 13 userland (rxe-vm.sh's RXE_VM_ROOT:
# VM_TEST_DEBIAN13_ROOT, default contrib/debian-root.sh's cached trixie
# root where that script exists, else /var/cache/ucx-memhooks/trixie) instead of
# the host's "/", on the tree built inside that userland
# (VM_TEST_DEBIAN13_BUILD, default TOP/build-debian13; built or brought up
# to date here with contrib/root-build.sh); only with VM_TEST_DEBIAN13=1
# (contrib/run-tests.sh --debian13-vm), reported SKIPPED with the reason
# otherwise or when that root is missing.
# Scripts marked "# vm-nodes: 2" run on node1 of a boot of two VMs joined by
# one link (rxe-vm.sh --nodes 2; they reach node2 with ssh), one boot for all
# of them, after the single-VM boots; VM_TEST_NODES=1 (contrib/run-tests.sh
# --no-two-nodes or --quick) leaves them out, reported SKIPPED with that
# reason.  A script over its time limit is killed with everything it
# started and reported FAILED (timed out); a boot is stopped (its qemus
# killed, its network namespace gone) when this driver is interrupted.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd -P)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [PATTERN]" >&2; exit 2; }
build=$(cd "$1" && pwd -P)
pattern=${2:-*}

# The boot a script needs, "KERNEL/MTU/NODES/ROOT": lines "# vm-kernel: new"
# (rxe-vm.sh's RXE_VM_KERNEL), "# vm-mtu: 9000" (RXE_VM_MTU), "# vm-nodes: 2"
# (rxe-vm.sh --nodes) and "# vm-root: debian13" (RXE_VM_ROOT), by default
# 6.1, 1500, 1 and host.
script_boot() {
    awk '/^# vm-kernel:/ && !k {k = $3} /^# vm-mtu:/ && !m {m = $3} /^# vm-nodes:/ && !n {n = $3}
         /^# vm-root:/ && !r {r = $3}
         END {print (k ? k : "6.1") "/" (m ? m : "1500") "/" (n ? n : "1") "/" (r ? r : "host")}' "$1"
}

# skip_boot BOOT REASON...: every selected script of BOOT reported SKIPPED
# (fail_boot: FAILED) with REASON
boot_report() {
    local s b=$1 word=$2
    shift 2
    for s in "$top"/contrib/vm-tests/$pattern.sh; do
        [ -f "$s" ] && [ "$(script_boot "$s")" = "$b" ] || continue
        echo "=== vm: $(basename "$s" .sh): $word ($*)"
    done
}
skip_boot() { boot_report "$1" SKIPPED "${@:2}"; }
fail_boot() { boot_report "$1" FAILED "${@:2}"; }

if [ "${RXE_VM:-0}" != 1 ]; then
    export RXE_VM_EXTRA_PKGS="${RXE_VM_EXTRA_PKGS:-ucx-utils perftest openmpi-bin libopenmpi-dev}"
    export RXE_VM_RW_DIRS="$build${RXE_VM_RW_DIRS:+:$RXE_VM_RW_DIRS}"
    export RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-1500}"
    cd "$top"
    # one VM boot per kernel/MTU that the selected scripts need
    boots=$(for s in "$top"/contrib/vm-tests/$pattern.sh; do
                [ -f "$s" ] && script_boot "$s"; done | awk '!seen[$0]++')
    rc=0
    klog=$(mktemp)
    vmpid=
    trap 'rm -f "$klog"' EXIT
    # interrupted: stop the boot in progress (rxe-vm.sh kills its qemus)
    stop_vm() {
        echo "vm-tests: interrupted (signal $1); stopping the VM run" >&2
        if [ -n "$vmpid" ]; then
            kill -TERM "$vmpid" 2>/dev/null || true
            for _ in $(seq 30); do kill -0 "$vmpid" 2>/dev/null || break; sleep 1; done
            kill -KILL "$vmpid" 2>/dev/null || true
        fi
        exit $((128 + $2))
    }
    trap 'stop_vm TERM 15' TERM
    trap 'stop_vm INT 2' INT
    trap 'stop_vm HUP 1' HUP
    for b in $boots; do
        IFS=/ read -r k m n root <<<"$b"
        if [ "$n" -gt "${VM_TEST_NODES:-2}" ]; then
            skip_boot "$b" "needs $n VMs; VM_TEST_NODES is ${VM_TEST_NODES:-2}: --no-two-nodes" \
                      "or --quick of contrib/run-tests.sh"
            continue
        fi
        # the root file system and the build tree of this boot
        rootdir=/ bbuild=$build
        case $root in
        host) ;;
        debian13)
            if [ "${VM_TEST_DEBIAN13:-0}" != 1 ]; then
                skip_boot "$b" "the Debian 13 boot runs with VM_TEST_DEBIAN13=1 or" \
                          "contrib/run-tests.sh --debian13-vm"
                continue
            fi
            rootdir=${VM_TEST_DEBIAN13_ROOT:-}
            # the cached root of contrib/debian-root.sh where there is one
            if [ -z "$rootdir" ] && [ -f "$top/contrib/debian-root.sh" ]; then
                rootdir=$(bash "$top/contrib/debian-root.sh" --suite trixie --setup 2>"$klog" |
                          tail -n 1) || rootdir=
            fi
            rootdir=${rootdir:-/var/cache/ucx-memhooks/trixie}
            bbuild=${VM_TEST_DEBIAN13_BUILD:-$top/build-debian13}
            if [ ! -x "$rootdir/bin/bash" ]; then
                skip_boot "$b" "no Debian 13 userland at $rootdir (VM_TEST_DEBIAN13_ROOT)"
                continue
            fi
            echo "vm-tests: building the tree in $rootdir: $bbuild"
            if ! bash "$top/contrib/root-build.sh" "$rootdir" "$bbuild" > "$klog" 2>&1; then
                tail -n 30 "$klog"
                fail_boot "$b" "the build in $rootdir failed"
                rc=1
                continue
            fi
            bbuild=$(cd "$bbuild" && pwd -P)
            export RXE_VM_RW_DIRS="$RXE_VM_RW_DIRS:$bbuild"
            ;;
        *)
            skip_boot "$b" "unknown '# vm-root: $root' (known: debian13)"
            continue ;;
        esac
        if [ "$k" != 6.1 ] && ! RXE_VM_KERNEL=$k bash "$top/contrib/rxe-vm/rxe-vm.sh" --setup \
                > "$klog" 2>&1; then
            skip_boot "$b" "kernel '$k' cannot be set up: $(tail -n 1 "$klog")"
            continue
        fi
        # exit 125: the VM or rxe setup failed (e.g. a guest kernel panic under
        # TCG, seen once in ~10 boots of 6.18): one more boot
        for try in 1 2; do
            r=0
            # in the background, so that a signal reaches the trap above at once
            RXE_VM_KERNEL=$k RXE_VM_MTU=$m RXE_VM_ROOT=$rootdir VM_TEST_BOOT=$b \
                bash "$top/contrib/rxe-vm/rxe-vm.sh" --nodes "$n" -- \
                bash "$top/contrib/run-vm-tests.sh" "$bbuild" "$pattern" &
            vmpid=$!
            wait $vmpid || r=$?
            vmpid=
            [ $r = 125 ] && [ $try = 1 ] || break
            echo "vm-tests: boot $b failed (exit 125); booting once more"
        done
        [ $r = 0 ] || rc=$r
    done
    exit $rc
fi

# inside the VM: the scripts of this boot
echo "vm-tests: device $RXE_VM_DEV, kernel $(uname -r), $(nproc) cpus," \
     "root $(. /etc/os-release && echo "$PRETTY_NAME")"
failed=()
for script in "$top"/contrib/vm-tests/$pattern.sh; do
    [ -f "$script" ] || continue
    [ "$(script_boot "$script")" = "${VM_TEST_BOOT:-6.1/1500/1/host}" ] || continue
    name=$(basename "$script" .sh)
    echo "=== vm: $name"
    t0=$SECONDS
    limit=$(awk '/^# vm-timeout:/ {print $3; exit}' "$script")
    if timeout -k 10 "${VM_TEST_TIMEOUT:-${limit:-600}}" bash "$script" "$top" "$build"; then
        echo "=== vm: $name: ok ($((SECONDS - t0)) s)"
    else
        rc=$?
        if [ $rc = 124 ] || [ $rc = 137 ]; then
            echo "=== vm: $name: FAILED (timed out: killed after its limit of" \
                 "${VM_TEST_TIMEOUT:-${limit:-600}} s, '# vm-timeout' or VM_TEST_TIMEOUT)"
        else
            echo "=== vm: $name: FAILED (exit $rc, $((SECONDS - t0)) s)"
        fi
        failed+=("$name")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "vm-tests FAILED: ${failed[*]}"
    exit 1
fi
echo "vm-tests: all passed"
