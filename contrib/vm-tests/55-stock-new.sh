#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-mtu: 9000
# Debian's UCX 1.13 (30-stock-ucx.sh) and Open MPI (40-openmpi.sh) stages
# again, on the newer kernel (its rxe has ODP and other changes since 6.1),
# in the boot that 50-odp.sh uses (same kernel/MTU lines above: no boot of
# its own).  That boot's netdev has a 9000-byte MTU for 50-odp; these
# stages run with the 6.1 boot's 1500 (rxe follows a netdev MTU change at
# once), so that what differs from their 6.1 run is the kernel's doing,
# and the MTU is put back afterwards.
#   bash 55-stock-new.sh TOP BUILD_DIR      (run by contrib/run-vm-tests.sh)
set -uo pipefail
top=$1
build=$2
dev=${RXE_VM_DEV:-rxe0}
netdev=${RXE_VM_NETDEV:?}
active_mtu() {
    ibv_devinfo -d "$dev" | awk '/active_mtu:/ {print $2; exit}'
}
old_mtu=$(cat "/sys/class/net/$netdev/mtu")
ip link set dev "$netdev" mtu 1500 || { echo "55-stock-new: cannot set the MTU"; exit 1; }
trap 'ip link set dev "$netdev" mtu "$old_mtu"' EXIT
for try in $(seq 1 20); do
    [ "$(active_mtu)" = 1024 ] && break
    sleep 0.2
done
echo "55-stock-new: kernel $(uname -r), $netdev MTU 1500 (was $old_mtu), $dev active_mtu $(active_mtu)"
rc=0
for s in 30-stock-ucx 40-openmpi; do
    t0=$SECONDS
    if bash "$top/contrib/vm-tests/$s.sh" "$top" "$build"; then
        echo "55-stock-new: $s on $(uname -r): ok ($((SECONDS - t0)) s)"
    else
        echo "55-stock-new: $s on $(uname -r): FAILED ($((SECONDS - t0)) s)"
        rc=1
    fi
done
exit $rc
