#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# 'make check' entry of test/abi/run-abi.sh (ucm_global_opts as UCX 1.18
# and 1.22 components see it); UCM_ABI_BUILD_DIR names the build tree.
exec "$(dirname "$0")/../abi/run-abi.sh"
