#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# One command on a fresh Debian bookworm machine: install the packages, build,
# then show the hooks at work: the live event self-test of ucm_info and the
# hook benchmark table (ours vs no hooks vs Debian's UCX 1.13 libucm), the cost of
# the userfaultfd monitor (ucm_bench_uffd, against no monitor), then
# the registration-cache benchmark (ours vs Debian's UCX 1.13 rcache vs no
# cache, same run; --quick sizes).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/deps.sh"
"$top/contrib/build.sh" "$top/build"
"$top/build/src/tools/ucm_info" -a
if [ -x "$top/build/src/tools/ucm_bench_hooks" ]; then
    "$top/build/src/tools/ucm_bench_hooks" "$@"
fi
if [ -x "$top/build/src/tools/ucm_bench_uffd" ]; then
    "$top/build/src/tools/ucm_bench_uffd" --quick
fi
if [ -x "$top/build/src/tools/ucs_bench_rcache" ]; then
    "$top/build/src/tools/ucs_bench_rcache" --quick
fi
