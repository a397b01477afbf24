#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Device check: UCX 1.13.1's own CUDA module (src/ucm/cuda/cudamem.c,
# compiled unmodified against UCX's source tree) loaded on our libucm.
#   build.sh UCX_SRC_DIR LIBUCM_SO OUTDIR     (on any machine: no CUDA needed)
#   OUTDIR/run.sh                             (on a machine with a GPU)
# run.sh runs ucx_cuda_check in the four combinations of
# UCX_MEM_MMAP_HOOK_MODE and UCX_MEM_CUDA_HOOK_MODE; exit status 0 if all
# pass, 77 (skip) without a usable CUDA device.
set -e
src=$1 libucm=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$src/src/ucm/cuda/cudamem.c" ] || { echo "usage: $0 UCX_SRC LIBUCM_SO OUTDIR"; exit 2; }
mkdir -p "$out/lib" "$out/stub"
cp -L "$libucm" "$out/lib/libucm.so.0"
cc=${CC:-gcc}
# UCX's module, with its own headers and our few CUDA declarations
$cc -c -O2 -fPIC -D_GNU_SOURCE -DUCM_BISTRO_HOOKS=1 \
    -DUCS_MAX_LOG_LEVEL=UCS_LOG_LEVEL_TRACE_POLL -I"$here" -I"$src/src" \
    -I"$src" "$src/src/ucm/cuda/cudamem.c" -o "$out/cudamem.o"
$cc -shared -o "$out/libucx_ucm_cuda.so" "$out/cudamem.o" -Wl,-z,nodelete \
    -L"$out/lib" -l:libucm.so.0 -ldl -lpthread
# a link-time libcuda.so.1 (the device's real one is used at run time)
cat > "$out/stub/cuda_stub.c" <<'STUB'
int cuInit(unsigned f) { (void)f; return 1; }
int cuDeviceGet(int *d, int o) { (void)d; (void)o; return 1; }
int cuDevicePrimaryCtxRetain(void **c, int d) { (void)c; (void)d; return 1; }
int cuCtxSetCurrent(void *c) { (void)c; return 1; }
int cuMemAlloc_v2(unsigned long long *p, unsigned long s) { (void)p; (void)s; return 1; }
int cuMemFree_v2(unsigned long long p) { (void)p; return 1; }
STUB
$cc -shared -fPIC -Wl,-soname,libcuda.so.1 "$out/stub/cuda_stub.c" \
    -o "$out/stub/libcuda.so"
$cc -O2 -Wall -Wextra -Werror "$here/ucx_cuda_check.c" -o "$out/ucx_cuda_check" \
    -L"$out/stub" -lcuda -L"$out/lib" -l:libucm.so.0 -ldl -lpthread
cat > "$out/run.sh" <<'RUN'
#!/bin/sh
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
if ! ldd ./ucx_cuda_check | grep -q 'libcuda.so.1 => /'; then
    echo "SKIP: no libcuda.so.1 (CUDA driver) on this machine"
    exit 77
fi
rc=0
for mmap in bistro reloc; do
    for cuda in bistro reloc; do
        echo "== UCX_MEM_MMAP_HOOK_MODE=$mmap UCX_MEM_CUDA_HOOK_MODE=$cuda"
        UCX_MEM_MMAP_HOOK_MODE=$mmap UCX_MEM_CUDA_HOOK_MODE=$cuda \
        GPUCHECK_BISTRO_EACH=1 timeout 60 ./ucx_cuda_check \
            "$PWD/libucx_ucm_cuda.so"
        r=$?
        [ $r -eq 77 ] && exit 77
        [ $r -eq 0 ] || rc=1
    done
done
exit $rc
RUN
chmod +x "$out/run.sh"
echo "built $out; run $out/run.sh on a machine with a GPU"
