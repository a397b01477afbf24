#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-mtu: 9000
# Debian's UCX 1.13 stage (30-stock-ucx.sh; 56-openmpi-new.sh does the same
# for 40-openmpi.sh) again, on the newer kernel (its rxe has ODP and other
# changes since 6.1), in the boot that 50-odp.sh uses (same kernel/MTU lines
# above: no boot of its own).  That boot's netdev has a 9000-byte MTU for
# 50-odp; the stage runs with the 6.1 boot's 1500 (rxe follows a netdev MTU
# change at once), so that what differs from its 6.1 run is the kernel's
# doing, and the MTU is put back afterwards.  One stage per script, so that
# each has the driver's time limit of its own.
#   bash 55-stock-new.sh TOP BUILD_DIR [STAGE]   (STAGE: 30-stock-ucx)
set -uo pipefail
top=$1
build=$2
stage=${3:-30-stock-ucx}
dev=${RXE_VM_DEV:-rxe0}
netdev=${RXE_VM_NETDEV:?}
active_mtu() {
    ibv_devinfo -d "$dev" | awk '/active_mtu:/ {print $2; exit}'
}
old_mtu=$(cat "/sys/class/net/$netdev/mtu")
ip link set dev "$netdev" mtu 1500 || { echo "$stage-new: cannot set the MTU"; exit 1; }
trap 'ip link set dev "$netdev" mtu "$old_mtu"' EXIT
for try in $(seq 1 20); do
    [ "$(active_mtu)" = 1024 ] && break
    sleep 0.2
done
echo "$stage-new: kernel $(uname -r), $netdev MTU 1500 (was $old_mtu), $dev active_mtu $(active_mtu)"
bash "$top/contrib/vm-tests/$stage.sh" "$top" "$build"
