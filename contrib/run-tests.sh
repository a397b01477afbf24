#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite: what CI runs (.ci/run) and what the README tells
# users to run.
#
#   contrib/run-tests.sh [--install-deps] [--quick] [--no-two-nodes|--two-nodes]
#                        [--debian13] [--host-only] [--ucx-newest]
#                        [--debian13-vm] [--cuda-module]
#
# Stages (each prints its own summary; the script fails if one fails):
#   0. format: every tracked C/C++ source as .clang-format has it
#   1. build (warnings are errors) and 'make check': the gtest suite in bistro
#      and reloc modes, and with jemalloc and tcmalloc preloaded
#   2. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#      and the debug assertions (--enable-debug: the cache's lock owner in
#      every *_locked function)
#   3. the suite under valgrind (memcheck)
#   4. smoke run of the tools: ucm_info self-test, quick hook benchmark,
#      each tool's degraded lines as nobody / under valgrind (2 min)
#   4a. make install to /usr/local beside Debian's UCX and Open MPI, in a
#      throwaway root: their tools run on it (contrib/install-check.sh, root,
#      about 40 s; skipped with the reason otherwise); except with --quick
#      (or INSTALL_CHECK_DEB=0) it also builds the Debian packages, lintians
#      them and checks them installed in a throwaway root (1-5 min more)
#   4b. UCX 1.13.1's GPU module libucm_cuda on our libucm, built from
#      Debian's source against a test-only fake CUDA toolkit
#      (contrib/ucx-cuda-module.sh, 2-3 min; off by default to keep the
#      command under 45 minutes: --cuda-module or RUN_UCX_CUDA_MODULE=1
#      runs it; a missing prerequisite skips it with the reason)
#   4c. UCX 1.13.1's own gtest cases of libucm, the registration cache and
#      the memory-type cache, on UCX's libucm and on ours
#      (contrib/ucx-testsuite.sh: fetches Debian's ucx source, 3-5 min on 2
#      cores; fails on a case that passes on UCX's libucm only, except those
#      in contrib/ucx-testsuite/known-failures.txt; not with --quick;
#      SKIP_UCX_TESTSUITE=1 skips it, UCX_TESTSUITE_WORKDIR=DIR keeps and
#      reuses its UCX build there)
#   4d. stages 0-4 again in a Debian 13 (trixie) userland: gcc 14, glibc
#      2.41, Debian's UCX 1.18.1 for the compatibility tests
#      (contrib/root-tests.sh in contrib/debian-root.sh's cached root, made
#      on first use with debootstrap from the host's archive, about 2-6 min
#      once; the stage is not yet timed idle: build+check 12.5 min and ASan
#      14 min under load 7-18; --quick leaves out
#      ASan and valgrind); off by default until it passes whole and fits
#      the 45 minutes: --debian13 (or RUN_DEBIAN13=1) runs it; a host that
#      is not Debian 12, not root, or cannot fetch trixie skips it (one
#      line each)
#   4e. the same with Debian 13's UCX 1.18.1, built from the upstream
#      release archive (ucx-1.18.1.tar.xz in $UCX_SRC_DIR, else in
#      ../shared/ucx-src beside the checkout; skipped with the reason when
#      absent), 7-10 min on 2 cores; --ucx-newest (or UCX_TESTSUITE_NEWEST=1)
#      adds upstream's newest, 1.22.0, as a stage of its own (7-10 min
#      more); not with --quick; SKIP_UCX_TESTSUITE_NEW=1 skips both;
#      with UCX_TESTSUITE_WORKDIR their builds go to DIR/ucx-RELEASE
#   4f. instructions and simulated cache misses per operation of the hot
#      rows (hooked calls, cache hit/miss) under callgrind, against
#      contrib/bench-counts/baseline.txt: a row of ours that grows by more
#      than 10% fails (contrib/bench-counts.sh, about 1 min; not with
#      --quick; skipped with the reason when valgrind is missing or the
#      baseline was counted with another gcc/glibc/valgrind)
#   5. the verbs tests inside a soft-RoCE VM (contrib/run-vm-tests.sh, needs
#      root for the VM setup; skipped with the reason otherwise, or with
#      SKIP_VM_TESTS=1), then the stage across two VMs
#      (contrib/vm-tests/60-two-nodes.sh, 3-9 min more, 2 x 2 GiB guest
#      memory); --no-two-nodes (or VM_TEST_NODES=1) leaves that out, and so
#      does --quick unless --two-nodes (or VM_TEST_NODES=2) is given;
#      --debian13-vm (or VM_TEST_DEBIAN13=1) adds one boot whose root is a
#      Debian 13 userland (contrib/vm-tests/7*: Debian 13's ucx_perftest,
#      Open MPI 5.0.7 and MPICH 4.2 on UCX 1.18, our tree built inside that
#      userland; 6-9 minutes more, off by default)
# --host-only runs stages 0-4 only (what stage 4d runs inside the root).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
install_deps=0
quick=0
host_only=0
for arg in "$@"; do
    case "$arg" in
    --install-deps) install_deps=1 ;;
    --quick) quick=1 ;;
    --two-nodes) export VM_TEST_NODES=2 ;;
    --no-two-nodes) export VM_TEST_NODES=1 ;;
    --debian13) export RUN_DEBIAN13=1 ;;
    --no-debian13) export RUN_DEBIAN13=0 ;;
    --host-only) host_only=1 ;;
    --ucx-newest) export UCX_TESTSUITE_NEWEST=1 ;;
    --debian13-vm) export VM_TEST_DEBIAN13=1 ;;
    --cuda-module) export RUN_UCX_CUDA_MODULE=1 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
    esac
done
[ $quick -eq 1 ] && export VM_TEST_NODES=${VM_TEST_NODES:-1}

[ $install_deps -eq 1 ] && "$top/contrib/deps.sh"

failed=()
times=() # "SECONDS  status  name" of each stage, for the summary
stage() {
    local name=$1 st=ok; shift
    echo "=== $name"
    local t0=$SECONDS
    "$@" || st=FAILED
    [ $st = ok ] || failed+=("$name")
    echo "=== $name: $st ($((SECONDS - t0)) s)"
    times+=("$(printf '%6d s  %-6s  %s' $((SECONDS - t0)) $st "$name")")
}

# Build and 'make check' in a build tree, then what it skipped and why.
check_in() {
    local builddir=$1 rc; shift
    # the test programs built on every core first ('make check' alone
    # compiles them one at a time), then the tests run one at a time
    "$top/contrib/build.sh" "$builddir" "$@" &&
        make -C "$builddir" -j"$(nproc)" check TESTS= >/dev/null &&
        make -C "$builddir" check
    rc=$?
    echo "--- skipped in $builddir (contrib/skip-summary.sh):"
    "$top/contrib/skip-summary.sh" "$builddir" || true
    return $rc
}

tools_smoke() {
    local b=$top/build
    "$b/src/tools/ucm_info" -e &&
        UCX_MEM_MMAP_HOOK_MODE=reloc "$b/src/tools/ucm_info" -e >/dev/null &&
        if [ -x "$b/src/tools/ucm_bench_hooks" ]; then
            "$b/src/tools/ucm_bench_hooks" --quick
        fi &&
        "$b/src/tools/ucm_bench_uffd" --quick &&
        "$top/test/tools/degraded.sh" "$b"
}

# The stock-ABI preload (libucm_rcache.so.0) of the sanitizer build under
# the uninstrumented stock-UCX test of build/ (libasan preloaded first; the
# compat tests are not built in build-san), when Debian's UCX is there.
san_stock_abi() {
    if [ ! -x "$top/build/test/compat/compat_stock_abi" ]; then
        echo "stock-ABI test under ASan: skipped: compat_stock_abi not built (no Debian UCX headers)"
        return 0
    fi
    COMPAT_SAN_BUILD="$top/build-san" \
        make -C "$top/build/test/compat" check TESTS=compat_stock_abi
}

# Every tracked C and C++ source formatted as .clang-format says (the
# Debian clang-format of the machine; contrib/format.sh fixes them).
format_check() {
    if ! command -v clang-format >/dev/null; then
        echo "format check: skipped: clang-format not installed (contrib/deps.sh installs it)"
        return 0
    fi
    local rc=0
    "$top/contrib/format.sh" --check || rc=$?
    [ $rc -eq 77 ] && return 0 # another clang-format major: it said so
    return $rc
}

san_check() {
    check_in "$top/build-san" --enable-sanitizers --enable-debug &&
        san_stock_abi
}

stage "format (.clang-format)" format_check
stage "build + check (bistro, reloc, jemalloc, tcmalloc)" check_in "$top/build"
if [ $quick -eq 0 ]; then
    stage "ASan+UBSan build + check" san_check
    stage "valgrind" make -C "$top/build" check-valgrind
fi
stage "tools smoke (ucm_info, benchmark)" tools_smoke

# the summary, and the end when only the host stages were asked for
finish() {
    echo "=== stage times (total $SECONDS s; the bar is 2700 s)"
    printf '%s\n' "${times[@]}"
    if [ ${#failed[@]} -gt 0 ]; then
        echo "FAILED stages: ${failed[*]}"
        exit 1
    fi
    echo "all stages passed"
    exit 0
}
[ $host_only -eq 1 ] && finish

# the counts of the hot rows against the baseline (stage 4f above); exit 77
# is a skip that the script explained
bench_counts() {
    local rc=0
    "$top/contrib/bench-counts.sh" --build "$top/build" --check || rc=$?
    [ $rc -eq 77 ] && return 0
    return $rc
}
if [ $quick -eq 0 ]; then
    stage "instruction counts of the hot rows (callgrind)" bench_counts
fi

# make install beside Debian's UCX (stage 4a above); exit 77 is a missing
# prerequisite, reported as a skip.
install_check() {
    local rc=0
    local deb=()
    [ "${INSTALL_CHECK_DEB:-$((1 - quick))}" = 1 ] && deb=(--deb)
    "$top/contrib/install-check.sh" "${deb[@]}" "$top/build" || rc=$?
    [ $rc -eq 77 ] && return 0
    return $rc
}
stage "make install beside Debian's UCX (throwaway root)" install_check

# exit status 77 of the script: a prerequisite is missing (it said which)
ucx_cuda_module() {
    local rc=0
    if [ "${RUN_UCX_CUDA_MODULE:-0}" != 1 ] ||
        [ "${SKIP_UCX_CUDA_MODULE:-0}" = 1 ]; then
        echo "skipped: off by default (2-3 min); --cuda-module runs it"
        return 0
    fi
    "$top/contrib/ucx-cuda-module.sh" || rc=$?
    [ $rc -eq 77 ] && return 0
    return $rc
}
if [ $quick -eq 0 ]; then
    stage "UCX 1.13.1 libucm_cuda on our libucm (fake CUDA)" ucx_cuda_module
fi

# UCX's own test cases on our libucm (stage 4c above); exit 77 is a missing
# prerequisite, reported as a skip.
# ucx_testsuite [RELEASE]: Debian's 1.13.1 without RELEASE, else the
# upstream release archive.
ucx_testsuite() {
    local rc=0 rel=${1:-} skipvar=SKIP_UCX_TESTSUITE args=()
    [ -z "$rel" ] || skipvar=SKIP_UCX_TESTSUITE_NEW
    if [ "${!skipvar:-0}" = 1 ]; then
        echo "skipped: $skipvar=1"
        return 0
    fi
    if [ -n "$rel" ]; then
        args=(--release "$rel")
        [ -z "${UCX_TESTSUITE_WORKDIR:-}" ] ||
            args+=(--workdir "$UCX_TESTSUITE_WORKDIR/ucx-$rel")
    elif [ -n "${UCX_TESTSUITE_WORKDIR:-}" ]; then
        args=(--workdir "$UCX_TESTSUITE_WORKDIR")
    fi
    "$top/contrib/ucx-testsuite.sh" --ucm "$top/build/src/ucm/.libs/libucm.so.0" \
        --jobs "$(nproc)" \
        --known-failures "$top/contrib/ucx-testsuite/known-failures.txt" \
        "${args[@]}" || rc=$?
    if [ $rc -eq 77 ]; then
        echo "skipped: a prerequisite is missing (the reason is above)"
        return 0
    fi
    return $rc
}
if [ $quick -eq 0 ]; then
    stage "UCX 1.13.1 gtest on our libucm (UCM, rcache, memtype)" ucx_testsuite
    # Debian 13's release by default; upstream's newest on request (both
    # together would cost 15-20 minutes of the test command's 45).
    stage "UCX 1.18.1 gtest on our libucm (UCM, rcache, memtype)" ucx_testsuite 1.18.1
    if [ "${UCX_TESTSUITE_NEWEST:-0}" = 1 ]; then
        stage "UCX 1.22.0 gtest on our libucm (UCM, rcache, memtype)" ucx_testsuite 1.22.0
    fi
fi

# Stages 0-4 in a Debian 13 userland (4d above); exit 77 is a skip whose
# reason debian-root.sh printed.
debian13() {
    local rc=0 q=()
    if [ "${RUN_DEBIAN13:-0}" != 1 ]; then
        echo "skipped: off by default (known failures inside Debian 13, docs/internals-debian13.md); --debian13 runs it"
        return 0
    fi
    if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" != bookworm ]; then
        echo "skipped: the host is not Debian 12 (bookworm); on Debian 13 the stages above are this stage"
        return 0
    fi
    [ $quick -eq 1 ] && q=(--quick)
    "$top/contrib/root-tests.sh" --suite trixie "${q[@]}" || rc=$?
    [ $rc -eq 77 ] && return 0
    return $rc
}
stage "Debian 13 userland: stages 0-4 (gcc 14, glibc 2.41, UCX 1.18.1)" debian13

vm_tests() {
    if [ "${SKIP_VM_TESTS:-0}" = 1 ]; then
        echo "skipped: SKIP_VM_TESTS=1"
    elif [ "$(id -u)" -ne 0 ]; then
        echo "skipped: the soft-RoCE VM needs root (qemu, kernel fetch); run as root or see contrib/rxe-vm/README.md"
    else
        "$top/contrib/run-vm-tests.sh" "$top/build"
    fi
}
stage "soft-RoCE VM: verbs tests" vm_tests
finish
