#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX 1.13.1's GPU memory-type module, libucm_cuda.so, on our libucm.so.0.
#
# A GPU build of stock UCX ships ucx/libucm_cuda.so.0: UCX's libucm loads it
# through libucs's module loader when a memory-type handler is set (libucs's
# memtype cache), its constructor links an installer into libucm's
# ucm_event_installer_list, and the installer patches the CUDA allocation
# functions (bistro or GOT, UCX_MEM_CUDA_HOOK_MODE) to raise MEM_TYPE_ALLOC
# and MEM_TYPE_FREE through libucm's internals.  This script builds that
# module from UCX's source against a TEST-ONLY fake CUDA toolkit
# (test/compat/fakecuda-toolkit: stand-in headers, host memory; no GPU, no
# CUDA needed) and runs test/compat/compat_ucx_cuda_module.c on three
# libucm.so.0's: UCX's own from the same build and Debian's installed one
# (the baselines, which must pass), and ours (what is tested).
#
#   contrib/ucx-cuda-module.sh [options]
#
#   --src DIR        UCX 1.13.1 source tree, copied (default: Debian's source
#                    package ucx=1.13.1-1 through apt-get source, with deb-src
#                    lines derived from the system's apt sources, in a private
#                    apt directory; the system's apt state is not touched;
#                    contrib/ucx-source.sh)
#   --ucm PATH       our libucm.so.0 (default: build/src/ucm/.libs/libucm.so.0)
#   --workdir DIR    source, builds and logs; kept and reused by the next run
#                    (default: build-ucx-cuda/ in the tree, git-ignored)
#   --jobs N         make -jN (default 2)
#   --quick          the cuda hook modes "bistro" and "reloc" only
#
# Runs, each a process of its own: libucm (ucx, debian, ours) x how the
# module comes in (dlopen: the program dlopen()s it; framework: libucm has
# libucs load it from UCX_MODULE_DIR, as in a UCX application) x
# UCX_MEM_MMAP_HOOK_MODE (reloc, bistro) x UCX_MEM_CUDA_HOOK_MODE (bistro,
# reloc, "bistro,reloc", none, and empty).  Debian's libucm runs only the
# dlopen way: it was built without CUDA, so its module list is empty.
#
# Exit status: 0 every check passed; 1 a check failed on our libucm; 2 bad
# usage; 3 the UCX build failed, the library swap did not take, or a
# baseline failed (then the test or the fake is wrong, not our libucm);
# 77 a prerequisite is missing (the reason is printed).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# UCX_VERSION, UCX_DEB_VERSION, ucx_source_fetch (Debian's source package)
# shellcheck source-path=SCRIPTDIR source=ucx-source.sh
. "$(dirname "$0")/ucx-source.sh"

readonly DEBIAN_UCM=/usr/lib/x86_64-linux-gnu/libucm.so.0

src_dir=""
ucm_lib=$top/build/src/ucm/.libs/libucm.so.0
workdir=$top/build-ucx-cuda
jobs=2
cuda_modes=("bistro" "reloc" "bistro,reloc" "none" "")

usage() {
    sed -n '/^#   contrib/,/^# Runs,/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --src) src_dir=${2:?}; shift ;;
    --ucm) ucm_lib=${2:?}; shift ;;
    --workdir) workdir=${2:?}; shift ;;
    --jobs) jobs=${2:?}; shift ;;
    --quick) cuda_modes=("bistro" "reloc") ;;
    -h | --help) usage ;;
    *) echo "unknown option $1" >&2; usage ;;
    esac
    shift
done

skip() {
    echo "ucx-cuda-module: skipped: $*"
    exit 77
}
die() {
    echo "ucx-cuda-module: error: $*" >&2
    exit 3
}
log() { echo "--- $*"; }

[ "$(uname -m)" = x86_64 ] ||
    skip "x86_64 only (the fake toolkit's bistro-patchable entry points are x86_64 code)"
for tool in autoreconf automake libtoolize gcc make objcopy nm timeout; do
    command -v $tool >/dev/null || skip "$tool not installed (contrib/deps.sh installs it)"
done
[ -f "$ucm_lib" ] || skip "our libucm not found at $ucm_lib (build first, or --ucm PATH)"
# Debian's libucm is a baseline of the 1.13.1 module: Debian 12's only
deb_ucx=$(dpkg-query -W -f '${Version}' libucx0 2>/dev/null) || deb_ucx=
case $deb_ucx in
"$UCX_VERSION"*) ;;
*) skip "Debian's UCX here is ${deb_ucx:-not installed}, not $UCX_VERSION (Debian 12's), the baseline of the $UCX_VERSION module" ;;
esac
[ -z "$src_dir" ] || [ -f "$src_dir/configure.ac" ] || die "--src $src_dir: no configure.ac there"

# Nothing from the caller's environment steers the build or the runs to a
# real CUDA toolkit or another libucm (this machine's LIBRARY_PATH names
# CUDA's stub libcuda.so, which would win over the fake).
unset LIBRARY_PATH CPATH C_INCLUDE_PATH LD_PRELOAD LD_LIBRARY_PATH
unset UCX_MEM_MMAP_HOOK_MODE UCX_MEM_CUDA_HOOK_MODE UCX_MODULE_DIR

mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
t_start=$SECONDS

# --- 1. the source ----------------------------------------------------------

ucx_src=$workdir/src
ucx_source_prepare "$workdir" "$src_dir" "$workdir/obj" || case $? in
    77) skip "no --src, and $UCX_SOURCE_ERROR" ;;
    *) die "$UCX_SOURCE_ERROR" ;;
    esac
[ -f "$ucx_src/src/ucm/cuda/cudamem.c" ] || die "$ucx_src has no src/ucm/cuda/cudamem.c"
t_src=$SECONDS

# --- 2. the fake toolkit and UCX's libucm, libucs and libucm_cuda -------------

toolkit=$workdir/toolkit
log "fake CUDA toolkit (test-only, not CUDA)"
"$top/test/compat/fakecuda-toolkit/make-toolkit.sh" "$toolkit" \
    >"$workdir/toolkit.log" 2>&1 || {
    cat "$workdir/toolkit.log"
    die "the fake toolkit did not build"
}

obj=$workdir/obj
mkdir -p "$obj"
if [ ! -f "$obj/config.status" ]; then
    log "configure UCX $UCX_VERSION --with-cuda=<fake toolkit> (Debian's options)"
    (cd "$obj" && "$ucx_src/configure" --prefix="$workdir/prefix" \
        --with-cuda="$toolkit" --enable-mt --disable-logging --enable-cma \
        --without-rocm --without-verbs --without-rdmacm --without-knem \
        --without-xpmem --without-ugni --without-java --without-go \
        --without-fuse3 --without-gdrcopy --without-mpi --disable-gtest \
        --disable-examples --disable-doxygen-doc) >"$workdir/configure.log" 2>&1 ||
        die "UCX configure failed (see $workdir/configure.log)"
fi
grep -q '^module_LTLIBRARIES *= *libucm_cuda.la' "$obj/src/ucm/cuda/Makefile" ||
    die "UCX's configure did not take the fake toolkit (see $workdir/configure.log)"

log "make libucm, libucs, libucm_cuda"
# UCX's own sources predate newer compilers' warnings: warnings there; the
# module, compiled against the stand-in headers, keeps UCX's -Werror.
{
    make -j"$jobs" -C "$obj/src/ucm" CFLAGS=-Wno-error libucm.la &&
        make -j"$jobs" -C "$obj/src/ucs" CFLAGS=-Wno-error libucs.la &&
        make -j"$jobs" -C "$obj/src/ucm/cuda"
} >"$workdir/make.log" 2>&1 || {
    grep -m5 -E 'error|Error' "$workdir/make.log" || true
    die "UCX build failed (see $workdir/make.log)"
}
module=$obj/src/ucm/cuda/.libs/libucm_cuda.so.0
[ -f "$module" ] || die "no $module after the build"
t_build=$SECONDS

# --- 3. the test program and its user libraries ---------------------------------

tdir=$workdir/test
mkdir -p "$tdir"
log "compat_ucx_cuda_module"
tsrc=$top/test/compat
cflags=(-O2 -g -Wall -Wextra -Werror -Wno-unused-parameter)
{
    gcc "${cflags[@]}" -fPIC -shared -I"$toolkit/include" "$tsrc/compat_ucx_cuda_user.c" \
        -o "$tdir/libcompat_ucx_cuda_user.so" \
        -Wl,-soname,libcompat_ucx_cuda_user.so -L"$toolkit/lib" -lcuda -lcudart &&
        gcc "${cflags[@]}" -fPIC -shared -fno-plt -Wl,-z,relro,-z,now \
            -I"$toolkit/include" "$tsrc/compat_ucx_cuda_user.c" \
            -o "$tdir/libcompat_ucx_cuda_user_late.so" -L"$toolkit/lib" \
            -lcuda -lcudart &&
        gcc "${cflags[@]}" -I"$ucx_src/src" -I"$obj/src" -I"$obj" \
            "$tsrc/compat_ucx_cuda_module.c" -o "$tdir/compat_ucx_cuda_module" \
            -L"$tdir" -lcompat_ucx_cuda_user -L"$obj/src/ucs/.libs" \
            -L"$obj/src/ucm/.libs" -lucs -lucm -ldl \
            -Wl,-rpath-link,"$toolkit/lib"
} >"$workdir/test-build.log" 2>&1 || {
    cat "$workdir/test-build.log"
    die "the test program did not build"
}

# One directory per libucm, holding only its libucm.so.0; and the module
# directory of the framework runs.
libucms=(ucx ours)
mkdir -p "$workdir/lib-ucx" "$workdir/lib-ours" "$workdir/modules"
ln -sfn "$(readlink -f "$obj/src/ucm/.libs/libucm.so.0")" "$workdir/lib-ucx/libucm.so.0"
ln -sfn "$(readlink -f "$ucm_lib")" "$workdir/lib-ours/libucm.so.0"
if [ -f "$DEBIAN_UCM" ]; then
    mkdir -p "$workdir/lib-debian"
    ln -sfn "$DEBIAN_UCM" "$workdir/lib-debian/libucm.so.0"
    libucms=(ucx debian ours)
else
    echo "note: Debian's libucm ($DEBIAN_UCM, package libucx0) not installed: that baseline is left out"
fi
ln -sfn "$(readlink -f "$module")" "$workdir/modules/libucm_cuda.so.0"

# --- 4. the runs --------------------------------------------------------------------

logs=$workdir/logs
rm -rf "$logs" && mkdir -p "$logs"
runs=0
bad_runs=0
bad_baseline=0
bad_exports=0
checks_passed=0
checks_failed=0

# run LIB LOAD MMAP CUDA
run() {
    local lib=$1 load=$2 mmap=$3 cuda=$4 args logf rc got p f label
    label=$(printf '%-6s %-9s mmap=%-6s cuda=%-14s' "$lib" "$load" "$mmap" "'$cuda'")
    logf=$logs/$lib-$load-$mmap-${cuda:-empty}.log
    logf=${logf//,/+}
    if [ "$load" = dlopen ]; then
        args=(--dlopen "$module")
    else
        args=(--framework)
    fi
    set +e
    env LD_LIBRARY_PATH="$workdir/lib-$lib:$obj/src/ucs/.libs:$toolkit/lib:$tdir" \
        UCX_MODULE_DIR="$workdir/modules" UCX_MEM_MMAP_HOOK_MODE="$mmap" \
        UCX_MEM_CUDA_HOOK_MODE="$cuda" \
        timeout -k 5 60 "$tdir/compat_ucx_cuda_module" "${args[@]}" \
        "$tdir/libcompat_ucx_cuda_user_late.so" >"$logf" 2>&1 </dev/null
    rc=$?
    set -e
    runs=$((runs + 1))
    got=$(sed -n 's/^libucm: //p' "$logf")
    if [ "$(dirname "$got" 2>/dev/null)" != "$workdir/lib-$lib" ]; then
        cat "$logf"
        die "$label: the program ran on libucm '$got', not $workdir/lib-$lib/libucm.so.0"
    fi
    p=$(sed -n 's/^\([0-9]*\) passed, [0-9]* failed$/\1/p' "$logf")
    f=$(sed -n 's/^[0-9]* passed, \([0-9]*\) failed$/\1/p' "$logf")
    checks_passed=$((checks_passed + ${p:-0}))
    checks_failed=$((checks_failed + ${f:-0}))
    if [ $rc -eq 0 ]; then
        echo "ok    $label ${p} checks"
        return
    fi
    bad_runs=$((bad_runs + 1))
    if [ "$lib" != ours ]; then
        bad_baseline=$((bad_baseline + 1))
    fi
    if [ -z "$f" ]; then
        echo "DIED  $label exit $rc: $(tail -1 "$logf")"
    else
        echo "FAIL  $label $f of $((p + f)) checks failed:"
    fi
    grep '^FAIL' "$logf" | head -20 | sed 's/^/        /' || true
    echo "      log: $logf"
}

# What the module imports from libucm, and each libucm's missing names
# (the first one is also what the dlopen() check reports).
imports=$(nm -D --undefined-only "$module" | awk '{print $NF}' | sed 's/@.*//' |
    grep -E '^_*ucm_' | sort -u)
echo
echo "=== libucm_cuda.so.0 imports from libucm: ${imports//$'\n'/ }"
for lib in "${libucms[@]}"; do
    missing=$(comm -23 <(echo "$imports") <(nm -D --defined-only \
        "$workdir/lib-$lib/libucm.so.0" | awk '{print $NF}' | sed 's/@.*//' | sort -u))
    if [ -z "$missing" ]; then
        echo "ok    $lib libucm exports all of them"
        continue
    fi
    echo "FAIL  $lib libucm does not export: ${missing//$'\n'/ }"
    if [ "$lib" = ours ]; then
        bad_exports=1
    else
        bad_baseline=$((bad_baseline + 1))
    fi
done

echo
echo "=== UCX $UCX_VERSION libucm_cuda on: ${libucms[*]} (ours: $ucm_lib)"
for lib in "${libucms[@]}"; do
    for load in dlopen framework; do
        # Debian's libucm has no module list to load libucm_cuda from
        [ "$lib" = debian ] && [ "$load" = framework ] && continue
        for mmap in reloc bistro; do
            for cuda in "${cuda_modes[@]}"; do
                run "$lib" "$load" "$mmap" "$cuda"
            done
        done
    done
done

echo
echo "time: source $((t_src - t_start)) s, build $((t_build - t_src)) s," \
    "runs $((SECONDS - t_build)) s, total $((SECONDS - t_start)) s"
echo "runs: $runs, $bad_runs failed"
echo "checks: $checks_passed passed, $checks_failed failed"
if [ $bad_baseline -gt 0 ]; then
    die "$bad_baseline run(s) failed on a UCX libucm (baseline): the test or the fake toolkit is wrong"
fi
[ $bad_runs -eq 0 ] && [ $bad_exports -eq 0 ] || exit 1
echo "ok: UCX $UCX_VERSION's libucm_cuda works on our libucm as on UCX's"
