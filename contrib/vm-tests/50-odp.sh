#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vm-kernel: new
# vm-mtu: 9000
# On-demand paging end to end (test/uct/test_uct_odp.cc), on the newer
# kernel whose rxe has explicit ODP (run-vm-tests.sh boots it for the
# scripts marked "vm-kernel: new" above).  No memory events at all
# (UCX_MEM_EVENTS=no): with UCX_IB_REG_METHODS=odp a held handle must reach
# the new pages after munmap+mmap, MAP_FIXED, mremap, shm re-attach,
# MADV_DONTNEED and truncation; with =direct (pinned) it must not (the
# negative control).  The same with two threads replacing memory while the
# other transfers, and across fork (parent and child).  Then the
# registration cost of pinned vs odp, and the first transfer on cold pages.
# Implicit ODP (test_uct_odp_implicit.cc): rxe lacks it, so its failure
# path (UCX_IB_ODP_IMPLICIT=yes) and the detection run here; its success
# path skips.
# rxe's ODP (docs/internals-odp.md) writes pages it mapped read-only in
# place (copy-on-write pages, the kernel's zero page): asserted to be so
# (UCT_TEST_ODP_COW_BUG, UCT_TEST_ODP_ZERO_PAGE_BUG), so that a fixed kernel
# is noticed.  It also ignores the offset inside a page
# (uct_odp_rxe.sub_page_offset proves it is still so): hence the 4 KiB path
# MTU of this boot (vm-mtu above), with which whole-page transfers of
# page-aligned buffers never start a packet inside a page.
#   bash 50-odp.sh TOP BUILD_DIR      (run by contrib/run-vm-tests.sh)
set -euo pipefail
top=$1
build=$2
dir="$build/test/uct"
if [ ! -x "$dir/gtest_uct" ] || [ ! -x "$dir/uct_ib_bench_reg" ]; then
    echo "50-odp: building gtest_uct and uct_ib_bench_reg in $dir"
    make -s -C "$dir" gtest_uct uct_ib_bench_reg
fi
export RXE_VM_DEV=${RXE_VM_DEV:-rxe0} UCX_MEM_EVENTS=no
echo "50-odp: kernel $(uname -r), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1)"
rc=0
run() { # NAME ENV.. -- gtest args
    local name=$1
    shift
    local -a env=()
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    if ! timeout -k 5 240 env "${env[@]}" "$dir/gtest_uct" --gtest_brief=1 "$@"; then
        echo "50-odp: $name FAILED"
        rc=1
    fi
}
# the whole suite as 10-uct runs it on 6.1 (default methods, events on),
# less the implicit-ODP tests run next
run default-suite UCX_MEM_EVENTS=yes -- --gtest_filter='*:-uct_odp_implicit*'
# implicit ODP (rxe has none): one detection line saying absent; =yes makes
# the md attempt it, the device refuse it, one line, explicit MRs moving
# the right data; try/no: no attempt; unset means no; malformed values: one
# error line.  Every run here names its value or wants it off, so the
# default (no; it was try) changes nothing on rxe, which has no implicit ODP
run implicit -- --gtest_filter='uct_odp_implicit*'
# detection (the diag lines say what the device has and why prefetch is off)
run caps UCX_LOG_LEVEL=diag UCX_IB_REG_METHODS=odp UCT_TEST_EXPECT_ODP=explicit \
    -- --gtest_filter='uct_odp_caps.*:uct_md.odp_unavailable_falls_back_to_direct'
run rxe-offset-bug UCX_IB_REG_METHODS=odp UCT_TEST_ODP_OFFSET_BUG=expected \
    -- --gtest_filter='uct_odp_rxe.sub_page_offset'
run odp UCX_IB_REG_METHODS=odp UCT_TEST_ODP_COW_BUG=expected \
    -- --gtest_filter='*uct_odp_held*:uct_odp_fault.*:uct_odp_threads.*'
run pinned-control UCX_IB_REG_METHODS=direct \
    -- --gtest_filter='*uct_odp_held*:uct_odp_fault.fork_*:uct_odp_threads.*'
# last of the tests: it writes the kernel's zero page through the NIC (and
# zeros back at once) while rxe has that defect
run rxe-zero-page UCX_IB_REG_METHODS=odp UCT_TEST_ODP_ZERO_PAGE_BUG=expected \
    -- --gtest_filter='uct_odp_rxe.zero_page_write'
echo "50-odp: registration cost, pinned vs odp (times vary a lot under TCG)"
timeout -k 5 120 "$dir/uct_ib_bench_reg" --odp "$RXE_VM_DEV:1" 3 || {
    echo "50-odp: uct_ib_bench_reg --odp failed (exit $?)"
    rc=1
}
echo "50-odp: first transfer on never-touched pages vs warm, pinned vs odp"
timeout -k 5 180 "$dir/uct_ib_bench_reg" --first "$RXE_VM_DEV:1" 3 || {
    echo "50-odp: uct_ib_bench_reg --first failed (exit $?)"
    rc=1
}
exit $rc
