#!/bin/bash
# Test driver: runs one compatibility test against our libucm and Debian's
# stock UCX 1.13.  Usage: run-compat.sh TEST  (from 'make check').
set -u
test=$1
ours=$(cd "$(dirname "$0")/../../src/ucm/.libs" 2>/dev/null && pwd)/libucm.so.0
[ -n "${BUILD_UCM_DIR:-}" ] && ours=$BUILD_UCM_DIR/libucm.so.0
stock=${STOCK_UCM:-/usr/lib/x86_64-linux-gnu/libucm.so.0}
if [ ! -e "$stock" ]; then
    echo "SKIP: stock UCX libucm not installed at $stock (Debian package libucx0)"
    exit 77
fi
rc=0
for mode in bistro reloc; do
    echo "--- $test, UCX_MEM_MMAP_HOOK_MODE=$mode"
    case "$test" in
    *compat_stock_rcache)
        UCX_MEM_MMAP_HOOK_MODE=$mode LD_PRELOAD=$ours "$test" || rc=1 ;;
    *compat_two_libucm)
        UCX_MEM_MMAP_HOOK_MODE=$mode "$test" "$ours" "$stock"
        r=$?; [ $r -eq 77 ] && exit 77; [ $r -eq 0 ] || rc=1 ;;
    esac
done
exit $rc
