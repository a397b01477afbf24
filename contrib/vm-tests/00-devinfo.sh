#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Sanity: the soft-RoCE device is there and active.
set -euo pipefail
ibv_devinfo -d "$RXE_VM_DEV" | grep -q PORT_ACTIVE
echo "rxe device $RXE_VM_DEV active, RoCE v2 IPv4 GID index $RXE_VM_GID_INDEX"
