#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run the libucm test binary in one configuration.
#   run_gtest.sh FILE.mode [gtest options]
# FILE.mode sets HOOK_MODE (value of UCX_MEM_MMAP_HOOK_MODE) and PRELOAD
# (an allocator for LD_PRELOAD, or empty).  Exit 77 (skip) if the allocator
# is not installed.  GTEST_UCM: the binary (default ./gtest_ucm);
# UCM_GTEST_TIMEOUT: seconds before the run is aborted as hung (default 240).
set -e
modefile=$1
shift
HOOK_MODE=
PRELOAD=
. "$modefile"

bin=${GTEST_UCM:-./gtest_ucm}
if [ -n "$PRELOAD" ] && [ ! -e "$PRELOAD" ]; then
    echo "SKIP: $PRELOAD is not installed"
    exit 77
fi
if [ -n "$PRELOAD" ] && [ "${UCM_GTEST_SANITIZERS:-no}" = yes ]; then
    echo "SKIP: AddressSanitizer owns malloc: $PRELOAD cannot be preloaded" \
         "into the sanitizer build (the plain build runs this configuration)"
    exit 77
fi

UCX_MEM_MMAP_HOOK_MODE=$HOOK_MODE
export UCX_MEM_MMAP_HOOK_MODE
echo "== $(basename "$modefile" .mode): UCX_MEM_MMAP_HOOK_MODE=$HOOK_MODE" \
     "LD_PRELOAD=${PRELOAD:-(none)}"
set +e
if [ -n "$PRELOAD" ]; then
    LD_PRELOAD=$PRELOAD timeout -k 10 "${UCM_GTEST_TIMEOUT:-240}" "$bin" "$@"
else
    timeout -k 10 "${UCM_GTEST_TIMEOUT:-240}" "$bin" "$@"
fi
rc=$?
[ $rc -eq 124 ] && echo "FAIL: the suite did not finish in time (hang?)"
exit $rc
