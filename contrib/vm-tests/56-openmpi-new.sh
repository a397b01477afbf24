#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-mtu: 9000
# The Open MPI stage (40-openmpi.sh) on the newer kernel, as 55-stock-new.sh
# does for the stock UCX stage (same boot, the 6.1 boot's MTU).
#   bash 56-openmpi-new.sh TOP BUILD_DIR      (run by contrib/run-vm-tests.sh)
exec bash "$1/contrib/vm-tests/55-stock-new.sh" "$1" "$2" 40-openmpi
