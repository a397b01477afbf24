#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Verbs memory domain and RC transport tests (test/uct/gtest_uct) on the
# VM's soft-RoCE device, then the registration benchmark.
#   bash 10-uct.sh TOP BUILD_DIR      (run by contrib/run-vm-tests.sh)
# The programs are check_PROGRAMS: built here if the build dir lacks them
# ("make -C BUILD_DIR/test/uct gtest_uct uct_ib_bench_reg" on the host is
# faster).  UCT_GTEST_FILTER narrows the tests.
set -euo pipefail
top=$1
build=$2
dir="$build/test/uct"
if [ ! -x "$dir/gtest_uct" ] || [ ! -x "$dir/uct_ib_bench_reg" ]; then
    echo "10-uct: building gtest_uct and uct_ib_bench_reg in $dir"
    make -s -C "$dir" gtest_uct uct_ib_bench_reg
fi
export RXE_VM_DEV=${RXE_VM_DEV:-rxe0}
rc=0
timeout -k 5 240 "$dir/gtest_uct" --gtest_filter="${UCT_GTEST_FILTER:-*}" \
    --gtest_brief=0 || rc=$?
if [ $rc -ne 0 ]; then
    echo "10-uct: gtest_uct failed (exit $rc; 124 = timed out)"
fi
echo "10-uct: registration benchmark (times vary a lot under TCG)"
timeout -k 5 90 "$dir/uct_ib_bench_reg" "$RXE_VM_DEV:1" 32 3 || {
    echo "10-uct: uct_ib_bench_reg failed (exit $?)"
    rc=1
}
exit $rc
